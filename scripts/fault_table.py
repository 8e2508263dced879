#!/usr/bin/env python3
"""Print the fault suite's figures (out/faults/*.json, written by tests/faults) as a markdown table.

Usage: scripts/fault_table.py [DIR]   (default out/faults beside this repository's scripts/)

Columns: the fault, how many were injected, limits lost (slice files not back at their values
from before the governor ran, after the product's recovery; or governed users left unlimited
while it ran), ticks missed (failed or not run while the daemon was up), restarts (starts the
test made in systemd's stead), and what else the test measured.
"""

import json
import sys
from pathlib import Path


def main() -> int:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "out" / "faults"
    rows = []
    for path in sorted(folder.glob("*.json")):
        try:
            rows.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"fault_table: {path}: unreadable: {exc}", file=sys.stderr)
            return 2
    if not rows:
        print(f"fault_table: no figures in {folder} (run: .venv/bin/python -m pytest tests/faults)", file=sys.stderr)
        return 1
    print("| test | fault | injected | limits lost | ticks missed | restarts | notes |")
    print("|---|---|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['test']} | {r['fault']} | {r['injected']:,} | {r['limits_lost']} | {r['ticks_missed']} | "
              f"{r['restarts']} | {r.get('note', '')} |")
    total = {k: sum(r[k] for r in rows) for k in ("injected", "limits_lost", "ticks_missed", "restarts")}
    print(f"| **all** | {len(rows)} tests | {total['injected']:,} | {total['limits_lost']} | {total['ticks_missed']} | "
          f"{total['restarts']} | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
