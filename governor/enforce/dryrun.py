"""Backend that writes nothing: it records what it would have set, for ``--dry-run``."""

from __future__ import annotations

from dataclasses import dataclass, field

from cgroups import CpuMax, IoMax
from governor.enforce.base import KERNEL_DEFAULTS, LimitSet, MemoryKnob, Target, TargetGone, read_limit_set

__all__ = ["DryRunBackend", "Recorded"]


@dataclass(frozen=True)
class Recorded:
    """One setting the dry run would have made: unit, knob (kernel file name) and value."""

    unit: str
    knob: str
    value: object


@dataclass
class DryRunBackend:
    """Records settings in :attr:`recorded`; reads the real files when they exist, else the
    kernel's defaults (so it also works on hosts without per-user cgroups)."""

    name: str = "dry-run"
    recorded: list[Recorded] = field(default_factory=list)

    def read(self, target: Target) -> LimitSet:
        try:
            return read_limit_set(target.cgroup)
        except TargetGone:
            return KERNEL_DEFAULTS

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None:
        self.recorded.append(Recorded(target.unit, "cpu.max", limit.validate()))

    def set_cpu_weight(self, target: Target, weight: int) -> None:
        self.recorded.append(Recorded(target.unit, "cpu.weight", weight))

    def set_memory(self, target: Target, knob: MemoryKnob, limit_bytes: int | None) -> None:
        self.recorded.append(Recorded(target.unit, f"memory.{knob}", limit_bytes))

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None:
        self.recorded.append(Recorded(target.unit, "io.max", (device, limit.validate())))
