"""The daemon's CPU per active user per tick, reads included, and its peak RSS.

    python benchmarks/bench_daemon.py [--users 1000] [--ticks 16] [--active 1.0] [--stages]

Builds USERS ``user-UID.slice`` directories of real kernel interface files (tests/fixtures) on
a tmpfs, then runs the governor as ``drfgov run`` does — CgroupMonitor (slice discovery, files
kept open; 6 reads per user: she has a memory.high in force — the captured files hold an
admin's 64 MiB — and no disk is governed), weighted DRF, planning, change detection, the state
document — with the dry-run backend. Two figures: state.json read (the daemon writes it every
tick) and unread (every :data:`governor.service.state.IDLE_EVERY_S`,
:mod:`governor.service.statereaders`). Between ticks every user's cpu.stat, cpu.pressure,
memory.current and memory.stat move, so each tick sees new usage. With ``--active F`` only that
fraction of the users computes; the others are idle, their files as the kernel last wrote them:
still users, two files a tick, read in full once every 10 s when due
(:func:`governor.control.loop.full_reading_due_s`: a tenth of them a tick). Prints the median
CPU time (user + system of this process) per user per tick, the governor's mean and slowest
tick after the start (a periodic cost shows there, not in a median) and peak RSS. tmpfs stands
in for cgroupfs: the kernel's cost of generating the files is not in the figure.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchhost import NESTED, STAGES, BenchHost, StageClock, TickCost, cpu_s  # noqa: E402


#: Ticks of each mode left out of the mean and the slowest: the start's (first sight, the first
#: interval, idle users found still), which read every user in full.
START_TICKS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=16, help="ticks, by turns read and unread (two are warm-ups)")
    parser.add_argument("--active", type=float, default=1.0,
                        help="the fraction of the users who compute; the others are idle (default: all compute)")
    parser.add_argument("--stages", action="store_true",
                        help="then where an unread tick's time goes: each stage's CPU per user (benchhost.StageClock)")
    args = parser.parse_args()
    if args.ticks <= 2 * START_TICKS + 1:
        parser.error(f"--ticks must be over {2 * START_TICKS + 1}: the first {2 * START_TICKS} are the start's")
    tmp = Path(tempfile.mkdtemp(prefix="drfgov-bench-", dir="/dev/shm"))
    try:
        host = BenchHost(tmp, args.users, args.active)
        cost = TickCost()
        for tick in range(args.ticks):
            host.advance(tick)
            host.timed_tick(cost, tmp / "state.json", tick)
        full_collection_s = host.full_collection_s()
        files = host.files_kept_open()
        stages = host_stages(host, args.ticks, args.users) if args.stages else None
        host.close()
        rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        for what, tick_s in (("nobody reading state.json", cost.unread_s()), ("state.json read", cost.read_s())):
            print(f"daemon tick over {args.users} users, {what}: {tick_s * 1e3:.1f} ms CPU per tick, "
                  f"{tick_s / args.users * 1e6:.1f} µs per user per tick (median of {cost.counted()}); "
                  f"{100 * tick_s:.1f}% of a core at 1 tick/s")
        slowest_s, slowest_tick = cost.slowest_tick(START_TICKS)
        print(f"the governor's ticks after the first {2 * START_TICKS} (state.json apart, both modes): mean "
              f"{cost.mean_s(START_TICKS) * 1e3:.1f} ms CPU, slowest {slowest_s * 1e3:.1f} ms "
              f"(tick {slowest_tick} of {args.ticks})")
        print(f"peak RSS {rss_mib:.0f} MiB; the loop's full garbage collection (one a minute) "
              f"{full_collection_s * 1e3:.0f} ms; tmpfs copies of kernel files; {files}")
        if stages:
            print(stages)
    finally:
        shutil.rmtree(tmp)


def host_stages(host: BenchHost, first_tick: int, users: int, ticks: int = 6) -> str:
    """Where an unread tick's time goes, as text: each stage's median CPU per user over ``ticks``
    ticks (after one warm-up), nested stages indented."""
    import statistics

    clock, per_tick, word_reasons = StageClock(host), [], host.governor.word_reasons
    try:
        for tick in range(first_tick, first_tick + ticks + 1):
            host.advance(tick)
            host.governor.word_reasons = False
            clock.reset()
            start = cpu_s()
            host.tick()
            per_tick.append((cpu_s() - start, dict(clock.seconds)))
    finally:
        clock.remove()
        host.governor.word_reasons = word_reasons
    per_tick = per_tick[1:]
    lines = [f"where an unread tick's time goes (median CPU per user of {ticks} ticks, stages timed; "
             f"whole tick {statistics.median(t for t, _ in per_tick) / users * 1e6:.1f} µs):"]
    for name in STAGES:
        indent = "    " if name in NESTED else "  "
        lines.append(f"{indent}{name:<16} {statistics.median(s[name] for _, s in per_tick) / users * 1e6:6.1f} µs")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
