"""Control-loop cost per active user per tick, on a simulated host (no file I/O).

    python benchmarks/bench_loop.py [--users 1000] [--ticks 20]

Measures Governor.tick() (demand, DRF, planning, change detection) with counters served by
tests/simhost.py; add the per-user read cost from bench_cgroups.py for the whole daemon.
Prints the median µs per user per tick and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.control.loop import Governor  # noqa: E402
from governor.control.model import Capacity  # noqa: E402
from governor.config.policy import Policy  # noqa: E402
from tests.simhost import SimBackend, SimHost, SimMonitor  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=20)
    args = parser.parse_args()
    host = SimHost(cores=64.0, memory_bytes=256 * 2**30)
    for i in range(args.users):
        host.add(1000 + i, f"u{i}", want_cores=0.02 + (i % 7) * 0.02, want_memory_bytes=(i % 5 + 1) * 2**28)
    gov = Governor(Policy().loop_settings(), Capacity(host.cores, host.memory_bytes), SimMonitor(host), SimBackend(host), host.clock,
                   lambda u: {"cpu": 1.0 + u.uid % 3, "memory": 1.0, "io": 1.0})
    times = []
    for _ in range(args.ticks):
        t0 = time.process_time()
        gov.tick()
        times.append(time.process_time() - t0)
        host.step(1.0)
    steady = statistics.median(times[2:])
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"Governor.tick over {args.users} users: {steady * 1e3:.1f} ms CPU per tick, "
          f"{steady / args.users * 1e6:.1f} µs per user per tick (median of {args.ticks - 2}); peak RSS {rss_mib:.0f} MiB")


if __name__ == "__main__":
    main()
