"""Simulation speed: task events (starts + finishes) per second.

    python benchmarks/bench_simulate.py [--tasks 500000] [--policy drf]

A synthetic trace on the paper's §7.3 cluster shape (400 machines of 16 CPUs, 32 GB): 100
users submit jobs of 20–400 tasks of random sizes (0.5–4 CPUs, 0.5–8 GB) and lengths
(5–120 s) as a Poisson stream, until TASKS tasks — 2 × TASKS task events. Prints wall time
and events per second for each policy. Target: 1,000,000 task events in ≤ 30 s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.offline.simulation.engine import simulate  # noqa: E402
from governor.offline.simulation.schedulers import parse_scheduler  # noqa: E402
from governor.offline.simulation.trace import Cluster, Job  # noqa: E402


def synthetic_jobs(tasks: int, seed: int = 7) -> list[Job]:
    rng = np.random.default_rng(seed)
    jobs, total, t = [], 0, 0.0
    while total < tasks:
        n = int(min(rng.integers(20, 401), tasks - total))
        t += rng.exponential(4.0)
        jobs.append(Job(t, f"u{rng.integers(100)}", n, float(rng.uniform(5, 120)),
                        (float(rng.choice([0.5, 1, 2, 4])), float(rng.choice([0.5, 1, 2, 4, 8])))))
        total += n
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=500_000)
    parser.add_argument("--policy", action="append", help="default: drf and slots:12")
    args = parser.parse_args()
    jobs = synthetic_jobs(args.tasks)
    cluster = Cluster(400, {"cpu": 16.0, "memory": 32.0})
    for name in args.policy or ["drf", "slots:12"]:
        t0 = time.perf_counter()
        outcome = simulate(parse_scheduler(name, ["cpu", "memory"]), cluster, jobs)
        wall = time.perf_counter() - t0
        print(f"{name}: {outcome.task_events:,} task events ({len(jobs):,} jobs, {outcome.jobs_completed:,} completed, "
              f"{outcome.end_s:,.0f} simulated s) in {wall:.1f} s: {outcome.task_events / wall:,.0f} events/s")


if __name__ == "__main__":
    main()
