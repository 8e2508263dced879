"""How long loading a big problem file takes (issue 16: ≤ 100 ms for 10,000 users). Prints
figures; asserts nothing (not collected by pytest: run it as a script)::

    .venv/bin/python tests/cli/bench_load.py [--users 10000] [--runs 7] [--drfgov PATH]

For a synthetic problem of USERS users × 4 resources (a third with max_units, weights 1–3),
written as JSON and as YAML: the median wall time of ``drfgov allocate FILE --json`` (the
installed command, start-up included, and net of the same command on a one-user file), and
in this process the median of ``load_problem`` (read + parse + validate) and of ``solve``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def problem(users: int) -> dict:
    rng = random.Random(1)
    resources = ["cpu", "memory", "disk", "net"]
    return {"capacity": {r: 1000.0 * (i + 1) for i, r in enumerate(resources)},
            "users": {f"user{i:05d}": {"demand": {r: round(rng.uniform(0.1, 4), 3) for r in resources},
                                       "weight": rng.choice([1, 2, 3]),
                                       **({"max_units": rng.randint(1, 50)} if i % 3 == 0 else {})}
                      for i in range(users)}}


def median_s(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--drfgov", default=str(Path(sys.executable).parent / "drfgov"))
    args = parser.parse_args()
    from governor.offline.allocate import solve
    from governor.offline.problem import load_problem

    scratch = Path(tempfile.mkdtemp(prefix="bench-load-"))
    doc = problem(args.users)
    files = {"JSON": scratch / "big.json", "YAML": scratch / "big.yaml"}
    files["JSON"].write_text(json.dumps(doc, indent=1))
    files["YAML"].write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
    tiny = scratch / "tiny.json"
    tiny.write_text(json.dumps(problem(1)))

    def command(path: Path):
        return lambda: subprocess.run([args.drfgov, "allocate", str(path), "--json"], check=True, capture_output=True)

    startup = median_s(command(tiny), args.runs)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.users:,} users × 4 resources; "
          f"medians of {args.runs}")
    print(f"drfgov allocate tiny.json --json: {startup * 1000:.0f} ms (start-up)")
    for kind, path in files.items():
        wall = median_s(command(path), args.runs)
        load = median_s(lambda: load_problem(path), args.runs)
        loaded = load_problem(path)
        work = median_s(lambda: solve(loaded), args.runs)
        print(f"{kind} ({path.stat().st_size / 2**20:.1f} MiB): drfgov allocate --json {wall * 1000:.0f} ms "
              f"({(wall - startup) * 1000:.0f} ms net of start-up); load_problem {load * 1000:.0f} ms; "
              f"solve {work * 1000:.0f} ms")


if __name__ == "__main__":
    main()
