"""Benchmark the DRF engines; prints medians (targets from the foundation issue).

    python benchmarks/bench_drf.py [--repeat 30]

Targets on a 2-core machine: progressive filling ≤ 2 ms for 1,000 users × 4 resources and
≤ 20 ms for 10,000 users; Algorithm 1 ≥ 100,000 decisions/s at 1,000 users.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from governor.fairness.discrete import DiscreteDRF
from governor.fairness.drf import progressive_filling


def instance(n: int, m: int, seed: int, caps: bool, holdings: bool):
    rng = np.random.default_rng(seed)
    capacity = rng.uniform(50, 500, m) * n / 10
    demand = rng.uniform(0, 10, (n, m)) * (rng.random((n, m)) > 0.2)
    demand[:, 0] += 0.1  # everybody demands something
    weight = rng.choice([0.5, 1, 2, 4], n)
    max_units = np.where(rng.random(n) < 0.5, rng.uniform(1, 20, n), np.inf) if caps else None
    held = rng.uniform(0, 2, (n, m)) * (rng.random((n, m)) < 0.3) if holdings else None
    return capacity, demand, weight, max_units, held


def median_ms(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def bench_filling(repeat: int) -> None:
    print("progressive filling (median ms per solve)")
    for n in (1_000, 10_000):
        for caps, holdings, label in ((False, False, "demand only"), (True, False, "with caps"), (True, True, "caps + holdings")):
            args = instance(n, 4, seed=n, caps=caps, holdings=holdings)
            ms = median_ms(lambda: progressive_filling(*args), repeat)
            print(f"  {n:>6} users x 4 resources, {label:<16} {ms:8.3f} ms")


def bench_algorithm1(repeat: int, users: int = 1_000, decisions: int = 200_000) -> None:
    rng = np.random.default_rng(1)
    demand = rng.uniform(0.1, 1.0, (users, 4)).tolist()
    weight = rng.choice([0.5, 1.0, 2.0, 4.0], users).tolist()
    capacity = [1e12] * 4  # never full: every decision launches a task

    def run() -> None:
        drf = DiscreteDRF(capacity)
        for i in range(users):
            drf.add_user(i, demand[i], weight=weight[i])
        drf.schedule(max_decisions=decisions)

    ms = median_ms(run, max(3, repeat // 10))
    print(f"Algorithm 1 at {users} users: {decisions / (ms / 1e3):,.0f} decisions/s (median of runs of {decisions:,})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    bench_filling(args.repeat)
    bench_algorithm1(args.repeat)


if __name__ == "__main__":
    main()
