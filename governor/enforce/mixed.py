"""Backend for a mixed host: each knob written to the interface its controller is bound to.

On a host whose cpu controller is on a cgroup v1 hierarchy and whose memory (and maybe io) is
in cgroup v2 (:mod:`cgroups_v1.mixed`), a user's limits live in two places. This backend is the
two file backends composed, unchanged:

* ``cpu.max`` and ``cpu.weight`` → :class:`~governor.enforce.cgroupfs_v1.CgroupfsV1Backend` on
  her v1 side (``cpu.cfs_quota_us``/``cpu.cfs_period_us``, ``cpu.shares``; her first
  ``cpu.shares`` comes back byte for byte at stop, as on a v1 host);
* ``memory.low``, ``memory.high``, ``memory.max`` and ``memory.current`` →
  :class:`~governor.enforce.cgroupfs.CgroupfsBackend` on her v2 cgroup: v2's own files, so
  ``memory.high`` throttles as on a v2 host;
* ``io.max`` → the side io is on (v2 ``io.max``, or v1 ``blkio.throttle.*_device``); with io on
  neither an io write is an :class:`EnforceError` (the host setup governs no disk then).

:meth:`CgroupfsMixedBackend.read` merges the two reads (cpu knobs from the cpu side, memory from
the memory side, io.max from the io side), so the loop's ceilings (an admin's limits are never
lifted), the snapshot and restore see one :class:`LimitSet`. The never-OOM rule holds through
:meth:`memory_current` (v2 ``memory.current``, read afresh): memory.max is never written below
it — the governor's own at least it plus the margin, an admin's own as it is while she holds
no more (the loop's and :func:`governor.enforce.apply.apply_limit_set`'s rule).

A user whose slice is in the cpu hierarchy but has no v2 cgroup (the monitor governs her only
once it is there, :mod:`monitors.mixed`; it may vanish later) reads as the kernel's defaults
there (nothing limits her memory); a restore skips it (its limits went with it: see
:meth:`CgroupfsMixedBackend.releasing`), and a write while governing is an EnforceError naming
the missing directory, not :class:`TargetGone` (she is still here, governed on cpu). Gone from
the cpu hierarchy: TargetGone.

Write the files only where nothing else owns the slices; with systemd as PID 1 see
:func:`governor.enforce.make_backend` (``auto`` writes these files on a mixed host, and why).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from cgroups.errors import CgroupError
from cgroups.limits import CpuMax, IoMax
from cgroups_v1.mixed import MixedLayout, MixedSlice, find_mixed
from governor.enforce.cgroupfs import CgroupfsBackend
from governor.enforce.cgroupfs_v1 import CgroupfsV1Backend
from governor.enforce.model import KERNEL_DEFAULTS, EnforceError, Knob, LimitSet, Target, TargetGone

__all__ = ["CgroupfsMixedBackend", "NAME"]

NAME = "cgroupfs-mixed"
_RAISE = object()


class CgroupfsMixedBackend:
    """The v1 and v2 file backends, each knob routed by its controller's home.

    Args:
        layout: the host's :class:`~cgroups_v1.mixed.MixedLayout` (default: this host's,
            :func:`cgroups_v1.mixed.find_mixed`; what ``drfgov restore`` uses).

    A target's cgroup is a :class:`MixedSlice` (from the mixed monitor) or any object whose
    ``path`` is her directory in a v1 hierarchy (a snapshot's).

    Raises (every method): :class:`EnforceError`, :class:`TargetGone` when her slice left the
    cpu hierarchy.
    """

    name = NAME
    limits_outlive_cgroup = False
    memory_high_throttles = True  # memory is v2's

    def __init__(self, layout: MixedLayout | None = None):
        try:
            self.layout = layout if layout is not None else find_mixed()
        except CgroupError as exc:
            raise EnforceError(str(exc)) from None
        self.v1 = CgroupfsV1Backend(self.layout.v1)
        self.v2 = CgroupfsBackend()
        self._releasing = False

    def slice_of(self, target: Target) -> MixedSlice:
        cg = target.cgroup
        if isinstance(cg, MixedSlice):
            return cg
        try:
            return MixedSlice.from_path(self.layout, cg.path)
        except ValueError as exc:
            raise EnforceError(f"{target.unit}: {exc}") from None

    def _side(self, target: Target, controller: str):
        """(backend, target) of the interface ``controller`` (cpu, memory, io) is on."""
        s = self.slice_of(target)
        home = self.layout.interface(controller)
        if home == "v1":
            return self.v1, Target(target.uid, s.v1)
        if home == "v2":
            return self.v2, Target(target.uid, s.v2)
        raise EnforceError(f"{target.unit}: the {controller} controller is on neither cgroup v1 nor v2 here")

    def _call(self, target: Target, controller: str, call, without_v2=_RAISE):
        """``call(backend, target)`` on ``controller``'s side. Her v2 cgroup missing while she is
        in the cpu hierarchy gives ``without_v2`` when one is given, else an EnforceError (not
        TargetGone: she is still governed on cpu)."""
        backend, side = self._side(target, controller)
        try:
            return call(backend, side)
        except TargetGone as exc:
            if backend is not self.v2 or not self.slice_of(target).exists():
                raise
            if without_v2 is not _RAISE:
                return without_v2
            raise EnforceError(f"{target.unit}: no cgroup v2 directory {side.cgroup.path} for her "
                               f"{controller} ({exc})") from None

    @contextmanager
    def releasing(self) -> Iterator[None]:
        """Restores (:func:`governor.enforce.apply.restore_originals`): nothing outlives a cgroup
        here, so a limit whose v2 file went — her v2 cgroup, or its memory or io controller,
        is gone — is nothing to put back, and is skipped (her cpu side is still restored)."""
        self._releasing = True
        try:
            yield
        finally:
            self._releasing = False

    # -- reads ------------------------------------------------------------------------------------

    def read(self, target: Target) -> LimitSet:
        sides = {home: controller for controller, home in self.layout.homes.items() if home != "none"}  # each read once
        by_home = {home: self._call(target, controller, lambda b, t: b.read(t), without_v2=KERNEL_DEFAULTS)
                   for home, controller in sides.items()}
        cpu = by_home[self.layout.interface("cpu")]
        memory = by_home.get(self.layout.interface("memory"), KERNEL_DEFAULTS)
        io = by_home.get(self.layout.interface("io"), KERNEL_DEFAULTS)
        return LimitSet(cpu.cpu_max, cpu.cpu_weight, memory.memory_low, memory.memory_high, memory.memory_max,
                        io.io_max)

    def memory_current(self, target: Target) -> int | None:
        """What the kernel holds for her now, from the memory side (v2 memory.current, bytes);
        None without the memory controller or a v2 cgroup on her slice."""
        return self._call(target, "memory", lambda b, t: b.memory_current(t), without_v2=None)

    # -- writes -----------------------------------------------------------------------------------

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None:
        self._call(target, "cpu", lambda b, t: b.set_cpu_max(t, limit))

    def set_cpu_weight(self, target: Target, weight: int) -> None:
        self._call(target, "cpu", lambda b, t: b.set_cpu_weight(t, weight))

    def set_memory(self, target: Target, knob: Knob, limit_bytes: int | None) -> None:
        if self._gone_in_v2(target, "memory", knob.file):
            return
        self._call(target, "memory", lambda b, t: b.set_memory(t, knob, limit_bytes))

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None:
        if self._gone_in_v2(target, "io", "io.max"):
            return
        self._call(target, "io", lambda b, t: b.set_io_max(t, device, limit))

    def _gone_in_v2(self, target: Target, controller: str, name: str) -> bool:
        """While releasing, whether ``controller`` is on cgroup v2 and her v2 cgroup lacks file
        ``name`` (the cgroup, or its controller, went — and its limits with it)."""
        return (self._releasing and self.layout.interface(controller) == "v2"
                and not os.path.exists(self.slice_of(target).v2.path / name))
