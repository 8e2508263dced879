"""Every row of issue 16's cost table in one run: "now / target", medians, with the machine.

    python benchmarks/bench_all.py [--runs 5] [--users 1000] [--big-users 10000] [--only ROW,...]

Rows (each measured in a fresh interpreter, so that its peak RSS is its own):

* ``tick``      the daemon's CPU per user per tick at USERS users (as bench_daemon.py: the
                real CgroupMonitor over tmpfs copies of kernel files, Governor, dry-run backend;
                state.json every 10 s as nobody reads it, and every tick as when read, by
                turns); median of RUNS ticks of each after two warm-up ticks.
* ``tick-big``  the same at BIG_USERS users: ms of CPU per tick and peak RSS.
* ``filling``   progressive filling, 1,000 and 10,000 users × 4 resources (bench_drf.py's
                "demand only" instance); median of max(RUNS, 20) solves.
* ``allocate``  ``drfgov allocate big.json --json`` (BIG_USERS users, tests/cli/bench_load.py's
                problem) wall time net of the same command on a one-user file.
* ``shares``    ``drfgov shares --state F`` on the state.json of a small host (8 users): wall
                time and the command's own peak RSS (wait4).
* ``help``      ``drfgov --help`` wall time.
* ``run``       ``drfgov run --once --dry-run --interval 0.1`` to its exit, less the 0.1 s it
                waits between its two samples (this host's real /sys/fs/cgroup; dry run), and
                the import time of the run path (``import governor.service.daemon``) net of a
                bare interpreter.

Commands run as installed: with their modules' bytecode (pip compiles it at install; an
editable checkout writes it at the warm-up run), so ``PYTHONDONTWRITEBYTECODE`` is taken out
of their environment — under it every run compiled every module of the project again (~25 ms
of ``shares``, ~70 ms of ``run``), which no installed command does.

Figures are medians of RUNS; the load average is printed with every row (the machine is
shared: a figure taken at load 4 on 2 cores is worth less than one at 0.5). Prints; asserts
nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DRFGOV = str(Path(sys.executable).parent / "drfgov")
ROWS = ("tick", "tick-big", "filling", "allocate", "shares", "help", "run")


# -- measurements, each run in its own interpreter (python bench_all.py --row NAME) ------------------

def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _daemon_ticks(users: int, ticks: int, root: Path):
    """The :class:`benchhost.TickCost` of ``ticks`` daemon ticks over ``users`` fake slices under
    ``root`` (bench_daemon.py's loop), each governor tick with its share of the loop's full
    garbage collection (one a minute, :data:`governor.service.runtime.GC_EVERY_S`: a sixtieth
    at one tick a second); and the last state.json."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from benchhost import BenchHost, TickCost
    from governor.service.runtime import GC_EVERY_S

    host = BenchHost(root, users)
    state = root / "state.json"
    cost = TickCost()
    for tick in range(ticks):
        host.advance(tick)
        host.timed_tick(cost, state, tick)
    cost.files = host.files_kept_open()
    collection_per_tick_s = host.full_collection_s() / GC_EVERY_S
    cost.add_to_governor(collection_per_tick_s)
    host.close()  # the daemon keeps files open up to the descriptor budget: leave some for the cleanup
    return cost, state


def row_tick(users: int, runs: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="drfgov-bench-all-", dir="/dev/shm"))
    try:
        cost, _ = _daemon_ticks(users, 2 * runs + 2, root)  # by turns read and unread: runs of each
    finally:
        shutil.rmtree(root)
    return {"users": users, "tick_s": cost.unread_s(), "tick_read_s": cost.read_s(), "ticks": runs,
            "rss_mib": _peak_rss_mib(), "files": cost.files}


def row_filling(runs: int) -> dict:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_drf import instance

    from governor.fairness.drf import progressive_filling

    out = {}
    for n in (1_000, 10_000):
        args = instance(n, 4, seed=n, caps=False, holdings=False)
        progressive_filling(*args)  # warm up
        times = []
        for _ in range(max(runs, 20)):
            t0 = time.perf_counter()
            progressive_filling(*args)
            times.append(time.perf_counter() - t0)
        out[str(n)] = statistics.median(times)
    return out


def row_state(users: int) -> dict:
    """Writes a small host's state.json to the path given and returns nothing measured."""
    root = Path(tempfile.mkdtemp(prefix="drfgov-bench-all-", dir="/dev/shm"))
    try:
        _, state = _daemon_ticks(users, 3, root)
        text = state.read_text()
    finally:
        shutil.rmtree(root)
    return {"state": text}


# -- commands, timed from the parent -----------------------------------------------------------------

GNU_TIME = "/usr/bin/time"
#: The commands' environment: this one's, their bytecode written and read (see the module docstring).
COMMAND_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(argv: list[str]) -> tuple[float, float]:
    """Wall seconds and the command's own peak RSS (MiB) of running ``argv`` (output discarded).

    The RSS comes from GNU time (``%M``) where present: a child forked from this process would
    report this process's RSS as its own (Linux carries ``ru_maxrss`` across exec), and this
    process holds a 10,000-user problem by then. GNU time's own start-up is in the wall time
    of every command alike (a few ms).
    """
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        gnu = os.access(GNU_TIME, os.X_OK)
        cmd = [GNU_TIME, "-f", "%M", "-o", rss.name, *argv] if gnu else argv
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=COMMAND_ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"bench_all: {' '.join(argv)} exited {proc.returncode}")
        return wall, (int(rss.read().split()[-1]) if gnu else usage.ru_maxrss) / 1024


def _median_cmd(argv: list[str], runs: int, before=lambda: None) -> tuple[float, float]:
    """Median wall seconds and RSS (MiB) of ``runs`` runs of ``argv``, ``before()`` untimed ahead of each."""
    before()
    _timed(argv)  # warm the page cache, and write the bytecode of an editable checkout
    results = []
    for _ in range(runs):
        before()
        results.append(_timed(argv))
    walls, rss = zip(*results)
    return statistics.median(walls), statistics.median(rss)


def _child(row: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--row", row, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.splitlines()[-1])


def _load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def machine() -> str:
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"machine: {model}, {os.cpu_count()} CPUs, {platform.python_implementation()} {platform.python_version()}, "
            f"Linux {platform.release()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {_load()}")


def report(rows: list[str], runs: int, users: int, big_users: int) -> None:
    print(machine())
    print(f"medians of {runs} runs unless said; 'now / target'")
    print(f"| what | now / target | {'load (1, 5, 15 min)':<20} |")
    print("|---|---|---|")

    def line(what: str, figure: str, load: str) -> None:
        print(f"| {what} | {figure} | {load} |", flush=True)

    if "tick" in rows:
        r = _child("tick", "--users", str(users), "--runs", str(runs))
        per_user_us, read_us = r["tick_s"] / users * 1e6, r["tick_read_s"] / users * 1e6
        line(f"daemon tick per user, {users:,} users", f"{per_user_us:.0f} µs ({100 * r['tick_s']:.1f} % of a core; "
             f"{read_us:.0f} µs while state.json is read) / ≤ 30 µs (≤ 3 %)", _load())
    if "tick-big" in rows:
        r = _child("tick", "--users", str(big_users), "--runs", str(runs))
        line(f"daemon tick at {big_users:,} users", f"{r['tick_s'] * 1e3:.0f} ms ({r['tick_read_s'] * 1e3:.0f} ms "
             f"while state.json is read), RSS {r['rss_mib']:.0f} MiB; {r['files']} / ≤ 300 ms, ≤ 150 MiB", _load())
    if "filling" in rows:
        r = _child("filling", "--runs", str(runs))
        line("progressive filling, 1,000 / 10,000 users × 4", f"{r['1000'] * 1e3:.2f} / {r['10000'] * 1e3:.2f} ms "
             f"/ ≤ 1 / ≤ 10 ms", _load())
    scratch = Path(tempfile.mkdtemp(prefix="drfgov-bench-all-"))
    try:
        if "allocate" in rows:
            sys.path.insert(0, str(REPO))
            from tests.cli.bench_load import problem

            big, tiny = scratch / "big.json", scratch / "tiny.json"
            big.write_text(json.dumps(problem(big_users), indent=1))
            tiny.write_text(json.dumps(problem(1)))
            startup, _ = _median_cmd([DRFGOV, "allocate", str(tiny), "--json"], runs)
            wall, _ = _median_cmd([DRFGOV, "allocate", str(big), "--json"], runs)
            line(f"drfgov allocate big.json --json, {big_users:,} users, net of start-up",
                 f"{(wall - startup) * 1e3:.0f} ms (start-up {startup * 1e3:.0f} ms) / ≤ 250 ms", _load())
        if "shares" in rows:
            state = scratch / "state.json"
            doc = json.loads(_child("state", "--users", "8")["state"])

            def as_just_written():  # a running daemon's file is of its latest tick: shares does not wait
                doc["time_unix_s"] = time.time()
                state.write_text(json.dumps(doc))
            wall, rss = _median_cmd([DRFGOV, "shares", "--state", str(state)], runs, as_just_written)
            line("drfgov shares (8 users)", f"{wall * 1e3:.0f} ms, {rss:.0f} MiB / ≤ 150 ms, ≤ 30 MiB", _load())
        if "help" in rows:
            wall, _ = _median_cmd([DRFGOV, "--help"], runs)
            line("drfgov --help", f"{wall * 1e3:.0f} ms / ≤ 150 ms", _load())
        if "run" in rows:
            wall, _ = _median_cmd([DRFGOV, "run", "--once", "--dry-run", "--interval", "0.1"], runs)
            bare, _ = _median_cmd([sys.executable, "-c", "pass"], runs)
            imports, _ = _median_cmd([sys.executable, "-c", "import governor.cli, governor.service.daemon"], runs)
            line("drfgov run --once --dry-run, start to exit less 0.1 s", f"{(wall - 0.1) * 1e3:.0f} ms; imports of the "
                 f"run path {(imports - bare) * 1e3:.0f} ms / first tick ≤ 1 s; imports halved", _load())
    finally:
        shutil.rmtree(scratch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--big-users", type=int, default=10_000)
    parser.add_argument("--only", default=",".join(ROWS), help=f"comma-separated rows of: {', '.join(ROWS)}")
    parser.add_argument("--row", help=argparse.SUPPRESS)  # internal: measure one row in this process
    args = parser.parse_args()
    if args.row == "tick":
        print(json.dumps(row_tick(args.users, args.runs)))
    elif args.row == "filling":
        print(json.dumps(row_filling(args.runs)))
    elif args.row == "state":
        print(json.dumps(row_state(args.users)))
    else:
        rows = args.only.split(",")
        unknown = set(rows) - set(ROWS)
        if unknown:
            parser.error(f"unknown rows: {', '.join(sorted(unknown))}; expected some of {', '.join(ROWS)}")
        report(rows, args.runs, args.users, args.big_users)


if __name__ == "__main__":
    main()
