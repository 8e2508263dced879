"""How far the daemon's tick stands above the least a Python tick could spend reading, per user.

    python benchmarks/bench_floor.py [--users 100,1000] [--ticks 7]

For each number of users, on bench_daemon.py's host (:class:`benchhost.BenchHost`: every user
computing, her files moved between ticks as the kernel would move them), the median CPU per
user per tick of:

* ``tick``: the governor's tick while nobody reads state.json, as bench_daemon.py measures it;
* ``sample``: the monitor's reads alone, every user's ``sample()`` with the loop's own flags
  (six files: her memory.high is in force, and no kept sample is passed);
* ``least reader``: the least Python can do to have the same numbers: through the same
  kept-open descriptors, each file ``pread`` and compared with its last bytes, and a changed
  one matched by one regex into a row of a numpy array: no object per user or per reading,
  no check beyond the match;
* ``bare reads``: the same ``pread`` calls and nothing else: the kernel's side (tmpfs here;
  cgroupfs also formats the text) and one CPython call a file.

Then, beside the tick's stages, what one of them would cost over arrays while the tick's data
stays in per-user objects (the demand estimate, about half of the tick's ~10 µs demand stage): each user's
``estimate_demand`` on her evidence and her demand before (the loop also passes her memory
growth and her admin's ceiling), against the same inputs gathered from her objects
into arrays (evidence per resource, her demand before) and the results put back into a
:class:`DemandState` each — the array arithmetic itself left out. When gathering and putting
back cost as much as the stage, a stage moved to arrays alone gains nothing: the arrays have
to hold the users' data from the reads to the plan, across ticks (the closing notes of issue 16).

The users' files number ``--users`` × 6; past a few hundred users they no longer fit the CPU's
caches, and every figure per user grows with the host (see the README's cost section). Past the
descriptor budget (RLIMIT_NOFILE; 20,000 on the 2-core machine: 3,290 users of six files) the
files a user cannot keep open are opened and closed at each read, by the tick and by the least
reader and bare reads alike: what any reader of this host pays. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchhost import BenchHost  # noqa: E402

#: The files a busy user's tick reads here, in the loop's order, and the one regex each that
#: takes a changed file's numbers (the kernel's layouts: cgroups/cgroup.py checks them fully).
_PSI = rb"some avg10=\S+ avg60=\S+ avg300=\S+ total=([0-9]+)\nfull avg10=\S+ avg60=\S+ avg300=\S+ total=([0-9]+)\n"
PATTERNS = {
    "cpu.pressure": re.compile(_PSI),
    "memory.pressure": re.compile(_PSI),
    "cpu.stat": re.compile(rb"usage_usec ([0-9]+)\nuser_usec [0-9]+\nsystem_usec [0-9]+\n"
                           rb"nr_periods ([0-9]+)\nnr_throttled ([0-9]+)\nthrottled_usec ([0-9]+)\n"),
    "memory.current": re.compile(rb"([0-9]+)\n"),
    "memory.stat": re.compile(rb"(?s).*?\nfile ([0-9]+)\n.*?\nshmem ([0-9]+)\n"),
    "memory.events": re.compile(rb"low ([0-9]+)\nhigh ([0-9]+)\nmax ([0-9]+)\noom ([0-9]+)\noom_kill ([0-9]+)\n"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="100,1000", help="numbers of users, comma-separated (default: 100,1000)")
    parser.add_argument("--ticks", type=int, default=7, help="ticks each figure is the median of (after warm-ups)")
    args = parser.parse_args()
    stages = []
    print(f"{'users':>6} {'tick':>9} {'sample':>9} {'least reader':>13} {'bare reads':>11}   (µs of CPU per user per tick)")
    for users in (int(n) for n in args.users.split(",")):
        tmp = Path(tempfile.mkdtemp(prefix="drfgov-bench-floor-", dir="/dev/shm"))
        try:
            found, stage = figures(tmp, users, args.ticks)
            print(f"{users:>6} " + " ".join(f"{f:>{w}.1f}" for f, w in zip(found, (9, 9, 13, 11))))
            stages.append((users, stage))
        finally:
            shutil.rmtree(tmp)
    print(f"\n{'users':>6} {'demand':>9} {'gathered':>9} {'put back':>9}   (µs of CPU per user: one stage, "
          "per user in Python objects, against moving its data into arrays and back)")
    for users, stage in stages:
        print(f"{users:>6} " + " ".join(f"{f:>9.1f}" for f in stage))


def figures(root: Path, users: int, ticks: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(tick, sample, least reader, bare reads) and (demand, gathered, put back): median µs of
    CPU per user per tick, and of one stage (:func:`one_stage`)."""
    host = BenchHost(root, users)
    try:
        tick = 0
        for tick in range(3):
            host.advance(tick)
            host.tick()
        governed = host.monitor.users()
        kept = [user.cgroup._fds or {} for user in governed]
        state = host.governor.state

        def detail(user) -> bool:  # her memory.events and memory.pressure read: a memory.high of ours
            written = state[user.uid].written
            return written is not None and written.memory_high is not None

        # the files each user's sample reads (below); past the descriptor budget, the ones she
        # cannot keep are opened and closed at each read, as the tick does
        names = [[name for name in PATTERNS if detail(user) or name not in ("memory.events", "memory.pressure")]
                 for user in governed]
        reads = [[(name, fds.get(name), f"{user.cgroup.path}/{name}") for name in mine]
                 for user, fds, mine in zip(governed, kept, names)]
        last = [dict.fromkeys(mine, b"") for mine in names]
        numbers = {name: np.zeros((users, pattern.groups), np.int64) for name, pattern in PATTERNS.items()}

        def sample_all():
            for user in governed:
                host.monitor.sample(user, memory_detail=detail(user), io_detail=False)

        def least_reader():
            pread = os.pread
            for i, files in enumerate(reads):
                seen = last[i]
                for name, fd, path in files:
                    raw = pread(fd, 65536, 0) if fd is not None else read_once(path)
                    if raw != seen[name]:
                        seen[name] = raw
                        numbers[name][i] = PATTERNS[name].match(raw).groups()

        def bare_reads():
            pread = os.pread
            for files in reads:
                for _, fd, path in files:
                    pread(fd, 65536, 0) if fd is not None else read_once(path)

        timed: dict[str, list[float]] = {"tick": [], "sample": [], "least": [], "bare": []}
        moved = tick + 1
        for _ in range(ticks):
            for what, run in (("tick", host.tick), ("sample", sample_all), ("least", least_reader), ("bare", bare_reads)):
                host.advance(moved)  # each figure over files the kernel has just moved...
                if what != "tick":
                    host.clock_s -= 1.0  # ...and a second between the governor's ticks
                start = time.thread_time()
                run()
                timed[what].append(time.thread_time() - start)
                moved += 1
        host.advance(moved)
        report = host.tick()
        return (tuple(statistics.median(timed[what]) / users * 1e6 for what in ("tick", "sample", "least", "bare")),
                one_stage(host, report, ticks))
    finally:
        host.close()


def read_once(path: str) -> bytes:
    """A file not kept open: opened, read and closed."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.pread(fd, 65536, 0)
    finally:
        os.close(fd)


def one_stage(host: BenchHost, report, ticks: int) -> tuple[float, float, float]:
    """The demand stage of the tick just run (``report``), µs of CPU per user, medians of
    ``ticks`` runs: each user's :func:`estimate_demand` on her evidence and her demand before,
    and, without any arithmetic, her inputs gathered into (users × resources) arrays and a
    result row put back into a :class:`DemandState` of her own."""
    from governor.control.demand import DemandState, estimate_demand

    governor, capacity = host.governor, report.capacity
    resources = list(capacity)
    rows = [(governor.state[uid].demand, r.evidence) for uid, r in report.users.items() if r.evidence]
    params = governor.demand_params

    def per_user():
        for before, evidence in rows:
            estimate_demand(before, evidence, capacity, params)

    def gathered():
        for field in ("used", "wanted", "held", "speedup"):
            np.array([[getattr(evidence[r], field) for r in resources] for _, evidence in rows])
        np.array([[before.demand.get(r, 0.0) for r in resources] for before, _ in rows])

    result = np.ones((len(rows), len(resources))).tolist()

    def put_back():
        for row in result:
            DemandState(dict(zip(resources, row)))

    timed: dict[str, list[float]] = {"per user": [], "gathered": [], "put back": []}
    for _ in range(ticks):
        for what, run in (("per user", per_user), ("gathered", gathered), ("put back", put_back)):
            start = time.thread_time()
            run()
            timed[what].append(time.thread_time() - start)
    return tuple(statistics.median(t) / len(rows) * 1e6 for t in timed.values())


if __name__ == "__main__":
    main()
