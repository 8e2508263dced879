"""One reading of a user's cgroup counters (I/O at the edge; see :mod:`monitors.rates`).

Reads cpu.stat, memory.current, memory.stat, memory.events, io.stat and the three pressure
files: up to eight small files per user per tick (four when the details are not wanted), and
for a user her CPU quota throttles, her threads' scheduler accounting. A controller that is
not enabled leaves its fields None instead of failing the whole sample; a vanished cgroup
raises :class:`cgroups.CgroupGone` for the caller to drop the user.
"""

from __future__ import annotations

from collections.abc import Callable

from cgroups import Cgroup, ControllerMissing
from monitors.model import MEMORY_STAT_KEYS, NOTHING_READ, CgroupSample
from monitors.schedstat import read_threads

__all__ = ["optional", "sample_cgroup"]


def sample_cgroup(cg: Cgroup, clock: Callable[[], float], memory_detail: bool = True,
                  io_detail: bool = True, cpu_detail: bool = False, procfs: str = "/proc") -> CgroupSample:
    """Read ``cg``'s counters now (``clock()`` is called once, before the reads).

    Always cpu.stat, memory.current, memory.stat (``file``, ``shmem``) and cpu.pressure;
    memory.events and memory.pressure with ``memory_detail``; io.stat and io.pressure with
    ``io_detail`` — so a user without a memory cap on a host without governed disks costs
    four reads a tick instead of eight. With ``cpu_detail`` her threads' scheduler accounting
    too (:func:`monitors.schedstat.read_threads`: cgroup.threads and two /proc files per thread).
    """
    now = clock()
    pressure = {}
    for controller in ("cpu", "memory", "io") if memory_detail and io_detail else \
            ("cpu", "memory") if memory_detail else ("cpu", "io") if io_detail else ("cpu",):
        try:
            pressure[controller] = cg.pressure_totals(controller)
        except ControllerMissing:
            pass
    return CgroupSample(
        time_s=now,
        cpu=optional(cg.cpu_stat),
        memory_current_bytes=optional(cg.memory_current),
        memory_stat=optional(cg.memory_stat, MEMORY_STAT_KEYS) or NOTHING_READ,
        memory_events=optional(cg.memory_events) if memory_detail else None,
        io=(optional(cg.io_stat) or NOTHING_READ) if io_detail else NOTHING_READ,
        pressure=pressure,
        thread_schedstats=read_threads(cg.path, clock, procfs) if cpu_detail else None,
    )


def optional(read, *args):
    """``read(*args)``, or None when the controller it reads is not enabled (ControllerMissing)."""
    try:
        return read(*args)
    except ControllerMissing:
        return None
