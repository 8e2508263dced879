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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cgroups import Cgroup  # noqa: E402
from governor.enforce import DryRunBackend  # noqa: E402
from governor.control.loop import Governor  # noqa: E402
from governor.control.model import Capacity  # noqa: E402
from governor.config.policy import Policy  # noqa: E402
from governor.service.state import state_document, write_state  # noqa: E402
from monitors.cgroupmonitor import CgroupMonitor  # noqa: E402
from tests.fakecgroup import fake_cgroup  # noqa: E402


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=15)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="drfgov-bench-", dir="/dev/shm"))
    try:
        slices = [fake_cgroup(tmp, f"user.slice/user-{1000 + i}.slice") for i in range(args.users)]
        clock = [0.0]
        monitor = CgroupMonitor(Cgroup(tmp / "user.slice"), lambda: clock[0], min_uid=1000)
        gov = Governor(Policy().loop_settings(), Capacity(64.0, 256 * 2**30), monitor, DryRunBackend(), lambda: clock[0],
                       lambda u: {"cpu": 1.0 + u.uid % 3, "memory": 1.0, "io": 1.0})
        backend: DryRunBackend = gov.backend
        times = []
        for tick in range(args.ticks):
            for i, path in enumerate(slices):  # the kernel's side: counters move between ticks
                usec = (tick + 1) * (20_000 + (i % 7) * 20_000)
                (path / "cpu.stat").write_text(f"usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0\n"
                                               f"nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
                (path / "memory.current").write_text(f"{(i % 5 + 1) << 28}\n")
            clock[0] += 1.0
            t0 = cpu_s()
            report = gov.tick()
            write_state(tmp / "state.json", state_document(report, tick=tick, time_unix_s=time.time(), interval_s=1.0,
                                                           mode="dry-run", backend="dry-run", policy_file="-"))
            times.append(cpu_s() - t0)
            backend.recorded.clear()
        steady = statistics.median(times[2:])
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"daemon tick over {args.users} users (tmpfs copies of kernel files, state.json written): "
              f"{steady * 1e3:.1f} ms CPU per tick, {steady / args.users * 1e6:.1f} µs per user per tick "
              f"(median of {args.ticks - 2}); {100 * steady:.1f}% of a core at 1 tick/s; peak RSS {rss_mib:.0f} MiB")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
