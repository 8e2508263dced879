"""Backend that writes nothing: it records what it would have set, for ``--dry-run``."""

from __future__ import annotations

from contextlib import nullcontext

from dataclasses import dataclass, field

from cgroups.limits import CpuMax, InvalidLimit, IoMax, check_cpu_weight, check_device
from governor.enforce.cgroupfs import read_limit_set, read_memory_current
from governor.enforce.model import KERNEL_DEFAULTS, EnforceError, Knob, LimitSet, Target, TargetGone

__all__ = ["DryRunBackend", "Recorded"]


@dataclass(frozen=True)
class Recorded:
    """One setting the dry run would have made: unit, knob (kernel file name) and value."""

    unit: str
    knob: str
    value: object


@dataclass
class DryRunBackend:
    """Records settings in :attr:`recorded`; reads the real files. ``reader``: a backend whose
    reads to use instead of the v2 files (the v1 backend on a cgroup v1 host).

    A slice never read reads as the kernel's defaults where it does not exist (a host
    without per-user cgroups: :class:`monitors.procmonitor.ProcMonitor` names slices only).
    One read before and gone since raises :class:`TargetGone`, as the real backends do
    (:func:`governor.enforce.cgroupfs.read_limit_set`): her logout is no change of her limits
    by someone else, and her originals are not replaced by the defaults (the audit of a dry
    run's logouts, which took three "changed by someone else" notes for each)."""

    name: str = "dry-run"
    limits_outlive_cgroup = False  # nothing is written
    recorded: list[Recorded] = field(default_factory=list)
    reader: object | None = None
    #: the paths of the slices read from their files (one a user): gone, they are gone
    _read: set = field(default_factory=set, init=False, repr=False, compare=False)

    @property
    def memory_high_throttles(self) -> bool:
        """As the host's backend whose reads it takes (v1: False), else True (v2)."""
        return getattr(self.reader, "memory_high_throttles", True) if self.reader is not None else True

    def read(self, target: Target) -> LimitSet:
        """Her slice's limits as its files hold them (the kernel's defaults for a slice that
        never existed here).

        Raises:
            TargetGone: her slice, read before, is gone.
            EnforceError: a file is unreadable or malformed.
        """
        path = target.cgroup.path
        try:
            limits = read_limit_set(target.cgroup) if self.reader is None else self.reader.read(target)
        except TargetGone:
            if path in self._read:
                raise
            return KERNEL_DEFAULTS
        self._read.add(path)
        return limits

    def releasing(self):
        """Nothing outlives a cgroup here: a vanished slice took its limits with it."""
        return nullcontext()

    def memory_current(self, target: Target) -> int | None:
        try:
            return read_memory_current(target.cgroup) if self.reader is None else self.reader.memory_current(target)
        except TargetGone:
            return None

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None:
        self._record(target, "cpu.max", limit.validate)

    def set_cpu_weight(self, target: Target, weight: int) -> None:
        self._record(target, "cpu.weight", lambda: check_cpu_weight(weight))

    def set_memory(self, target: Target, knob: Knob, limit_bytes: int | None) -> None:
        self._record(target, knob.file, lambda: limit_bytes)

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None:
        self._record(target, "io.max", lambda: (check_device(device), limit.validate()))

    def _record(self, target: Target, knob: str, value_of) -> None:
        try:
            value = value_of()
        except InvalidLimit as exc:  # what the kernel would refuse is refused here too
            raise EnforceError(f"{target.unit}: {exc}") from None
        self.recorded.append(Recorded(target.unit, knob, value))
