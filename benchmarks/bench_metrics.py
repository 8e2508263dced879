"""The tick's cost with Prometheus metrics on vs off, and the cost of one scrape.

    python benchmarks/bench_metrics.py [--users 1000] [--ticks 30]

The same setup as bench_daemon.py (USERS tmpfs copies of kernel files, CgroupMonitor, weighted
DRF, dry-run backend), nobody reading state.json (the daemon then writes it every 10 s). Ticks
by turns, in the same run:

* **off** — the tick alone;
* **on** — the tick, and the metrics handed a way to build its document (what the daemon
  does: the document is built at the first scrape of the tick, on the listener's thread);
* **built in the tick** — the tick with its reasons worded as planned, and the whole document
  built after it: what a tick with metrics on cost before the document was built at scrape
  time (issue 16).

After each "on" tick, one scrape (the document built, then the exposition) and one textfile
write are timed. Prints the medians (CPU = user + system of this process), the tick's
differences in percent (on a shared machine the noise between ticks is as large as the
difference of "on": the metrics' own call is printed too, in thread time), and the scrape's and
the textfile's CPU at one every 15 s as a share of the ticks' CPU.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prometheus_client import generate_latest  # noqa: E402

from benchhost import BenchHost, cpu_s  # noqa: E402
from governor.config.metrics import MetricsExport  # noqa: E402
from governor.service.metrics import Metrics  # noqa: E402
from governor.service.state import state_document  # noqa: E402

MODES = ("off", "on", "built in the tick")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="drfgov-bench-", dir="/dev/shm"))
    try:
        host = BenchHost(tmp, args.users)
        metrics = Metrics(MetricsExport(textfile=str(tmp / "drfgov.prom")))
        metrics.export = MetricsExport()  # observe() starts no textfile thread: its write is timed below
        ticks: dict[str, list[float]] = {mode: [] for mode in MODES}
        scrapes, textfiles, observes = [], [], []
        for tick in range(args.ticks):
            mode = MODES[tick % len(MODES)]
            host.advance(tick)
            header = {"tick": tick, "time_unix_s": time.time(), "interval_s": 1.0, "mode": "dry-run",
                      "backend": "dry-run", "policy_file": "-"}
            t0 = cpu_s()
            host.governor.word_reasons = mode == "built in the tick"
            started_s = time.perf_counter()
            report = host.tick()
            duration_s = time.perf_counter() - started_s
            if mode == "built in the tick":
                document = state_document(report, **header)
            elif mode == "on":
                writes = sum(len(r.written) for r in report.users.values())
                t_observe = time.thread_time()
                metrics.observe(partial(state_document, report, **header, reasons=False), header["time_unix_s"],
                                duration_s, writes, 0)
                observes.append(time.thread_time() - t_observe)
            ticks[mode].append(cpu_s() - t0)
            document = None  # noqa: F841 - freed, as the daemon frees it before the next tick
            if mode == "on":
                t1 = cpu_s()
                generate_latest(metrics.registry)
                scrapes.append(cpu_s() - t1)
                metrics.export = MetricsExport(textfile=str(tmp / "drfgov.prom"))
                t2 = cpu_s()
                metrics.write_textfile()
                textfiles.append(cpu_s() - t2)
                metrics.export = MetricsExport()
        off_s, on_s, before_s = (statistics.median(ticks[mode][1:]) for mode in MODES)
        scrape_s, textfile_s = statistics.median(scrapes[1:]), statistics.median(textfiles[1:])
        observe_s = statistics.median(observes)
        counted = len(ticks["off"]) - 1
        print(f"tick over {args.users} users, nobody reading state.json, median CPU of {counted} ticks each: "
              f"metrics off {off_s * 1e3:.2f} ms, on {on_s * 1e3:.2f} ms ({100 * (on_s / off_s - 1):+.1f}%; "
              f"the metrics' own call, observe(): {observe_s * 1e6:.0f} µs, {100 * observe_s / off_s:.3f}% of a tick), "
              f"document built in the tick {before_s * 1e3:.2f} ms ({100 * (before_s / off_s - 1):+.1f}%)")
        print(f"off the tick: one scrape {scrape_s * 1e3:.1f} ms (its document built, then the exposition), "
              f"one textfile write {textfile_s * 1e3:.1f} ms; at 1 tick/s and one of each every 15 s "
              f"{100 * scrape_s / 15 / off_s:.1f}% and {100 * textfile_s / 15 / off_s:.1f}% of the ticks' CPU")
        host.close()
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
