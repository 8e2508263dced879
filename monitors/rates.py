"""Rates and deltas between two samples (pure: no I/O, no clock).

Counters in cpu.stat, io.stat and memory.events are cumulative
(Documentation/admin-guide/cgroup-v2.rst). A counter that went backwards (the cgroup was
removed and re-created between samples, or a process-level sum lost an exited process)
gives **no** rate — None — never a negative or a wrapped one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from types import MappingProxyType
from typing import NamedTuple

from monitors.model import CgroupSample, ThreadSchedstats

__all__ = ["DiskRates", "MIN_SLEEP_FRACTION", "ThreadDemand", "Usage", "counter_delta", "counter_rate", "thread_cores",
           "thread_demand", "usage_between"]


def counter_delta(prev: int | None, cur: int | None) -> int | None:
    """``cur − prev`` for a cumulative counter; None when either is unknown or it went backwards."""
    if prev is None or cur is None or cur < prev:
        return None
    return cur - prev


def counter_rate(prev: int | None, cur: int | None, interval_s: float) -> float | None:
    """Per-second rate of a cumulative counter over ``interval_s``; None as for :func:`counter_delta`."""
    delta = counter_delta(prev, cur)
    if delta is None or interval_s <= 0:
        return None
    return delta / interval_s


@dataclass(frozen=True)
class DiskRates:
    """One disk's throughput over an interval (None where a counter went backwards)."""

    read_bytes_per_s: float | None
    write_bytes_per_s: float | None
    read_iops: float | None
    write_iops: float | None


class Usage(NamedTuple):
    """What a user used over one interval.

    ``cpu_cores`` from cpu.stat ``usage_usec``; ``throttled_fraction`` is the share of CFS
    periods in which she was throttled (``nr_throttled / nr_periods`` deltas);
    ``throttled_cores`` is cpu.stat ``throttled_usec`` per second — summed over the CPUs whose
    run queue of hers was throttled, so ``cpu_cores + throttled_cores`` is what her runnable
    threads would have used (Documentation/scheduler/sched-bwc.rst, "Statistics");
    ``memory_events`` holds deltas of memory.events (``low``, ``high``, ``max``, ``oom``, ``oom_kill``);
    ``memory_growth_bytes_per_s`` is the change of ``memory_used_bytes`` per second (negative
    when she frees); ``memory_current_bytes`` is memory.current at the end (page cache
    included: what the kernel holds for her); ``stall_some_fraction`` is, per controller, the
    share of this very interval in which at least one of her tasks stalled on it (PSI
    ``some`` ``total`` delta ÷ interval; Documentation/accounting/psi.rst),
    ``stall_full_fraction`` the share in which all of them did (``full``; cgroup cpu ``full``
    since Linux 5.13); ``thread_demand_cores`` is the CPU her threads would have used had none of
    them waited for one (throttled included), from their scheduler accounting (None: not read
    at both ends, or not hers to speak for; :func:`thread_demand`), and
    ``thread_paced_cores`` the part of it that threads paced by what they block on ran (0.0
    when it is None): what they ran, which a quota that binds holds down.

    A named tuple built only by :func:`usage_between` (every field given): one per user per
    tick, where a frozen dataclass of fifteen fields cost 4.5 µs (issue 16).
    """

    interval_s: float
    cpu_cores: float | None
    nr_throttled: int | None
    throttled_fraction: float | None
    memory_used_bytes: int | None
    memory_events: Mapping[str, int | None]  # read-only where nothing moved
    disks: dict[str, DiskRates]
    throttled_cores: float | None
    memory_current_bytes: int | None
    memory_growth_bytes_per_s: float | None
    stall_some_fraction: dict[str, float]
    stall_full_fraction: dict[str, float]
    thread_demand_cores: float | None
    thread_paced_cores: float


_EVENT_KEYS = ("low", "high", "max", "oom", "oom_kill")  # the memory.events counters a Usage has deltas of
_event_counts = attrgetter(*_EVENT_KEYS)
#: A Usage's events where memory.events did not change: one read-only copy for every such user.
_NO_EVENTS = MappingProxyType(dict.fromkeys(_EVENT_KEYS, 0))


def usage_between(prev: CgroupSample, cur: CgroupSample) -> Usage:
    """Usage over ``prev.time_s .. cur.time_s``."""
    dt = cur.time_s - prev.time_s
    pc, cc = prev.cpu, cur.cpu
    usage_usec_per_s = counter_rate(pc and pc.usage_usec, cc and cc.usage_usec, dt)
    throttled = counter_delta(pc and pc.nr_throttled, cc and cc.nr_throttled)
    periods = counter_delta(pc and pc.nr_periods, cc and cc.nr_periods)
    events = {}
    if prev.memory_events and cur.memory_events:
        if prev.memory_events is cur.memory_events:  # its bytes did not change (Cgroup.memory_events)
            events = _NO_EVENTS
        else:
            deltas = map(counter_delta, _event_counts(prev.memory_events), _event_counts(cur.memory_events))
            events = dict(zip(_EVENT_KEYS, deltas))
    disks = {}
    for dev, now in cur.io.items():
        was = prev.io.get(dev)
        if was is None:
            continue  # first sight of this device: no interval yet
        disks[dev] = DiskRates(
            counter_rate(was.rbytes, now.rbytes, dt), counter_rate(was.wbytes, now.wbytes, dt),
            counter_rate(was.rios, now.rios, dt), counter_rate(was.wios, now.wios, dt),
        )
    throttled_usec_per_s = counter_rate(pc and pc.throttled_usec, cc and cc.throttled_usec, dt)
    used_before, used_now = prev.memory_used_bytes, cur.memory_used_bytes
    growth = None if used_before is None or used_now is None or dt <= 0 else (used_now - used_before) / dt
    stalls, full_stalls = {}, {}
    for controller, now in cur.pressure.items():
        was = prev.pressure.get(controller)
        if was is None:
            continue  # first reading of it: no interval yet
        if was is now and dt > 0:  # the same reading at both ends (its bytes did not change): no stall
            stalls[controller] = 0.0
            if now.full_total_usec is not None:
                full_stalls[controller] = 0.0
            continue
        rate = counter_rate(was.some_total_usec, now.some_total_usec, dt)
        if rate is not None:
            stalls[controller] = min(1.0, rate / 1e6)
        rate = counter_rate(was.full_total_usec, now.full_total_usec, dt)  # None where either has no full line
        if rate is not None:
            full_stalls[controller] = min(1.0, rate / 1e6)
    threads = thread_demand(prev.thread_schedstats, cur.thread_schedstats,
                            None if usage_usec_per_s is None else usage_usec_per_s / 1e6)
    return Usage(
        thread_demand_cores=None if threads is None else threads.cores,
        thread_paced_cores=0.0 if threads is None else threads.paced_cores,
        throttled_cores=None if throttled_usec_per_s is None else throttled_usec_per_s / 1e6,
        memory_current_bytes=cur.memory_current_bytes,
        memory_growth_bytes_per_s=growth,
        stall_some_fraction=stalls,
        stall_full_fraction=full_stalls,
        interval_s=dt,
        cpu_cores=None if usage_usec_per_s is None else usage_usec_per_s / 1e6,
        nr_throttled=throttled,
        throttled_fraction=None if throttled is None or not periods else throttled / periods,
        memory_used_bytes=used_now,
        memory_events=events,
        disks=disks,
    )


#: A thread that blocked at most this often per second of CPU it ran (bursts of ≥ 1 ms: the
#: GIL's 5 ms hand-offs, a progress line, a barrier) is CPU-bound; one that blocked more often
#: (a reader's every request, a 1 ms timer) is paced by what it blocks on.
CPU_BOUND_BLOCKS_PER_CPU_S = 1000.0
#: A CPU-bound thread runnable for at least this share of the interval wants one core.
RUNNABLE_CORE_FRACTION = 0.5
#: A CPU-bound thread that blocked twice or more is read by its duty cycle only when its sleep —
#: what is left of the interval after its run and its waits — is at least this share of the
#: interval: the sleep carries the error of both readings' times (the threads are read one by
#: one; a wait in progress at a reading is not yet in its schedstat), and in a loop throttled to
#: a few hundredths of a core an error of ±30 ms alone, against its run, read it below one core
#: (the review of 2026-11-27: 19% of ticks at 0.02 core with two blocks a tick). Less: ``(r + w) / T``.
#: A larger error the probe of ``paced_cores`` takes back up, a quarter a tick.
MIN_SLEEP_FRACTION = 0.05
#: The threads read at both ends must account for this share of the CPU her cgroup used, or
#: the reading is not hers to speak for (short-lived processes: make -j, pipelines).
MIN_COVERAGE = 0.8


class ThreadDemand(NamedTuple):
    """Her threads' CPU demand over an interval (cores, :func:`thread_demand`), and the part of it
    read from what threads ran between their sleeps (``paced_cores`` ≤ ``cores``): a quota that
    binds holds it down, and the caller probes it up."""

    cores: float
    paced_cores: float


def thread_cores(ran_ns: float, waited_ns: float, blocked: int, interval_ns: float) -> tuple[float, bool]:
    """One thread's CPU demand over an interval of ``interval_ns``, in cores, and whether it was
    read from what it ran between its sleeps (a part the caller probes: ``paced_cores``): it ran
    ``ran_ns``, waited for a CPU ``waited_ns`` and blocked ``blocked`` times meanwhile (the rule:
    :func:`thread_demand`)."""
    if blocked > CPU_BOUND_BLOCKS_PER_CPU_S * ran_ns / 1e9:
        return min(1.0, ran_ns / interval_ns), True
    slept_ns = interval_ns - ran_ns - waited_ns
    if blocked <= 1 or slept_ns < MIN_SLEEP_FRACTION * interval_ns:
        share = (ran_ns + waited_ns) / interval_ns  # runnable but for one sleep, or a short one
        return (1.0 if share >= RUNNABLE_CORE_FRACTION else share), False
    share = ran_ns / (ran_ns + slept_ns)  # its duty cycle: its cycle without the waits for a CPU
    return (1.0 if share >= RUNNABLE_CORE_FRACTION else share), True


def thread_demand(before: ThreadSchedstats | None, now: ThreadSchedstats | None,
                  used_cores: float | None = None) -> ThreadDemand | None:
    """Her threads' CPU demand between two readings (:func:`monitors.schedstat.thread_schedstats`,
    each timed on its own), in cores; ``used_cores`` is what her cgroup used meanwhile.

    Each thread in both readings ran ``r`` and waited for a CPU ``w`` (ns, deltas) of the
    interval ``T``, and blocked (voluntary context switches) ``b`` times:

    * **CPU-bound** — ``b`` at most :data:`CPU_BOUND_BLOCKS_PER_CPU_S` per second of ``r``: with
      the CPUs to itself it would run while it is awake. A block counts as it goes to sleep:
      blocked at most once (``b ≤ 1``), it went to sleep at most once in the interval (asleep
      at its start counts none) and was runnable the rest: its share is ``(r + w) / T``.
      Blocked more (``b ≥ 2``), it cycled between running and sleeping, its sleep
      ``s = T − r − w``; without its waits for a CPU it would cycle in ``r + s``: its share is
      ``r / (T − w)``, its duty cycle, which no wait for a CPU raises — when ``s`` is at least
      :data:`MIN_SLEEP_FRACTION` of ``T`` (less is within the readings' error: ``(r + w) / T``).
      Either share at :data:`RUNNABLE_CORE_FRACTION` or above is one core. A duty cycle is
      ``paced_cores`` too: a sleep can be a wait for a sibling of hers that her quota holds (a
      lock passed between threads, a GIL), so under a quota that binds it is probed up as a
      paced thread is — sixteen threads passing one lock under a 0.3-core quota read 0.31 core
      by their duty cycles, and without the probe would stay at that cap (the review of
      2026-11-27).
      A busy loop is one core at any quota, however late the daemon itself got to read it
      (under emulation a reading held up 150 ms behind the users' loops made two loops read
      1.69 cores and lifted a cap for a tick); so is a thread handing the GIL to a sibling
      every 5 ms (asleep a tenth of the interval: its duty cycle 0.8). Counted as
      ``(r + w) / T``, a thread that blocked read its waits as demand: in the scenario tier
      under host load (tests/scenarios, ``cpu-disk-mixed``; TCG's CPU per 64 KiB read rose from
      0.2 to 1–3 ms) ``dd iflag=direct`` blocked 360–1000 times a CPU-second, below the bound,
      and beside the mixed user's throttled loop ran 0.07–0.15 core, waited 0.15–0.41 and slept
      the rest: credited 0.25–0.48 core and, runnable half the interval, a whole core (her
      demand 1.2–2.0 cores, her use alone 1.08); its duty cycle was 0.10–0.23.
    * **Paced by what it blocks on** (its disk, its io.max, a timer, a peer): what it ran,
      ``r / T``; whether it would run more without its waits its schedstat does not say. These
      are ``paced_cores`` as well: under a quota that binds they ran at the quota's pace, and
      the caller probes them up (:func:`governor.control.demand.cpu_evidence`).
      Counted by its waits, a reader held to half the disk read as wanting twice its CPU, and
      one throttled to 0.04 core, runnable nearly always, a whole core (on this project's build
      host a thread sleeping 1 ms at a time under a 0.05-core quota waited 0.96 s a second and
      blocked hundreds of times; a busy loop beside it, never).

    Threads born or gone within the interval, or whose counters went back (a reused tid), are
    left out. None when either reading is None, or when the threads read at both ends ran
    less than :data:`MIN_COVERAGE` of ``used_cores`` (her work is short-lived processes: the
    cgroup's counters speak for it better).
    """
    if before is None or now is None or now.time_s <= before.time_s:
        return None
    interval_ns = (now.time_s - before.time_s) * 1e9
    cpu_bound = covered_ns = paced = 0.0
    for tid, (run_ns, wait_ns, blocks) in now.by_tid.items():
        was = before.by_tid.get(tid)
        if was is None or run_ns < was[0] or wait_ns < was[1] or blocks < was[2]:
            continue
        ran = run_ns - was[0]
        covered_ns += ran
        cores, probed = thread_cores(ran, wait_ns - was[1], blocks - was[2], interval_ns)
        if probed:
            paced += cores
        else:
            cpu_bound += cores
    if used_cores is not None and covered_ns / interval_ns < MIN_COVERAGE * used_cores:
        return None
    return ThreadDemand(cpu_bound + paced, paced)
