"""One reading of a user's slice on a cgroup v1 host, as the same :class:`CgroupSample` v2 gives.

Reads (Documentation/admin-guide/cgroup-v1/): ``cpuacct.usage`` (ns) and ``cpuacct.stat``
(USER_HZ) for CPU time, ``cpu.stat`` for CFS throttling (``throttled_time`` in ns),
``memory.usage_in_bytes`` and ``memory.stat`` (``total_cache``, ``total_shmem``: hierarchical,
as the slice's sessions live in child cgroups) for memory, ``memory.failcnt`` and
``memory.oom_control`` for memory events, and ``blkio.throttle.io_service_bytes_recursive``
and ``io_serviced_recursive`` for disk I/O. Converted to v2's units and names:

* ``cpu``: :class:`CpuStat` with ``usage_usec`` = cpuacct.usage ÷ 1000, ``throttled_usec`` =
  throttled_time ÷ 1000.
* ``memory_events``: ``max`` = memory.failcnt (times usage hit the limit), ``oom_kill`` and
  ``oom`` = oom_control ``oom_kill``; ``low`` and ``high`` are always 0 (v1 has no memory.low
  or memory.high, so nothing to count).
* ``pressure``: empty. v1 has no per-cgroup PSI files, so demand is estimated from usage,
  CFS throttling, memory growth and failcnt only (the loop treats missing PSI as "no stall
  evidence", as on v2 kernels booted without PSI).

A hierarchy the slice lacks leaves its fields None; a vanished slice raises
:class:`cgroups.CgroupGone`.
"""

from __future__ import annotations

from collections.abc import Callable

from cgroups.limits import CpuStat, IoStat, MemoryEvents
from cgroups_v1.slice import V1Slice
from monitors.model import CgroupSample
from monitors.sample import optional
from monitors.schedstat import THREADS_V1, read_threads

__all__ = ["sample_v1_slice"]

_V1_STAT_KEYS = ("total_cache", "total_shmem")


def sample_v1_slice(s: V1Slice, clock: Callable[[], float], memory_detail: bool = True,
                    io_detail: bool = True, cpu_detail: bool = False, procfs: str = "/proc") -> CgroupSample:
    """Read ``s``'s counters now (``clock()`` once, before the reads); details as
    :func:`monitors.sample.sample_cgroup` (her threads from ``tasks`` in the cpu hierarchy)."""
    now = clock()
    cpu = optional(lambda: _cpu(s))
    memory = optional(lambda: s.in_("memory"))
    current = stat = events = None
    if memory is not None:
        current = optional(memory.memory_usage_in_bytes)
        raw = optional(lambda: memory.memory_stat(_V1_STAT_KEYS)) or {}
        stat = {"file": raw.get("total_cache", 0), "shmem": raw.get("total_shmem", 0)} if raw else {}
        events = optional(lambda: _events(memory))  # always: failcnt is v1's only evidence of a limit hit
    io = {}
    if io_detail:
        io = optional(lambda: _io(s)) or {}
    threads = read_threads(s.path, clock, procfs, THREADS_V1) if cpu_detail else None
    return CgroupSample(time_s=now, cpu=cpu, memory_current_bytes=current, memory_stat=stat or {},
                        memory_events=events, io=io, pressure={}, thread_schedstats=threads)


def _cpu(s: V1Slice) -> CpuStat:
    acct = s.in_("cpuacct")
    usage_ns = acct.cpuacct_usage()
    user_usec, system_usec = acct.cpuacct_stat_usec()
    throttling = optional(lambda: s.in_("cpu").cpu_stat())
    if throttling is None:
        return CpuStat(usage_ns // 1000, user_usec, system_usec)
    return CpuStat(usage_ns // 1000, user_usec, system_usec, throttling.nr_periods, throttling.nr_throttled,
                   throttling.throttled_time // 1000)


def _events(memory) -> MemoryEvents:
    oom = memory.memory_oom_control()
    kills = oom.oom_kill if oom.oom_kill is not None else 0
    return MemoryEvents(low=0, high=0, max=memory.memory_failcnt(), oom=kills, oom_kill=kills)


def _io(s: V1Slice) -> dict[str, IoStat]:
    blkio = s.in_("blkio")
    done, ios = blkio.blkio_throttle_io_service_bytes(), blkio.blkio_throttle_io_serviced()
    return {dev: IoStat(b.read, b.write, ios[dev].read if dev in ios else 0, ios[dev].write if dev in ios else 0)
            for dev, b in done.items()}
