"""Backend that asks systemd to set the limits on a cgroup v1 (legacy or hybrid) host.

With systemd as PID 1 on a v1 host, systemd owns ``user.slice/user-UID.slice`` in every v1
hierarchy, as it does on v2: limits go through
``org.freedesktop.systemd1.Manager.SetUnitProperties(unit, runtime=true, …)`` (the D-Bus code
of :class:`governor.enforce.systemd.SystemdBackend`, inherited), with the properties systemd
maps to v1 files. Reads come from the v1 files, the effective truth
(:class:`governor.enforce.cgroupfs_v1.CgroupfsV1Backend`, which also keeps each slice's first
reading for an exact restore). The planner's v2 knobs mean on v1 what
:mod:`governor.enforce.v1map` says; here they become (systemd.resource-control(5), "Options"
and "Deprecated Options"; kernel Documentation/admin-guide/cgroup-v1/memory.rst,
blkio-controller.rst, Documentation/scheduler/sched-bwc.rst):

==============  =============================================  ==================================
v2 knob         systemd property (runtime)                     v1 file systemd writes
==============  =============================================  ==================================
``cpu.max``     ``CPUQuotaPerSecUSec``, ``CPUQuotaPeriodUSec``  ``cpu.cfs_quota_us``,
                (t, µs; infinity = UINT64_MAX)                 ``cpu.cfs_period_us``
``cpu.weight``  ``CPUShares`` (t) with ``CPUWeight`` unset     ``cpu.shares``
                (UINT64_MAX): systemd applies CPUWeight
                before CPUShares when both are set, and
                converts it as ⌊w·1024/100⌋, not v1map's
                rounding
``memory.max``  ``MemoryMax`` (t, bytes): on legacy systemd   ``memory.limit_in_bytes``
                writes it as MemoryLimit, and it wins over
                an admin's ``MemoryLimit=``
``memory.low``  none: systemd 252 ignores ``MemoryLow`` on     ``memory.soft_limit_in_bytes``,
                legacy (and setting it makes MemoryMax, not    written by this backend (systemd
                MemoryLimit, decide the limit)                 never writes that file)
``memory.high`` none (v1 has no such limit; ``MemoryHigh``     —
                is ignored on legacy like MemoryLow)
``io.max``      ``IOReadBandwidthMax``/``IOWriteBandwidthMax``  ``blkio.throttle.read|write_bps_``
                (a(st): ``/dev/block/MAJ:MIN``, bytes/s)       ``device``; iops limits go to the
                                                               ``*_iops_device`` files directly
                                                               (systemd ignores ``IO*IOPSMax``
                                                               on legacy and never writes them)
==============  =============================================  ==================================

Measured on systemd 252 with ``systemd.unified_cgroup_hierarchy=0`` (tests/systemd_vm,
README "cgroup v1 and hybrid hosts").

**Restore leaves no drop-in behind.** Runtime properties live in
``/run/systemd/system.control/UNIT.d/50-NAME.conf`` until reboot: a logged-out user's come back
at her next login. When a user leaves governance (logout, a reload that exempts her) and at
stop (:meth:`releasing`), each slice gets its originals back, then ``RevertUnitFiles`` removes
its drop-ins — but only when every drop-in that call would remove is one this process created
(:func:`dropin_path` of a property it sent, absent before its first write to the unit):
``RevertUnitFiles`` also deletes the admin's own ``/etc/systemd/system/UNIT.d`` and
``system.control`` drop-ins (measured), so a unit that has any — an admin's
``systemctl set-property --runtime`` made while we run included — is left with runtime
drop-ins holding her original values, and :attr:`kept_dropins` says which (they override her
later edits of the same properties until reboot). Reverting unlinks files only; systemd keeps
the values just written until its next reload, when it reads her configuration again — the
same values. The CPU accounting turned on for slices systemd would not otherwise put in the cpu
hierarchy (:meth:`account_new_user_slices`) is reverted the same way at stop
(:meth:`revert_accounting`), not when one user leaves.

**systemd ≥ 242** (:data:`MIN_SYSTEMD_VERSION`): ``CPUQuotaPeriodSec=`` came in 242; older
(Ubuntu 18.04's 237, EL8's 239) is refused by :meth:`ping`, so ``auto`` writes the files
(:class:`governor.enforce.cgroupfs_v1.CgroupfsV1Backend`) there. Tested on 252.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cgroups.limits import IoMax, check_cpu_weight, check_device
from cgroups_v1.mounts import V1Mounts
from governor.enforce.cgroupfs_v1 import CgroupfsV1Backend
from governor.enforce.model import EnforceError, Knob, LimitSet, Target, TargetGone
from governor.enforce.systemd import UINT64_MAX, Property, SystemdBackend, _t, properties_for_io_max

__all__ = ["MIN_SYSTEMD_VERSION", "NAME", "REVERT_SCOPE", "SystemdV1Backend", "dropin_path",
           "properties_for_v1_cpu_shares", "properties_for_v1_io_max", "properties_for_v1_memory_max"]

NAME = "systemd-v1"
log = logging.getLogger(__name__)

#: The directories whose ``UNIT.d`` drop-ins ``RevertUnitFiles`` removes (systemctl(1) "revert").
REVERT_SCOPE = ("/etc/systemd/system", "/etc/systemd/system.control", "/run/systemd/system",
                "/run/systemd/system.control")
_IO_BANDWIDTH = ("IOReadBandwidthMax", "IOWriteBandwidthMax")
CONTROL_DIR = "/run/systemd/system.control"
#: The name systemd saves a runtime property under where it is not the property's own
#: (``50-NAME.conf``; measured on 252, the rest keep theirs: CPUShares, MemoryMax, CPUAccounting…).
_DROPIN_NAME = {"CPUQuotaPerSecUSec": "CPUQuota", "CPUQuotaPeriodUSec": "CPUQuotaPeriodSec"}
#: CPUQuotaPeriodSec= (sent with every cpu.max) came in systemd 242.
MIN_SYSTEMD_VERSION = 242


def dropin_path(unit: str, prop: str) -> str:
    """The runtime drop-in that ``SetUnitProperties(unit, runtime=true, [prop])`` writes."""
    return f"{CONTROL_DIR}/{unit}.d/50-{_DROPIN_NAME.get(prop, prop)}.conf"


def systemd_version(text: str) -> int | None:
    """The major version in systemd's ``Version`` property ("252.22-1~deb12u1", "239 (239-74.el8)")."""
    digits = ""
    for ch in str(text).strip():
        if not ch.isdigit():
            break
        digits += ch
    return int(digits) if digits else None


def properties_for_v1_cpu_shares(shares: int) -> list[Property]:
    """cpu.shares ``shares`` (2–262144) as ``CPUShares``, with ``CPUWeight`` unset so that
    systemd applies the shares (it prefers CPUWeight when both are set)."""
    return [("CPUWeight", _t(None)), ("CPUShares", _t(shares))]


def properties_for_v1_memory_max(limit_bytes: int | None) -> list[Property]:
    """memory.limit_in_bytes as ``MemoryMax`` (bytes; None: infinity)."""
    if limit_bytes is not None and not 0 <= limit_bytes < UINT64_MAX:
        raise EnforceError(f"memory.max: {limit_bytes} is not a byte count systemd takes")
    return [("MemoryMax", _t(limit_bytes))]


def properties_for_v1_io_max(device: str, limit: IoMax) -> list[Property]:
    """The bandwidth half of io.max for one disk: ``IORead|WriteBandwidthMax`` naming
    ``/dev/block/MAJ:MIN`` (the iops half has no property systemd honours on v1)."""
    return [p for p in properties_for_io_max(device, limit) if p[0] in _IO_BANDWIDTH]


class SystemdV1Backend(SystemdBackend):
    """systemd's properties on a v1 host; reads and the files systemd leaves alone through
    :class:`CgroupfsV1Backend`.

    Args:
        mounts: the v1 hierarchies (default: this host's).
        connect, timeout_s, clock: as :class:`SystemdBackend`.

    Raises (every method): :class:`EnforceError`; :class:`TargetGone` when the slice vanished
    (outside :meth:`releasing`).
    """

    name = NAME
    memory_high_throttles = False  # v1 has no memory.high (MemoryHigh= is ignored there)

    def __init__(self, mounts: V1Mounts | None = None, connect: Callable[[], Any] | None = None,
                 timeout_s: float = 5.0, clock: Callable[[], float] = time.monotonic):
        super().__init__(connect, timeout_s, clock)
        self.files = CgroupfsV1Backend(mounts)
        self._dropins_before: dict[str, frozenset[str]] = {}  # unit → its drop-ins before our first write
        self._sent: dict[str, set[str]] = {}  # unit → the drop-ins our writes made (dropin_path)
        self._released: list[str] = []
        self._accounted: list[str] = []  # units account_user_slices set, not reverted since
        self.kept_dropins: dict[str, list[str]] = {}  # unit → drop-ins not ours, so not reverted (last revert)

    def ping(self) -> None:
        """:meth:`SystemdBackend.ping`, and systemd's version at least :data:`MIN_SYSTEMD_VERSION`.

        Raises:
            EnforceError: no answer, or an older systemd.
        """
        super().ping()
        version = systemd_version(self.manager_property("Version"))
        if version is not None and version < MIN_SYSTEMD_VERSION:
            raise EnforceError(f"systemd {version} is older than {MIN_SYSTEMD_VERSION}, which the systemd backend "
                               "needs on cgroup v1 (CPUQuotaPeriodSec=)")

    # -- reads: the v1 files ----------------------------------------------------------------------

    def read(self, target: Target) -> LimitSet:
        return self.files.read(target)

    def memory_current(self, target: Target) -> int | None:
        return self.files.memory_current(target)

    # -- writes -----------------------------------------------------------------------------------
    # set_cpu_max is SystemdBackend's: CPUQuotaPerSecUSec and CPUQuotaPeriodUSec, the same on v1.

    def set_cpu_weight(self, target: Target, weight: int) -> None:
        self._set(target, lambda: properties_for_v1_cpu_shares(self.files.shares_for(target, check_cpu_weight(weight))))

    def set_memory(self, target: Target, knob: Knob, limit_bytes: int | None) -> None:
        if knob.file == "memory.max":
            self._set(target, lambda: properties_for_v1_memory_max(limit_bytes))
        else:  # memory.low: the soft limit file; memory.high: nothing (governor.enforce.v1map)
            self._file(target, lambda: self.files.set_memory(target, knob, limit_bytes))

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None:
        self._set(target, lambda: properties_for_v1_io_max(check_device(device), limit.validate()))
        self._file(target, lambda: self.files.set_io_max(target, device, limit, keys=("riops", "wiops")))

    def _file(self, target: Target, write: Callable[[], None]) -> None:
        """A write systemd does not make on v1. Within :meth:`releasing` a slice that is gone
        needs nothing: the kernel took those files with it."""
        try:
            write()
        except TargetGone:
            if not self._to_inactive:
                raise

    # -- drop-ins ---------------------------------------------------------------------------------

    def dropins(self, unit: str) -> frozenset[str]:
        """``unit``'s drop-in files as systemd lists them (``DropInPaths``)."""
        return frozenset(self.unit_property(unit, "DropInPaths"))

    def _before_write(self, unit: str, names: list[str]) -> None:
        if unit not in self._dropins_before:
            self._dropins_before[unit] = self.dropins(unit)
        self._sent.setdefault(unit, set()).update(dropin_path(unit, name) for name in names)
        if self._to_inactive and unit not in self._released:
            self._released.append(unit)

    def revertible(self, unit: str, now: frozenset[str]) -> list[str]:
        """The drop-ins ``RevertUnitFiles`` would remove that this process did not create (an
        empty list: reverting removes only ours). Ours are the runtime drop-ins of properties
        it sent (:func:`dropin_path`) that were absent before its first write to ``unit``."""
        before = self._dropins_before.get(unit, frozenset(now))
        scope = tuple(f"{d}/{unit}.d/" for d in REVERT_SCOPE)
        ours = self._sent.get(unit, set()) - before
        return sorted(p for p in now if p.startswith(scope) and p not in ours)

    @contextmanager
    def releasing(self):
        """:meth:`SystemdBackend.releasing`, then the drop-ins of every unit written within it
        are reverted where only ours would go (the module docstring); the others are listed
        in :attr:`kept_dropins` and logged."""
        self._released = []
        self.kept_dropins = {}
        with super().releasing():
            yield
        for unit in self._released:
            self._revert(unit)

    def revert_accounting(self) -> None:
        """At stop: revert the units :meth:`account_user_slices` set and no release reverted
        (their accounting drop-ins; only ours, as :meth:`releasing`)."""
        for unit in list(self._accounted):
            self._revert(unit)

    def _revert(self, unit: str) -> None:
        """``RevertUnitFiles`` of ``unit`` if only our drop-ins would go, then forget the unit
        (a later write or accounting starts afresh); else keep and log them. Never raises."""
        try:
            foreign = self.revertible(unit, self.dropins(unit))
            if foreign:
                self.kept_dropins[unit] = foreign
                log.warning("%s: runtime drop-ins kept, holding her original limits: RevertUnitFiles would also "
                            "remove %s", unit, ", ".join(foreign))
                return
            self._manager("RevertUnitFiles", "as", ([unit],), f"{unit}: RevertUnitFiles")
        except EnforceError as exc:
            log.warning("%s: runtime drop-ins not reverted: %s", unit, exc)
            return
        self._dropins_before.pop(unit, None)
        self._sent.pop(unit, None)
        if unit in self._accounted:
            self._accounted.remove(unit)

    # -- host ---------------------------------------------------------------------------------------

    def account_user_slices(self, blkio: bool) -> list[str]:
        """Turn on ``CPUAccounting`` (and ``BlockIOAccounting`` when ``blkio``) at runtime on
        every loaded ``user-*.slice``, so that systemd puts the user slices in the cpu,cpuacct
        (and blkio) hierarchies, where the governor finds and measures them.

        systemd 252 on legacy defaults to ``DefaultCPUAccounting=no`` and makes a slice's
        directory in a hierarchy only when some unit under it, or a sibling, needs that
        controller (measured: accounting on one user slice makes every sibling's, including
        ones created later; on ``user.slice`` itself it makes none). Returns the units set now
        (a unit set before is not set again).

        Raises:
            EnforceError: systemd refused or did not answer.
        """
        units = self._manager("ListUnitsByPatterns", "asas", ([], ["user-*.slice"]), "ListUnitsByPatterns user-*.slice")
        names = sorted(u[0] for u in units[0] if u[0] not in self._accounted)
        props = [("CPUAccounting", ("b", True))] + ([("BlockIOAccounting", ("b", True))] if blkio else [])
        for name in names:
            self._before_write(name, [prop for prop, _ in props])
            self._manager("SetUnitProperties", "sba(sv)", (name, True, props), f"{name}: SetUnitProperties accounting")
            self._accounted.append(name)  # only once set: a failed call is tried again next tick
        return names

    def account_new_user_slices(self, relative: str = "user.slice") -> list[str]:
        """Per tick, cheap: when a user slice is in the memory hierarchy (systemd's
        ``DefaultMemoryAccounting=yes``) but not in the cpu one — the first user to log in
        after a start with nobody logged in, as at boot — :meth:`account_user_slices`.
        Returns the units set (usually none, at the cost of one directory listing: the cpu
        hierarchy's is read only when the memory one has a slice not accounted already).

        Raises:
            EnforceError: as :meth:`account_user_slices`.
        """
        mounts = self.files.mounts
        if "memory" not in mounts:
            return []
        unaccounted = _user_slices(Path(mounts["memory"], relative)) - set(self._accounted)
        if not unaccounted or not unaccounted - _user_slices(Path(mounts["cpu"], relative)):
            return []
        return self.account_user_slices(blkio="blkio" in mounts)


def _user_slices(path: Path) -> set[str]:
    """The ``user-*.slice`` directories' names in ``path`` (none when it does not exist)."""
    try:
        return {n for n in os.listdir(path) if n.startswith("user-") and n.endswith(".slice")}
    except FileNotFoundError:
        return set()
