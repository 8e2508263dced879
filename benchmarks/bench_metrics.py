"""The tick's cost with Prometheus metrics on vs off, and the cost of one scrape.

    python benchmarks/bench_metrics.py [--users 1000] [--ticks 30]

The same setup as bench_daemon.py (USERS tmpfs copies of kernel files, CgroupMonitor, weighted
DRF, dry-run backend, state.json written each tick). Ticks alternate: even ticks as with
metrics off (the tick and state.json), odd ticks also hand the document to the metrics
(what the tick pays with metrics on). The series are built off the tick: by a scrape, on the
listener's thread, and by the textfile thread at most every 15 s; after each odd tick the CPU of
one scrape and of one textfile write is measured too. Prints the medians (CPU = user + system
of this process), the tick's difference in percent (on a shared machine the noise between
ticks is larger than the difference: the CPU of the metrics' own call, thread time, is printed
too), and the scrape's and the textfile's CPU at one every 15 s as a share of the ticks' CPU.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from prometheus_client import generate_latest  # noqa: E402

from benchhost import BenchHost, cpu_s  # noqa: E402
from governor.config.metrics import MetricsExport  # noqa: E402
from governor.service.metrics import Metrics  # noqa: E402
from governor.service.state import state_document, write_state  # noqa: E402


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
        off, on, scrapes, textfiles, observes = [], [], [], [], []
        for tick in range(args.ticks):
            host.advance(tick)
            t0 = cpu_s()
            started_s = time.perf_counter()
            report = host.tick()
            duration_s = time.perf_counter() - started_s
            doc = state_document(report, tick=tick, time_unix_s=time.time(), interval_s=1.0, mode="dry-run",
                                 backend="dry-run", policy_file="-")
            write_state(tmp / "state.json", doc)
            if tick % 2:
                writes = sum(len(r.written) for r in report.users.values())
                previous = metrics.collector.document  # freed below: without metrics it is freed as well
                t_observe = time.thread_time()
                metrics.observe(doc, duration_s, writes, 0)
                observes.append(time.thread_time() - t_observe)
                del previous
                on.append(cpu_s() - t0)
                t1 = cpu_s()
                generate_latest(metrics.registry)
                scrapes.append(cpu_s() - t1)
                metrics.export = MetricsExport(textfile=str(tmp / "drfgov.prom"))
                t2 = cpu_s()
                metrics.write_textfile()
                textfiles.append(cpu_s() - t2)
                metrics.export = MetricsExport()
            else:
                off.append(cpu_s() - t0)
        off_s, on_s = statistics.median(off[1:]), statistics.median(on[1:])
        scrape_s, textfile_s = statistics.median(scrapes[1:]), statistics.median(textfiles[1:])
        observe_s = statistics.median(observes)
        print(f"tick over {args.users} users, median CPU of {len(off) - 1} ticks each: metrics off {off_s * 1e3:.2f} ms, "
              f"on {on_s * 1e3:.2f} ms ({100 * (on_s / off_s - 1):+.1f}%; the metrics' own call, observe(): "
              f"{observe_s * 1e6:.0f} µs, {100 * observe_s / off_s:.3f}% of a tick); off the tick: one scrape "
              f"{scrape_s * 1e3:.1f} ms, one textfile write {textfile_s * 1e3:.1f} ms, i.e. at 1 tick/s and one "
              f"every 15 s {100 * scrape_s / 15 / off_s:.1f}% and {100 * textfile_s / 15 / off_s:.1f}% of the ticks' CPU")
        host.close()
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
