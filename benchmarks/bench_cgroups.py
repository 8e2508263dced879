"""Cost of reading one user's cgroup counters per tick (monitors.sample_cgroup).

    python benchmarks/bench_cgroups.py [--users 1000] [--root DIR]

Builds a tree of USERS copies of a real kernel's interface files (tests/fixtures) on a tmpfs
(/dev/shm) unless --root names a real cgroup2 directory whose children to read, then times
full passes over every user. Prints the median µs per user per tick and the whole pass in ms.
Run it inside the VM tier for real cgroupfs figures (TCG makes them pessimistic).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cgroups import Cgroup  # noqa: E402
from monitors.sample import sample_cgroup  # noqa: E402
from tests.fakecgroup import fake_cgroup  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--root", type=Path, help="read the children of this real cgroup instead")
    args = parser.parse_args()
    tmp = None
    if args.root:
        groups = [Cgroup(p) for p in sorted(args.root.iterdir()) if (p / "cgroup.procs").exists()]
    else:
        tmp = Path(tempfile.mkdtemp(prefix="drfgov-bench-", dir="/dev/shm"))
        groups = [Cgroup(fake_cgroup(tmp, f"user.slice/user-{1000 + i}.slice")) for i in range(args.users)]
    try:
        passes = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for cg in groups:
                sample_cgroup(cg, time.monotonic)
            passes.append(time.perf_counter() - t0)
        median = statistics.median(passes)
        where = args.root or "tmpfs copies of kernel files"
        print(f"sample_cgroup over {len(groups)} users ({where}): {median * 1e3:.1f} ms per tick, "
              f"{median / len(groups) * 1e6:.1f} µs per user per tick (median of {args.repeat})")
    finally:
        if tmp:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
