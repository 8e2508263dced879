"""Host capacity: what the governed users share (reads /proc and /sys; never writes).

* CPU: CPUs usable by ``user.slice`` — its ``cpuset.cpus.effective`` when present, else this
  process's affinity — further bounded by ``user.slice``'s own ``cpu.max`` quota (on cgroup v1
  hosts its ``cpu.cfs_quota_us``/``cpu.cfs_period_us``: v1 also refuses a child quota above
  its parent's, so the users' quotas must fit in it; :func:`cpu_cores_v1`).
* Memory: ``MemTotal`` (/proc/meminfo) less a configurable reserve for the system.
* Disks: whole disks in /sys/block backed by a device (no loop, zram, device-mapper or
  removable media); bandwidth is not knowable from sysfs — configure it, or measure it with
  ``drfgov calibrate io``.
* NICs: interfaces in /sys/class/net backed by a device, with the link ``speed`` (Mbit/s) when
  the driver reports one; :func:`interfaces` names every interface (a bond, bridge or veth too).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from cgroups import Cgroup, CgroupError
from cgroups_v1.cgroup import V1Cgroup

__all__ = ["Disk", "HostCapacity", "Nic", "cpu_cores", "cpu_cores_v1", "disks", "host_capacity", "interfaces",
           "memory_total_bytes", "nics"]


@dataclass(frozen=True)
class Disk:
    name: str
    device: str  # "MAJ:MIN"
    rotational: bool


@dataclass(frozen=True)
class Nic:
    name: str
    speed_bits_per_s: int | None  # None: the driver does not report a speed


@dataclass(frozen=True)
class HostCapacity:
    cpu_cores: float
    memory_bytes: int
    disks: dict[str, Disk] = field(default_factory=dict)
    nics: dict[str, Nic] = field(default_factory=dict)


def host_capacity(user_slice: Cgroup | None = None, memory_reserve_bytes: int = 0,
                  sysfs: str = "/sys", procfs: str = "/proc") -> HostCapacity:
    """Everything above in one value."""
    return HostCapacity(
        cpu_cores(user_slice),
        max(0, memory_total_bytes(procfs) - memory_reserve_bytes),
        {d.name: d for d in disks(sysfs)},
        {n.name: n for n in nics(sysfs)},
    )


def cpu_cores(user_slice: Cgroup | None = None) -> float:
    """CPUs the users' slice may run on, bounded by its cpu.max quota (cores, may be fractional)."""
    cores = float(len(os.sched_getaffinity(0)))
    if user_slice is None:
        return cores
    try:
        effective = user_slice.read_text("cpuset.cpus.effective").strip()
        if effective:
            cores = float(_count_cpus(effective))
    except CgroupError:
        pass
    try:
        quota = user_slice.cpu_max().cores
        if quota is not None:
            cores = min(cores, quota)
    except CgroupError:
        pass
    return cores


def cpu_cores_v1(user_slice: V1Cgroup) -> float:
    """This process's CPUs, bounded by the cfs quota of ``user_slice`` (its directory in the v1 cpu
    hierarchy; cores, may be fractional). A missing directory or file bounds nothing, nor does one
    that reads as garbage: the reader's :class:`~cgroups.errors.ParseError` (a quota or period
    the kernel would not hold — a period of 0 among them, sched-bwc.rst: 1 ms … 1 s — is one)."""
    cores = float(len(os.sched_getaffinity(0)))
    try:
        quota_usec = user_slice.cpu_cfs_quota_us()
        if quota_usec is not None:
            cores = min(cores, quota_usec / user_slice.cpu_cfs_period_us())
    except CgroupError:
        pass
    return cores


def _count_cpus(cpulist: str) -> int:
    """Number of CPUs in a cpulist such as ``0-3,8,10-11``."""
    count = 0
    for part in cpulist.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def memory_total_bytes(procfs: str = "/proc") -> int:
    """``MemTotal`` from /proc/meminfo, in bytes."""
    for line in Path(procfs, "meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"{procfs}/meminfo has no MemTotal line")


def disks(sysfs: str = "/sys") -> list[Disk]:
    """Whole, non-removable disks backed by a device."""
    found = []
    for node in sorted(Path(sysfs, "block").iterdir()):
        if not (node / "device").exists() or _read(node / "removable") == "1":
            continue
        found.append(Disk(node.name, _read(node / "dev") or "", _read(node / "queue" / "rotational") == "1"))
    return found


def nics(sysfs: str = "/sys") -> list[Nic]:
    """Network interfaces backed by a device (not lo, bridges, veth, tunnels)."""
    found = []
    for node in sorted(Path(sysfs, "class", "net").iterdir()):
        if not (node / "device").exists():
            continue
        speed = _read(node / "speed")
        mbit = int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None
        found.append(Nic(node.name, None if mbit is None else mbit * 1_000_000))
    return found


#: ARPHRD_LOOPBACK (include/uapi/linux/if_arp.h): /sys/class/net/IF/type of a loopback device.
ARPHRD_LOOPBACK = 772


def loopbacks(sysfs: str = "/sys") -> list[str]:
    """The names of the loopback interfaces (``type`` ARPHRD_LOOPBACK: ``lo``), sorted: what
    leaves through them never leaves the host, and the governor never shapes it.

    Raises:
        OSError: ``sysfs`` has no readable class/net (not sysfs, or not mounted here).
    """
    return sorted(node.name for node in Path(sysfs, "class", "net").iterdir()
                  if _read(node / "type") == str(ARPHRD_LOOPBACK))


def interfaces(sysfs: str = "/sys") -> list[str]:
    """The names of every network interface, of any kind (/sys/class/net: lo, bonds, bridges,
    veths and tunnels too), sorted.

    Raises:
        OSError: ``sysfs`` has no readable class/net (not sysfs, or not mounted here).
    """
    return sorted(os.listdir(Path(sysfs, "class", "net")))


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:  # some drivers answer EINVAL for speed while the link is down
        return None
