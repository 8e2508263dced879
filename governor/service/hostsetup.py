"""What a policy becomes on this host: the monitor, the backend and the capacity vector.

* **Monitor.** :func:`governor.service.cgroupkind.choose` picks the interface. v2 (cpu,
  memory and io in cgroup v2): users are the ``user.slice/user-UID.slice`` cgroups
  (:class:`monitors.cgroupmonitor.CgroupMonitor`). v1 (cpu and memory on v1 hierarchies: v1
  and hybrid hosts): the same slices in each v1 hierarchy, under the policy's
  ``cgroup_v1.parent`` (:class:`monitors.cgroupv1monitor.CgroupV1Monitor`). Mixed (cpu on a
  v1 hierarchy, memory in v2): users are found in the cpu hierarchy as on v1, each controller
  read from its own interface (:class:`monitors.mixed.MixedMonitor`). Else: only a
  dry run is possible; per-uid use is summed from /proc
  (:class:`monitors.procmonitor.ProcMonitor`) and nothing can be enforced.
* **Backend.** ``dry-run`` when asked (flag, ``mode: dry-run`` or ``backend: dry-run``); else
  :func:`governor.enforce.make_backend` of the policy's ``backend`` — on v1 its v1 variant:
  :class:`governor.enforce.systemd_v1.SystemdV1Backend` (``systemd``, or ``auto`` when systemd
  is PID 1 and answers), :class:`governor.enforce.cgroupfs_v1.CgroupfsV1Backend` (``cgroupfs``,
  or ``auto`` without systemd). With systemd on v1, CPU (and block I/O) accounting is turned
  on for the user slices before a tick that finds one outside the cpu hierarchy (systemd 252
  puts none there without it), and reverted at stop (``prepare``, ``finish``). On a mixed host
  :class:`governor.enforce.mixed.CgroupfsMixedBackend` (``cgroupfs`` or ``auto``; ``systemd``
  is refused: :func:`governor.enforce.make_backend` says why).
* **Capacity.** :func:`monitors.capacity.host_capacity` less ``reserve``: the most users may
  share. Each tick the loop measures what is really left for them (the CPU the rest of the
  host uses; ``MemAvailable``, keeping free the reserve or at least 2% of memory, up to
  1 GiB: :data:`KEEP_FREE_FRACTION`). Disks are those named in ``capacity.disks`` (sysfs
  cannot tell a disk's bandwidth; see ``drfgov calibrate io``).
* **Network.** With ``net`` enforced (and not a dry run): a
  :class:`governor.shaping.shaper.Shaper` for the NICs in ``capacity.nics`` (else every NIC
  whose driver reports a speed), each direction a resource ``net:IF:tx``/``net:IF:rx`` in bits/s.
  Nothing is installed here: the daemon installs it when it starts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from cgroups import Cgroup
from cgroups_v1.cgroup import V1Cgroup
from governor.config.identity import exempt_names
from governor.config.policy import Policy, absent_devices
from governor.control.model import Capacity, Monitor
from governor.enforce import DryRunBackend, make_backend
from governor.enforce.cgroupfs_v1 import CgroupfsV1Backend
from governor.enforce.mixed import CgroupfsMixedBackend
from governor.enforce.systemd_v1 import SystemdV1Backend
from governor.enforce.model import Backend, EnforceError
from governor.shaping.model import link_resources
from governor.service.cgroupkind import choose
from governor.shaping.shaper import Shaper
from monitors.capacity import HostCapacity, cpu_cores_v1, host_capacity, interfaces, loopbacks
from monitors.cgroupmonitor import CgroupMonitor
from monitors.cgroupv1monitor import CgroupV1Monitor
from monitors.mixed import MixedMonitor
from monitors.procmonitor import ProcMonitor

__all__ = ["HostSetup", "SetupError", "is_dry_run", "set_up"]

#: Memory the kernel should always have available, when the policy reserves less: a share of
#: MemTotal (the kernel's own watermarks and a margin for the tick it takes memory.high to
#: act), at most KEEP_FREE_MAX_BYTES.
KEEP_FREE_FRACTION = 0.02
KEEP_FREE_MAX_BYTES = 2**30


class SetupError(Exception):
    """The host cannot run the policy as asked; the message says why and how to fix it."""


@dataclass
class HostSetup:
    monitor: Monitor
    backend: Backend
    backend_reason: str
    capacity: Capacity
    source: str  # where measurements come from, for logs
    notes: list[str] = field(default_factory=list)  # things the admin should know (logged once)
    network: Shaper | None = None
    #: run before each tick (the daemon logs its EnforceError and ticks anyway): keeps the host
    #: ready for the monitor — on v1 with systemd, user slices put in the cpu hierarchy
    prepare: Callable[[], object] | None = None
    #: run at stop after the limits are restored (never raises): undoes what ``prepare`` did
    finish: Callable[[], None] | None = None


def is_dry_run(policy: Policy, dry_run_flag: bool) -> bool:
    """Whether nothing may be written: the flag, ``mode: dry-run`` or ``backend: dry-run``."""
    return dry_run_flag or policy.mode == "dry-run" or policy.backend == "dry-run"


def set_up(policy: Policy, dry_run: bool, clock: Callable[[], float], mountinfo: str | None = None,
           sysfs: str = "/sys", procfs: str = "/proc") -> HostSetup:
    """Build the pieces for ``policy`` on this host.

    Raises:
        SetupError: enforcing without a usable cgroup v2 hierarchy, a backend that does not
            answer, or no CPU or memory left after the reserve.
    """
    notes: list[str] = []
    prepare = finish = None
    exempt = exempt_names(policy)
    min_uid, max_uid = policy.governed.min_uid, policy.governed.max_uid
    kind = choose(mountinfo)
    user_slice = None
    monitor: Monitor
    if kind.kind == "v2":
        user_slice = Cgroup(kind.hierarchy.root / "user.slice")
        monitor = CgroupMonitor(user_slice, clock, min_uid, exempt, max_uid=max_uid)
        source = f"cgroup v2 slices under {user_slice.path} ({kind.reason})"
    elif kind.kind in ("v1", "mixed"):
        if kind.kind == "v1":
            v1 = CgroupV1Monitor(kind.mounts, clock, min_uid, exempt, policy.cgroup_v1_parent, max_uid=max_uid)
            source = f"cgroup v1 slices under {v1.user_slice} in each hierarchy ({kind.reason})"
        else:
            v1 = MixedMonitor(kind.layout, clock, min_uid, exempt, policy.cgroup_v1_parent, max_uid=max_uid)
            source = (f"slices under {v1.user_slice} in the cgroup v1 cpu hierarchy and user.slice in cgroup v2 "
                      f"({kind.reason})")
        monitor = v1
        if not v1.user_slice_path.is_dir():
            if dry_run:  # no systemd made user slices here: show the plan from /proc instead
                monitor = ProcMonitor(clock, min_uid, exempt, max_uid=max_uid)
                source = f"/proc per-uid sums ({v1.user_slice_path} does not exist: no per-user v1 slices to read)"
            notes.append(f"{v1.user_slice_path} does not exist: users are governed once their slices appear "
                         "(systemd-logind creates them; without systemd, create PARENT/user.slice/user-UID.slice "
                         "in each hierarchy" + (", and user.slice/user-UID.slice in cgroup v2" if kind.kind == "mixed"
                                                else "") + ")")
    else:
        if not dry_run:
            raise SetupError(f"cannot enforce: {kind.reason}. To see the plan anyway: drfgov run --dry-run --once")
        monitor = ProcMonitor(clock, min_uid, exempt, max_uid=max_uid)
        source = "/proc per-uid sums (no usable cgroup v2 or v1 here: dry run only)"
        notes.append(kind.reason)
    if dry_run:
        reader = CgroupfsV1Backend(kind.mounts) if isinstance(monitor, CgroupV1Monitor) else \
            CgroupfsMixedBackend(kind.layout) if isinstance(monitor, MixedMonitor) else None  # v1 or mixed slices
        backend, reason = DryRunBackend(reader=reader), "dry run: nothing is written"
    elif kind.kind == "mixed":
        try:
            backend, why = make_backend(policy.backend, mixed=kind.layout)
        except (EnforceError, ValueError) as exc:
            raise SetupError(f"backend {policy.backend} (mixed cgroup v1/v2 host): {exc}") from None
        reason = f"{kind.reason}; {why}"
        if Path("/run/systemd/system").is_dir():
            notes.append(f"systemd runs on this mixed host and owns user.slice in the v1 hierarchies, but the governor "
                         f"writes the files itself ({why}); systemd rewrites the v1 ones when a slice's properties "
                         "change")
    elif kind.kind == "v1":
        try:
            backend, why = make_backend(policy.backend, v1_mounts=kind.mounts)
        except EnforceError as exc:
            raise SetupError(f"backend {policy.backend} (cgroup v1): {exc}") from None
        reason = f"{kind.reason}; {why}"
        if isinstance(backend, SystemdV1Backend):  # systemd puts user slices in the cpu hierarchy on demand
            prepare = functools.partial(backend.account_new_user_slices, f"{policy.cgroup_v1_parent}/user.slice"
                                        if policy.cgroup_v1_parent else "user.slice")
            finish = backend.revert_accounting
            notes.append(f"systemd on cgroup v1: when a user slice is outside the cpu hierarchy (DefaultCPUAccounting="
                         f"no), CPU{' and block I/O' if 'blkio' in kind.mounts else ''} accounting is turned on "
                         "(runtime) for the user slices, and reverted at stop")
        elif Path("/run/systemd/system").is_dir():
            notes.append(f"systemd runs on this cgroup v1 host and owns user.slice, but the governor writes the v1 "
                         f"files itself ({why}); systemd rewrites them when a slice's properties change")
    else:
        try:
            backend, reason = make_backend(policy.backend)
        except EnforceError as exc:
            raise SetupError(f"backend {policy.backend}: {exc}") from None
    host = host_capacity(user_slice, policy.reserve.memory_bytes, sysfs, procfs)
    if isinstance(monitor, (CgroupV1Monitor, MixedMonitor)):  # bounded by user.slice's own cfs quota, as on v2 by its cpu.max
        host = replace(host, cpu_cores=cpu_cores_v1(V1Cgroup(monitor.user_slice_path)))
    cores = host.cpu_cores - policy.reserve.cpu_cores
    if cores <= 0:
        raise SetupError(f"{policy.source}: reserve.cpu_cores {policy.reserve.cpu_cores:g} leaves no CPU for users "
                         f"(the host has {host.cpu_cores:g} cores)")
    if host.memory_bytes <= 0:
        raise SetupError(f"{policy.source}: reserve.memory_bytes {policy.reserve.memory_bytes} leaves no memory for "
                         f"users (the host has {host.memory_bytes + policy.reserve.memory_bytes} bytes)")
    disks = {}
    absent = absent_devices(policy, host.disks, None)  # what check-config warned of too
    notes += [f"{policy.source}: {why}" for why in absent.values()]
    for name, override in policy.disks.items():
        if ("capacity", "disks", name) in absent:
            continue
        if isinstance(monitor, ProcMonitor):
            notes.append(f"capacity.disks.{name}: /proc does not tell I/O per disk; its I/O is not governed")
        elif kind.kind == "v1" and "blkio" not in kind.mounts:
            notes.append(f"capacity.disks.{name}: no blkio hierarchy on this cgroup v1 host; its I/O is not governed")
        elif kind.kind == "mixed" and kind.layout.interface("io") == "none":
            notes.append(f"capacity.disks.{name}: io is neither in cgroup v2 nor on a blkio hierarchy here; its I/O is "
                         "not governed")
        else:
            disks[host.disks[name].device] = (override.read_bytes_per_s, override.write_bytes_per_s)
    if "io" in policy.enforce and not disks and not policy.disks:  # else each disk's note says why not
        notes.append("no disk has a configured bandwidth (capacity.disks): disk I/O is measured but not governed; "
                     "see drfgov calibrate io")
    network = None
    if "net" in policy.enforce:
        if dry_run:
            notes.append("net: a dry run does not shape traffic, and per-user traffic is measured only through "
                         "the shaping classes: network is left out")
        else:
            network = _network(policy, host, clock, notes, sysfs)
    links = {r: link.capacity_bits_per_s for r, link in network.links.items()} if network else {}
    total_memory = host.memory_bytes + policy.reserve.memory_bytes
    keep_free = max(policy.reserve.memory_bytes, min(int(KEEP_FREE_FRACTION * total_memory), KEEP_FREE_MAX_BYTES))
    capacity = Capacity(cores, float(host.memory_bytes), disks, links, host_cpu_cores=host.cpu_cores,
                        memory_keep_free_bytes=keep_free)
    return HostSetup(monitor, backend, reason, capacity, source, notes, network, prepare, finish)


def _network(policy: Policy, host: HostCapacity, clock: Callable[[], float], notes: list[str],
             sysfs: str) -> Shaper | None:
    """The shaper for the configured interfaces (any kind: a bond, bridge or veth too), or else
    every NIC with a known speed."""
    if policy.nics_bits_per_s:
        absent = absent_devices(policy, None, interfaces(sysfs), host.nics, loopbacks(sysfs))
        notes += [f"{policy.source}: {why}" for why in absent.values()]
        nics = {name: bits for name, bits in policy.nics_bits_per_s.items() if ("capacity", "nics", name) not in absent}
    else:
        nics = {n.name: float(n.speed_bits_per_s) for n in host.nics.values() if n.speed_bits_per_s}
    if not nics:
        notes.append("net is enforced but no NIC has a known speed: set capacity.nics (bits_per_s)")
        return None
    ingress = {name: policy.nics_ingress.get(name, True) for name in nics}
    return Shaper(link_resources(nics, ingress), clock)
