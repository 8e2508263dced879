"""Backend that writes the cgroup v1 files of a user's slice directly (hosts whose cpu, memory
and blkio controllers are bound to v1 hierarchies: EL8, older Ubuntu, hybrid hosts).

The knobs the planner produces are v2's; :mod:`governor.enforce.v1map` says what each becomes
here (``cpu.max`` → CFS quota/period, ``cpu.weight`` → ``cpu.shares``, ``memory.max`` →
``memory.limit_in_bytes``, ``memory.low`` → ``memory.soft_limit_in_bytes``, ``memory.high`` →
nothing, ``io.max`` → ``blkio.throttle.*_device``) and :meth:`CgroupfsV1Backend.read` reads them
back as v2 knobs, so the loop, the snapshot and ``drfgov restore`` work unchanged. The
never-OOM rule is the loop's and :func:`governor.enforce.apply.apply_limit_set`'s, through
:meth:`memory_current` (``memory.usage_in_bytes``): memory.limit_in_bytes is never written
below what the kernel holds — the governor's own at least that plus the margin, an admin's own
as it is while she holds no more.

**Exact restore.** ``cpu.shares`` and ``memory.soft_limit_in_bytes`` hold values the v2 knobs
cannot say exactly (shares 1000 is weight 97.66; a soft limit of 0 and an unlimited one are
both memory.low 0). The first reading of each slice's files is kept: asked to write the knob
value that reading maps to, the backend writes the file's original text back. So the daemon's
restore at stop puts every file back exactly; ``drfgov restore`` after a crash (a new process,
only the snapshot) writes the mapped value (shares within 0.5%).

With systemd as PID 1 on a v1 host, systemd owns the slices:
:class:`governor.enforce.systemd_v1.SystemdV1Backend` sets its properties instead and uses this
backend for reads and for the two files systemd leaves alone (the soft limit, the iops limits).
This one is for v1 hosts without systemd (or ``backend: cgroupfs``).
"""

from __future__ import annotations

import os

from contextlib import nullcontext
from pathlib import Path

from cgroups.errors import CgroupError, CgroupGone, ControllerMissing
from cgroups.limits import CpuMax, InvalidLimit, IoMax, check_cpu_weight
from cgroups_v1.cgroup import THROTTLE_FILES
from cgroups_v1.mounts import V1Mounts, find_v1
from cgroups_v1.slice import V1Slice
from cgroups_v1.values import check_bytes_or_unlimited
from governor.enforce.cgroupfs import enforce_error
from governor.enforce.model import KERNEL_DEFAULTS, EnforceError, Knob, LimitSet, Target
from governor.enforce.v1map import (
    cpu_max_from_cfs, cpu_weight_from_shares, io_max_from_throttle, memory_low_from_soft_limit, shares_to_write,
    soft_limit_to_write,
)

__all__ = ["CgroupfsV1Backend", "NAME"]

NAME = "cgroupfs-v1"


class CgroupfsV1Backend:
    """Writes a slice's v1 files with :class:`cgroups_v1.slice.V1Slice`.

    Args:
        mounts: the v1 hierarchies (default: :func:`cgroups_v1.mounts.find_v1` of this host).

    A target's cgroup may be a :class:`V1Slice` (from the v1 monitor) or any object with a
    ``path`` in one of the hierarchies (a snapshot's): the other hierarchies follow from it.

    Raises (every method): :class:`EnforceError`, :class:`TargetGone` when the slice vanished.
    """

    name = NAME
    limits_outlive_cgroup = False
    memory_high_throttles = False  # v1 has no memory.high

    def __init__(self, mounts: V1Mounts | None = None):
        try:
            self.mounts = mounts if mounts is not None else find_v1()
        except CgroupError as exc:
            raise EnforceError(str(exc)) from None
        # a slice (path, and its cpu directory's inode: one made again under the name is another)
        # → its original raw shares and soft limit
        self._first: dict[tuple[Path, int], dict[str, int | None]] = {}

    def slice_of(self, target: Target) -> V1Slice:
        cg = target.cgroup
        if isinstance(cg, V1Slice):
            return cg
        try:
            return V1Slice.from_path(self.mounts, cg.path)
        except ValueError as exc:
            raise EnforceError(f"{target.unit}: {exc}") from None

    def releasing(self):
        """Nothing outlives a cgroup here: a vanished slice took its limits with it."""
        return nullcontext()

    # -- reads ------------------------------------------------------------------------------------

    def read(self, target: Target) -> LimitSet:
        s = self.slice_of(target)
        try:
            cpu = s.in_("cpu")
            cpu_max = cpu_max_from_cfs(cpu.cpu_cfs_quota_us(), cpu.cpu_cfs_period_us())
            shares = cpu.cpu_shares()
            soft = limit = None
            try:
                memory = s.in_("memory")
                soft, limit = memory.memory_soft_limit_in_bytes(), memory.memory_limit_in_bytes()
            except ControllerMissing:
                pass
            io_max = {}
            try:
                blkio = s.in_("blkio")
                io_max = io_max_from_throttle({k: blkio.blkio_throttle(k) for k in THROTTLE_FILES})
            except ControllerMissing:
                pass
        except ControllerMissing:
            return KERNEL_DEFAULTS
        except CgroupError as exc:
            raise enforce_error(exc) from None
        identity = _identity(s)
        if identity not in self._first:  # a slice made again under the name replaces the one before
            self._first = {key: first for key, first in self._first.items() if key[0] != s.path}
            self._first[identity] = {"cpu.shares": shares, "memory.soft_limit_in_bytes": soft}
        return LimitSet(cpu_max, cpu_weight_from_shares(shares), memory_low_from_soft_limit(soft), None, limit, io_max)

    def memory_current(self, target: Target) -> int | None:
        """memory.usage_in_bytes (bytes; page cache included), None without the memory hierarchy."""
        s = self.slice_of(target)
        try:
            return s.in_("memory").memory_usage_in_bytes()
        except ControllerMissing:
            return None
        except CgroupError as exc:
            raise enforce_error(exc) from None

    # -- writes -----------------------------------------------------------------------------------

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None:
        s = self.slice_of(target)
        self._do(target, lambda: s.in_("cpu").set_cpu_cfs(limit.validate().quota_usec, limit.period_usec))

    def set_cpu_weight(self, target: Target, weight: int) -> None:
        s = self.slice_of(target)

        self._do(target, lambda: s.in_("cpu").set_cpu_shares(self.shares_for(target, check_cpu_weight(weight))))

    def set_memory(self, target: Target, knob: Knob, limit_bytes: int | None) -> None:
        s = self.slice_of(target)

        def write():
            check_bytes_or_unlimited(knob.file, limit_bytes)
            if knob.file == "memory.max":
                s.in_("memory").set_memory_limit_in_bytes(limit_bytes)
            elif knob.file == "memory.low":
                first = self._first.get(_identity(s), {})
                original = (first["memory.soft_limit_in_bytes"],) if "memory.soft_limit_in_bytes" in first else None
                s.in_("memory").set_memory_soft_limit_in_bytes(soft_limit_to_write(limit_bytes, original))
            elif not s.exists():  # memory.high: v1 has no such limit; nothing is written (governor.enforce.v1map)
                raise CgroupGone(s.path)
        self._do(target, write)

    def set_io_max(self, target: Target, device: str, limit: IoMax, keys: tuple[str, ...] = THROTTLE_FILES) -> None:
        """io.max of whole disk ``device`` into the blkio.throttle files of ``keys`` (rbps, wbps,
        riops, wiops; default all four)."""
        s = self.slice_of(target)

        def write():
            limit.validate()
            blkio = s.in_("blkio")
            for key in keys:
                blkio.set_blkio_throttle(key, device, getattr(limit, key))
        self._do(target, write)

    def shares_for(self, target: Target, weight: int) -> int:
        """The cpu.shares that stand for ``weight`` in ``target``'s slice
        (:func:`governor.enforce.v1map.shares_to_write` with the slice's first reading)."""
        return shares_to_write(weight, self._first.get(_identity(self.slice_of(target)), {}).get("cpu.shares"))

    @staticmethod
    def _do(target: Target, write) -> None:
        try:
            write()
        except InvalidLimit as exc:
            raise EnforceError(f"{target.unit}: {exc}") from None
        except CgroupError as exc:  # ControllerMissing, WriteRefused, CgroupGone
            raise enforce_error(exc) from None


def _identity(s: V1Slice) -> tuple[Path, int]:
    """Which slice ``s`` is: its path, and its cpu directory's inode number (0 when gone): a
    slice removed and made again under the same name (a logout and a login) is another, whose
    first reading is its own (the cgroup audit of 2026-11-26: the old slice's raw cpu.shares
    and soft limit were "restored exactly" onto the new one)."""
    try:
        return s.path, os.stat(s.path).st_ino
    except OSError:
        return s.path, 0
