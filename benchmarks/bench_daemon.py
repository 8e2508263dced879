"""The daemon's CPU per active user per tick, reads included, and its peak RSS.

    python benchmarks/bench_daemon.py [--users 1000] [--ticks 15]

Builds USERS ``user-UID.slice`` directories of real kernel interface files (tests/fixtures)
on a tmpfs, then runs the governor as ``drfgov run`` does — CgroupMonitor (slice discovery,
files kept open; 4 reads per user when she has no memory cap and no disk is governed, as
here), weighted DRF, planning, change detection, the state document written each tick — with
the dry-run backend. Between ticks every user's cpu.stat
and memory.current move, so each tick sees new usage. Prints the median CPU time (user +
system of this process) per user per tick and peak RSS. tmpfs stands in for cgroupfs: the
kernel's cost of generating the files is not in the figure.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchhost import BenchHost, cpu_s  # noqa: E402
from governor.service.state import state_document, write_state  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=15)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="drfgov-bench-", dir="/dev/shm"))
    try:
        host = BenchHost(tmp, args.users)
        times = []
        for tick in range(args.ticks):
            host.advance(tick)
            t0 = cpu_s()
            report = host.tick()
            write_state(tmp / "state.json", state_document(report, tick=tick, time_unix_s=time.time(), interval_s=1.0,
                                                           mode="dry-run", backend="dry-run", policy_file="-"))
            times.append(cpu_s() - t0)
        full_collection_s = host.full_collection_s()
        host.close()
        steady = statistics.median(times[2:])
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"daemon tick over {args.users} users (tmpfs copies of kernel files, state.json written): "
              f"{steady * 1e3:.1f} ms CPU per tick, {steady / args.users * 1e6:.1f} µs per user per tick "
              f"(median of {args.ticks - 2}); {100 * steady:.1f}% of a core at 1 tick/s; peak RSS {rss_mib:.0f} MiB; "
              f"the loop's full garbage collection (one a minute) {full_collection_s * 1e3:.0f} ms")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
