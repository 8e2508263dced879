"""History size and record() cost under the defaults, with simulated time.

    python benchmarks/bench_history.py [--users 1000] [--days 14] [--cost-users 1000 10000]

Fills a fresh database through the real ``History.record()`` with synthetic state documents
(the shape governor/service/state.py documents: six resources — cpu, memory, two disks, one
NIC each way; a fifth of the users contended, their limits changing every few minutes and held
back on CPU some of the time), one record every ``every_s`` of simulated time, with the
background maintenance (hourly aggregation, pruning, incremental vacuum) running as it does in
the daemon. Prints the file's size after each simulated day, then bytes per stored row and the
median cost of one ``record()`` at each of ``--cost-users`` (a fresh database each, a day
in), and how long ``drfgov history`` takes to read it back. Figures only: no assertions.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.service.history import History, HistoryReader  # noqa: E402

RESOURCES = ("cpu", "memory", "disk:8:0", "disk:259:0", "net:eth0:tx", "net:eth0:rx")
CAPACITY = {"cpu": 63.5, "memory": 255 * 2**30, "disk:8:0": 1.0, "disk:259:0": 1.0,
            "net:eth0:tx": 1e10, "net:eth0:rx": 1e10}
VARIANTS = 16  # per user: documents cycle through these (sizes do not depend on the values)


def _limits(rng: random.Random, contended: bool) -> dict:
    quota = rng.randrange(10_000, 400_000, 1000) if contended else None
    high = rng.randrange(1, 64) * 2**28 if contended else None
    return {"cpu.max": f"{'max' if quota is None else quota} 100000", "cpu.weight": 100,
            "memory.low": rng.randrange(1, 16) * 2**28, "memory.high": high,
            "memory.max": None if high is None else high + 2**28,
            "io.max": {"8:0": f"rbps={rng.randrange(10**7, 10**9)} wbps=max riops=max wiops=max"} if contended else {}}


class Population:
    """Synthetic users: each a few variants of her entry, and limits that change when contended."""

    def __init__(self, users: int, contended: float, churn: float, seed: int = 1):
        self.rng = random.Random(seed)
        self.churn = churn
        self.contended = [self.rng.random() < contended for _ in range(users)]
        self.variants = [[self._entry(i, v) for v in range(VARIANTS)] for i in range(users)]
        self.limits = [_limits(self.rng, c) for c in self.contended]

    def _entry(self, i: int, v: int) -> dict:
        rng = self.rng
        scale = rng.lognormvariate(0, 1)
        usage = {"cpu": min(63.5, 0.3 * scale * rng.random()), "memory": float(rng.randrange(2**26, 2**34)),
                 "disk:8:0": 0.01 * scale * rng.random(), "disk:259:0": 0.02 * scale * rng.random(),
                 "net:eth0:tx": 1e6 * scale * rng.random(), "net:eth0:rx": 3e6 * scale * rng.random()}
        demand = {r: x * (1 + rng.random()) for r, x in usage.items()}
        allocation = {r: x * (1 + 0.5 * rng.random()) for r, x in usage.items()}
        shares = {r: demand[r] / CAPACITY[r] for r in RESOURCES}
        dominant = max(shares, key=shares.get)
        held = ["cpu"] if self.contended[i] and v % 3 == 0 else []
        return {"uid": 1000 + i, "name": f"user{i:05d}", "weight": {"cpu": 1.0 + i % 3, "memory": 1.0, "io": 1.0, "net": 1.0},
                "dominant_resource": dominant, "dominant_share": shares[dominant],
                "weighted_share": shares[dominant] / (1.0 + i % 3),
                "usage": usage, "demand": demand, "allocation": allocation, "held": held, "limits": None,
                "planned": None, "reasons": {}, "written": [], "error": None, "classes": {}}

    def document(self, k: int, t: float) -> dict:
        users = []
        for i, variants in enumerate(self.variants):
            if self.contended[i] and self.rng.random() < self.churn:
                self.limits[i] = _limits(self.rng, True)
            entry = variants[(k + i) % VARIANTS]
            entry["limits"] = self.limits[i]
            users.append(entry)
        return {"version": 1, "time_unix_s": t, "tick": k, "interval_s": 1.0, "mode": "enforce", "backend": "systemd",
                "policy_file": "/etc/drfgov/drfgov.yaml", "capacity": CAPACITY, "saturated": ["cpu"],
                "users": users, "network_error": None}


def _counts(db) -> dict[str, int]:
    return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("samples", "hourly", "limits", "weights", "ticks")}


def fill(path: Path, users: int, days: float, every_s: float, retention_days: float, contended: float,
         churn: float, t0: float) -> tuple[History, list[float], float]:
    """Record ``days`` of documents; returns the history, record() times (the last day's), and the end time."""
    population = Population(users, contended, churn)
    history = History(path, retention_days, every_s)
    records = int(days * 86400 / every_s)
    per_day = int(86400 / every_s)
    costs: list[float] = []
    started = time.monotonic()
    for k in range(records):
        t = t0 + k * every_s
        doc = population.document(k, t)
        begin = time.perf_counter()
        history.record(doc)
        if k >= records - per_day:
            costs.append(time.perf_counter() - begin)
        if (k + 1) % per_day == 0:
            history.settle()
            size = path.stat().st_size / 2**20
            wal = path.with_name(path.name + "-wal")
            counts = _counts(history.db)
            print(f"  day {(k + 1) // per_day:3d}: {size:7.1f} MiB (+ WAL {wal.stat().st_size / 2**20 if wal.exists() else 0:.1f} MiB), "
                  f"rows {counts}, {time.monotonic() - started:.0f} s", flush=True)
    return history, costs, t0 + (records - 1) * every_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--days", type=float, default=14.0)
    parser.add_argument("--every-s", type=float, default=60.0)
    parser.add_argument("--retention-days", type=float, default=14.0)
    parser.add_argument("--contended", type=float, default=0.2, help="share of users whose limits move")
    parser.add_argument("--churn", type=float, default=0.25, help="chance per record that a contended user's limits change")
    parser.add_argument("--cost-users", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--cost-records", type=int, default=40)
    parser.add_argument("--dir", type=Path, default=None, help="where the databases go (default: a temporary directory)")
    args = parser.parse_args()
    t0 = 1_790_000_000.0
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "lib" / "history.db"
        print(f"{args.users} users, {args.days:g} simulated days, every_s {args.every_s:g}, retention "
              f"{args.retention_days:g} days, {len(RESOURCES)} resources, {args.contended:.0%} contended "
              f"(limits change with p={args.churn:g} per record)")
        history, costs, end = fill(path, args.users, args.days, args.every_s, args.retention_days,
                                   args.contended, args.churn, t0)
        history.maintain(end)  # whatever the background pass had not reached yet
        history.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        counts = _counts(history.db)
        free = history.db.execute("PRAGMA freelist_count").fetchone()[0]
        pages = history.db.execute("PRAGMA page_count").fetchone()[0]
        history.close()
        size = path.stat().st_size
        rows = counts["samples"] + counts["hourly"]
        per_1000 = size / 2**20 * 1000 / args.users
        print(f"file: {size / 2**20:.1f} MiB ({pages} pages, {free} free) = {per_1000:.0f} MiB per 1,000 users after "
              f"{args.days:g} days (retention {args.retention_days:g}); {rows} rows ({counts['samples']} samples, {counts['hourly']} hourly): "
              f"{size / rows:.0f} B per row all in; limits {counts['limits']}, weights {counts['weights']}, ticks {counts['ticks']}")
        print(f"record() at {args.users} users during the last day (maintenance running): median "
              f"{statistics.median(costs) * 1e3:.1f} ms, p99 {sorted(costs)[int(0.99 * len(costs))] * 1e3:.1f} ms, "
              f"max {max(costs) * 1e3:.1f} ms")
        reader = HistoryReader(path)
        for label, since in (("6 h", end - 6 * 3600), ("14 days", 0.0)):
            begin = time.perf_counter()
            series = reader.series(since, end)
            for s in series.values():
                s.summary()
            print(f"reading back {label} of {len(series)} users with summaries: {time.perf_counter() - begin:.2f} s")
        begin = time.perf_counter()
        one = reader.series(0.0, end, uid=1000 + args.users // 2)
        print(f"reading back 14 days of one user: {time.perf_counter() - begin:.2f} s ({sum(len(s.t) for s in one.values())} points)")
        reader.close()
        for users in args.cost_users:
            costs = cost(Path(tmp) / f"cost-{users}" / "history.db", users, args.every_s, args.cost_records, t0,
                         args.contended, args.churn)
            print(f"record() at {users} users: median {statistics.median(costs) * 1e3:.1f} ms "
                  f"(max {max(costs) * 1e3:.1f} ms, {len(costs)} records)")


def cost(path: Path, users: int, every_s: float, records: int, t0: float, contended: float, churn: float) -> list[float]:
    """Median-worthy record() times at ``users``: a fresh database, after a first record (which
    writes every user's name, weight and limits)."""
    population = Population(users, contended, churn)
    history = History(path, 14.0, every_s)
    costs = []
    for k in range(records + 1):
        doc = population.document(k, t0 + k * every_s)
        begin = time.perf_counter()
        history.record(doc)
        if k:
            costs.append(time.perf_counter() - begin)
    history.close()
    return costs


if __name__ == "__main__":
    main()
