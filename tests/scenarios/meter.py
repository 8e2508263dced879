"""What a cgroup uses, in the governor's units, read straight from the kernel's files.

The harness measures independently of the governor's own monitors (it is the oracle), with the
same definitions (monitors/sample.py, monitors/rates.py, governor/loop.py):

* ``cpu`` — cores: ``cpu.stat usage_usec`` per second;
* ``memory`` — bytes in use: ``memory.current`` less reclaimable page cache
  (``memory.stat file − shmem``); a stock, so a window reports its mean;
* ``disk:MAJ:MIN`` — fraction of the disk's time: ``r/R + w/W`` with ``r``/``w`` the
  ``io.stat rbytes``/``wbytes`` rates and ``R``/``W`` the disk's configured bandwidths
  (``capacity.disks``);
* ``net:va:tx`` — bits/s of her flow on the scenario link, counted where it arrives, not
  from a cgroup (:class:`tests.scenarios.link.LinkMeter`): a window's, once it has passed.

It also reads what says the kernel held a cgroup back — ``memory.events high``, the stall time
in ``memory.pressure`` (``some total``) and ``cpu.stat throttled_usec`` — as per-interval
``held`` figures (:data:`HELD_KEYS`), for reactions on memory, a stock; and the memory
limits in force (``memory.high``, ``memory.max``), for the users no one may cap.

A diagnostic, not an oracle: her threads' scheduler accounting (:func:`read_threads`, the
daemon's own reader) and what :func:`monitors.rates.thread_demand` makes of it between two
ticks (:func:`threads_between`), thread by thread — what explains the daemon's CPU ``wanted``
for her when it exceeds her use plus her throttled time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cgroups import Cgroup, CgroupError
from tests.scenarios.link import LinkMeter
from monitors.model import ThreadSchedstats
from monitors.rates import thread_cores, thread_demand
from monitors.schedstat import read_threads as read_schedstats

__all__ = ["HELD_KEYS", "Reading", "Threads", "WindowMeter", "read", "rates_between", "read_threads",
           "threads_between"]

HELD_KEYS = ("memory_high_events", "memory_stall_fraction", "cpu_throttled_fraction")

DiskCapacity = Mapping[str, tuple[float, float]]  # "MAJ:MIN" → (read, write) bytes/s


@dataclass(frozen=True)
class Reading:
    """A cgroup's counters at ``time_s`` (monotonic seconds)."""

    time_s: float
    usage_usec: int
    memory_used_bytes: int
    disk_bytes: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # "MAJ:MIN" → (rbytes, wbytes)
    memory_high_events: int = 0  # memory.events high: times she went over memory.high
    memory_stall_usec: int = 0  # memory.pressure some total: time some of her tasks waited for memory
    throttled_usec: int = 0  # cpu.stat throttled_usec: time cpu.max held her runnable threads
    memory_high_bytes: int | None = None  # memory.high in force (None: max)
    memory_max_bytes: int | None = None  # memory.max in force (None: max)


def read(cg: Cgroup, clock: Callable[[], float] = time.monotonic) -> Reading:
    """Read ``cg``'s counters now."""
    now = clock()
    cpu = cg.cpu_stat()
    stat = cg.memory_stat(("file", "shmem"))
    cache = max(0, stat.get("file", 0) - stat.get("shmem", 0))
    used = max(0, cg.memory_current() - cache)
    disks = {dev: (s.rbytes or 0, s.wbytes or 0) for dev, s in cg.io_stat().items()}
    try:
        high = cg.memory_events().high or 0
        stall = cg.pressure("memory").some.total_usec
    except (CgroupError, OSError):  # no PSI (psi=0 on the kernel command line)
        high, stall = 0, 0
    return Reading(now, cpu.usage_usec, used, disks, high, stall, cpu.throttled_usec or 0, cg.memory_high(),
                   cg.memory_max())


def rates_between(a: Reading, b: Reading, disks: DiskCapacity) -> dict[str, float]:
    """``cpu`` (cores) and each ``disk:MAJ:MIN`` (fraction of its time) over ``a`` → ``b``;
    ``memory`` is ``b``'s (a stock has no rate); and the :data:`HELD_KEYS`: memory.high events
    in the interval, and the fractions of it she stalled on memory and was throttled by cpu.max."""
    dt = b.time_s - a.time_s
    if dt <= 0:
        raise ValueError("readings out of order")
    out = {"cpu": max(0, b.usage_usec - a.usage_usec) / 1e6 / dt, "memory": float(b.memory_used_bytes),
           "memory_high_events": float(max(0, b.memory_high_events - a.memory_high_events)),
           "memory_stall_fraction": max(0, b.memory_stall_usec - a.memory_stall_usec) / 1e6 / dt,
           "cpu_throttled_fraction": max(0, b.throttled_usec - a.throttled_usec) / 1e6 / dt}
    for dev, (read_cap, write_cap) in disks.items():
        r0, w0 = a.disk_bytes.get(dev, (0, 0))
        r1, w1 = b.disk_bytes.get(dev, (0, 0))
        out[f"disk:{dev}"] = max(0, r1 - r0) / dt / read_cap + max(0, w1 - w0) / dt / write_cap
    return out


@dataclass(frozen=True)
class Threads:
    """Her threads' scheduler accounting (``stats``: None when not readable) and their names
    (``/proc/TID/comm``)."""

    stats: ThreadSchedstats | None
    comm: Mapping[int, str]


def read_threads(cg: Cgroup, names: dict[int, str], procfs: str = "/proc",
                 clock: Callable[[], float] = time.monotonic) -> Threads:
    """Her threads now, as the daemon reads them (:func:`monitors.schedstat.read_threads`);
    ``names`` caches each thread's ``comm`` (read once: the harness's CPU is the users' loss)."""
    stats = read_schedstats(cg.path, clock, procfs)
    for tid in stats.by_tid if stats is not None else ():
        if tid not in names:
            try:
                with open(f"{procfs}/{tid}/comm") as f:
                    names[tid] = f.read().strip()
            except OSError:
                pass  # gone since
    return Threads(stats, names)


def threads_between(a: Threads, b: Threads) -> dict | None:
    """Her threads' CPU demand over ``a`` → ``b`` (cores, :func:`monitors.rates.thread_demand`,
    coverage unchecked), its paced part, and per thread that ran or waited: its name, what it
    ran and waited (cores), how often it blocked per CPU-second it ran, and the cores it is
    credited (``paced``: counted as what it ran). None when either end is unreadable."""
    if a.stats is None or b.stats is None or b.stats.time_s <= a.stats.time_s:
        return None
    found = thread_demand(a.stats, b.stats)
    if found is None:
        return None
    interval_ns = (b.stats.time_s - a.stats.time_s) * 1e9
    rows = []
    for tid, (run_ns, wait_ns, blocks) in sorted(b.stats.by_tid.items()):
        was = a.stats.by_tid.get(tid)
        if was is None or run_ns < was[0] or wait_ns < was[1] or blocks < was[2]:
            continue
        ran, waited, blocked = run_ns - was[0], wait_ns - was[1], blocks - was[2]
        if ran == 0 and waited == 0:
            continue  # asleep all the interval: wants nothing
        cores, paced = thread_cores(ran, waited, blocked, interval_ns)
        rows.append({"tid": tid, "comm": b.comm.get(tid, a.comm.get(tid, "?")),
                     "ran_cores": round(ran / interval_ns, 4), "waited_cores": round(waited / interval_ns, 4),
                     "blocks_per_cpu_s": round(blocked / (ran / 1e9), 1) if ran else None,
                     "cores": round(cores, 4), "paced": paced})
    return {"interval_s": round(interval_ns / 1e9, 3), "demand_cores": round(found.cores, 4),
            "paced_cores": round(found.paced_cores, 4), "by_thread": rows}


class WindowMeter:
    """Each cgroup's use of each resource over a window: cpu and disks from the counters at its
    two ends, memory the mean (and peak) of samples taken every ``sample_every_s``, and the
    flows ``link`` records of the keys it knows (bits/s over the window)."""

    def __init__(self, cgroups: Mapping[str, Cgroup], disks: DiskCapacity, sample_every_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 link: LinkMeter | None = None):
        self.cgroups, self.disks, self.sample_every_s = dict(cgroups), disks, sample_every_s
        self.clock, self.sleep, self.link = clock, sleep, link

    def measure(self, seconds: float) -> tuple[dict[str, dict[str, float]], dict[str, float], float]:
        """``(use per key, peak memory bytes per key, window length in s)`` over the next ``seconds``."""
        first = {key: read(cg, self.clock) for key, cg in self.cgroups.items()}
        memory = {key: [r.memory_used_bytes] for key, r in first.items()}
        start = self.clock()
        while True:
            left = start + seconds - self.clock()
            if left <= 0:
                break
            self.sleep(min(self.sample_every_s, left))
            for key, cg in self.cgroups.items():
                memory[key].append(read(cg, self.clock).memory_used_bytes)
        last = {key: read(cg, self.clock) for key, cg in self.cgroups.items()}
        end = self.clock()
        counts = self.link.counted() if self.link is not None else None
        use, peak = {}, {}
        for key in self.cgroups:
            rates = rates_between(first[key], last[key], self.disks)
            use[key] = {r: v for r, v in rates.items() if r not in HELD_KEYS}
            use[key]["memory"] = sum(memory[key]) / len(memory[key])
            if counts is not None:
                use[key].update(counts.use(key, start, end))
            peak[key] = float(max(memory[key]))
        return use, peak, end - start
