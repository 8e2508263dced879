"""One reading of a user's cgroup counters (I/O at the edge; see :mod:`monitors.rates`).

Reads cpu.stat, memory.current, memory.stat, memory.events, io.stat and the three pressure
files: seven small files per user per tick. A controller that is not enabled leaves its
fields None instead of failing the whole sample; a vanished cgroup raises
:class:`cgroups.CgroupGone` for the caller to drop the user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cgroups import Cgroup, ControllerMissing, CpuStat, IoStat, MemoryEvents, Pressure

__all__ = ["CgroupSample", "MEMORY_STAT_KEYS", "sample_cgroup"]

MEMORY_STAT_KEYS = ("file", "shmem")  # what memory_used_bytes needs of memory.stat


@dataclass(frozen=True)
class CgroupSample:
    """Counters of one cgroup at ``time_s`` (monotonic seconds). Memory in bytes."""

    time_s: float
    cpu: CpuStat | None
    memory_current_bytes: int | None
    memory_stat: dict[str, int] = field(default_factory=dict)
    memory_events: MemoryEvents | None = None
    io: dict[str, IoStat] = field(default_factory=dict)
    pressure: dict[str, Pressure] = field(default_factory=dict)

    @property
    def memory_used_bytes(self) -> int | None:
        """memory.current less reclaimable page cache: ``current − (file − shmem)``.

        Shared memory is counted in ``file`` but cannot be reclaimed without swap, so it stays.
        """
        if self.memory_current_bytes is None:
            return None
        cache = self.memory_stat.get("file", 0) - self.memory_stat.get("shmem", 0)
        return max(0, self.memory_current_bytes - max(0, cache))


def sample_cgroup(cg: Cgroup, clock: Callable[[], float]) -> CgroupSample:
    """Read ``cg``'s counters now (``clock()`` is called once, before the reads)."""
    now = clock()
    pressure = {}
    for controller in ("cpu", "memory", "io"):
        found = _optional(lambda c=controller: cg.pressure(c))
        if found is not None:
            pressure[controller] = found
    return CgroupSample(
        time_s=now,
        cpu=_optional(cg.cpu_stat),
        memory_current_bytes=_optional(cg.memory_current),
        memory_stat=_optional(lambda: cg.memory_stat(MEMORY_STAT_KEYS)) or {},
        memory_events=_optional(cg.memory_events),
        io=_optional(cg.io_stat) or {},
        pressure=pressure,
    )


def _optional(read):
    try:
        return read()
    except ControllerMissing:
        return None
