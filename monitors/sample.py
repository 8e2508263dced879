"""One reading of a user's cgroup counters (I/O at the edge; see :mod:`monitors.rates`).

Reads cpu.stat, memory.current, memory.stat, memory.events, io.stat and the three pressure
files: up to eight small files per user per tick (three when the details are not wanted and
her memory.stat of a tick before still holds), and for a user her CPU quota throttles, her
threads' scheduler accounting; for a still user (:data:`governor.control.loop.STILL_KEPT_S`)
only the two or three of :func:`unmoved`. A controller that is not enabled leaves its fields
None instead of failing the whole sample; a vanished cgroup raises :class:`cgroups.CgroupGone`
for the caller to drop the user.
"""

from __future__ import annotations

from collections.abc import Callable

from cgroups import Cgroup, ControllerMissing
from monitors.model import MEMORY_STAT_KEYS, NOTHING_READ, CgroupSample, StatOrigin
from monitors.schedstat import read_threads

__all__ = ["MEMORY_STAT_MAX_AGE_S", "MEMORY_STAT_MOVED_BYTES", "optional", "sample_cgroup", "unmoved"]

#: memory.stat is read again once memory.current has moved this far from what it was when her
#: kept reading was taken: what that reading's page cache (``file − shmem``) can be off by,
#: unless her anonymous memory and her page cache moved by as much in opposite directions...
MEMORY_STAT_MOVED_BYTES = 1 << 20
#: ...which this bounds in time: a kept memory.stat older than this is read again. The error
#: admitted is what moved between her anonymous memory and her page cache in that time while
#: memory.current stood within the bound — which is what happens at a memory.high or
#: memory.max (the kernel reclaims her cache for her growth). Each such reclaim counts in her
#: memory.events (``high``, ``max``: mm/memcontrol.c, ``memcg_memory_event`` on the charge
#: path): with her memory.events read (``memory_detail``), a kept memory.stat is taken again only
#: while they have not moved since it; without them, the loop passes no kept sample for a user
#: with either limit in force (:meth:`governor.control.loop.Governor._sample`).
MEMORY_STAT_MAX_AGE_S = 4.5


def sample_cgroup(cg: Cgroup, clock: Callable[[], float], memory_detail: bool = True,
                  io_detail: bool = True, cpu_detail: bool = False, procfs: str = "/proc",
                  kept: CgroupSample | None = None) -> CgroupSample:
    """Read ``cg``'s counters now (``clock()`` is called once, before the reads).

    Always cpu.stat, memory.current and cpu.pressure; memory.stat (``file``, ``shmem``) unless
    ``kept``'s still holds; memory.events and memory.pressure with ``memory_detail``; io.stat
    and io.pressure with ``io_detail`` — so a user without a memory cap on a host without
    governed disks costs three or four reads a tick instead of eight. With ``cpu_detail`` her
    threads' scheduler accounting too (:func:`monitors.schedstat.read_threads`: cgroup.threads
    and two /proc files per thread).

    ``kept``: her sample of a tick before, or None to read everything. Its memory.stat (and its
    :attr:`~monitors.model.CgroupSample.memory_stat_origin`) is taken again instead of reading
    the file while memory.current is within :data:`MEMORY_STAT_MOVED_BYTES` of what it was when
    that was read, and that was under :data:`MEMORY_STAT_MAX_AGE_S` ago (a clock gone back
    reads it), and — with ``memory_detail`` — her memory.events are ``kept``'s: the largest file
    of the tick, and the kernel's dearest to write (issue 16). Only ``memory_used_bytes`` reads
    it. For a user at a memory limit pass None, or pass it with ``memory_detail`` (see the bound).
    """
    now = clock()
    pressure = {}
    for controller in ("cpu", "memory", "io") if memory_detail and io_detail else \
            ("cpu", "memory") if memory_detail else ("cpu", "io") if io_detail else ("cpu",):
        try:
            pressure[controller] = cg.pressure_totals(controller)
        except ControllerMissing:
            pass
    cpu = optional(cg.cpu_stat)
    current = optional(cg.memory_current)
    events = optional(cg.memory_events) if memory_detail else None
    origin = kept.memory_stat_origin if kept is not None else None
    if (origin is not None and current is not None and 0.0 <= now - origin.time_s < MEMORY_STAT_MAX_AGE_S
            and abs(current - origin.memory_current_bytes) < MEMORY_STAT_MOVED_BYTES
            and (not memory_detail or (events is not None and events == kept.memory_events))):
        stat = kept.memory_stat
    else:
        stat = optional(cg.memory_stat, MEMORY_STAT_KEYS)
        origin = None if stat is None or current is None else StatOrigin(now, current)
    return CgroupSample(
        time_s=now,
        cpu=cpu,
        memory_current_bytes=current,
        memory_stat=stat or NOTHING_READ,
        memory_events=events,
        io=_io_stat(cg) if io_detail else NOTHING_READ,
        pressure=pressure,
        thread_schedstats=read_threads(cg.path, clock, procfs) if cpu_detail else None,
        memory_stat_origin=origin,
    )


def unmoved(cg: Cgroup, kept: CgroupSample, io_detail: bool) -> bool:
    """Whether ``cg``'s cpu.stat and memory.current now — and io.stat with ``io_detail`` — are
    ``kept``'s: none of her tasks ran, nothing was charged to her or uncharged, no writeback of
    hers reached a governed disk. Two or three reads instead of :func:`sample_cgroup`'s three to
    eight. Raises as :func:`sample_cgroup`."""
    return (optional(cg.cpu_stat) == kept.cpu and optional(cg.memory_current) == kept.memory_current_bytes
            and (not io_detail or _io_stat(cg) == kept.io))


def _io_stat(cg: Cgroup):
    """io.stat per device; nothing read when the io controller is not enabled."""
    return optional(cg.io_stat) or NOTHING_READ


def optional(read, *args):
    """``read(*args)``, or None when the controller it reads is not enabled (ControllerMissing)."""
    try:
        return read(*args)
    except ControllerMissing:
        return None
