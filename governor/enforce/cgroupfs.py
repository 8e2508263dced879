"""Backend that writes the cgroup v2 files directly.

Use it only where nothing else owns the cgroups (no systemd managing ``user.slice``): the
single-writer rule of Documentation/admin-guide/cgroup-v2.rst ("Delegation", and systemd's
"Control Group APIs and Delegation") says one manager per cgroup.
"""

from __future__ import annotations

from cgroups import CgroupError, CpuMax, IoMax
from governor.enforce.base import LimitSet, MemoryKnob, Target, _enforce_error, read_limit_set

__all__ = ["CgroupfsBackend"]


class CgroupfsBackend:
    """Writes cpu.max, cpu.weight, memory.low|high|max and io.max with :class:`cgroups.Cgroup`."""

    name = "cgroupfs"

    def read(self, target: Target) -> LimitSet:
        return read_limit_set(target.cgroup)

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None:
        self._do(target.cgroup.set_cpu_max, limit)

    def set_cpu_weight(self, target: Target, weight: int) -> None:
        self._do(target.cgroup.set_cpu_weight, weight)

    def set_memory(self, target: Target, knob: MemoryKnob, limit_bytes: int | None) -> None:
        writer = {"low": target.cgroup.set_memory_low, "high": target.cgroup.set_memory_high,
                  "max": target.cgroup.set_memory_max}[knob]
        self._do(writer, limit_bytes)

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None:
        self._do(target.cgroup.set_io_max, device, limit)

    @staticmethod
    def _do(write, *args) -> None:
        try:
            write(*args)
        except CgroupError as exc:
            raise _enforce_error(exc) from None
