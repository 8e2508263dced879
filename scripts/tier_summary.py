"""The closing lines of scripts/run-tests: each tier's own pytest summary, and the sum.

    python scripts/tier_summary.py NAME=STATUS:LOG ...

Each argument names a tier, the exit status of its run and the file holding its output. The
last pytest summary line in a log (``=== 3 failed, 268 passed, 2 skipped in 61.81s ===``)
gives that tier's counts; a tier without one did not run its tests and counts as failed.
Under a failed tier go the lines that say why (:func:`why`): CI shows the end of a run's
output, so these closing lines are what is read of a failure.
Exit status: 0 when every tier exited 0 and reported at least one passed test, else 1.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SUMMARY = re.compile(r"=+ (?P<counts>(?:\d+ \w+(?:, )?)+|no tests ran) in [\d.]+s\b[^=]*=+")
COUNT = re.compile(r"(\d+) (\w+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # SGR: pytest colours a terminal's output
# pytest's words → our three columns (an error is a failure; an expected failure is not)
COLUMN = {"passed": "passed", "xpassed": "passed", "failed": "failed", "error": "failed", "errors": "failed",
          "skipped": "skipped", "xfailed": "skipped"}


def counts(text: str) -> dict[str, int] | None:
    """passed/failed/skipped from the last pytest summary line in ``text`` (terminal colours,
    as a guest's console gets them, ignored); None without one."""
    found = None
    for match in SUMMARY.finditer(ANSI.sub("", text)):
        found = match
    if found is None:
        return None
    out = {"passed": 0, "failed": 0, "skipped": 0}
    for number, word in COUNT.findall(found.group("counts")):
        column = COLUMN.get(word)
        if column:
            out[column] += int(number)
    return out


# pytest's short summary (-ra), a VM tier's own failure, pytest-timeout's banner (with -v, on
# the line of the test's id) and faulthandler's dump of a test stuck in the kernel
REASON = re.compile(r"^(?:FAILED|ERROR) tests/|cannot boot:|guest stuck:|::\S+ \++ Timeout \++|"
                    r"Timeout \(\d+:\d\d:\d\d\)!")
# shown under a tier whatever its verdict (it was booted again): the guest-stuck message, where
# its vCPUs were and the kernel's last words (tests/vm/boot.py boot_while_stuck), a few lines each
STUCK = re.compile(r"guest stuck:")
REASONS_SHOWN, STUCK_SHOWN, TAIL_SHOWN, WIDTH = 12, 20, 8, 300


def _cut(found: list[str], shown: int, what: str) -> list[str]:
    return found if len(found) <= shown else found[:shown - 1] + [f"... and {len(found) - shown + 1} more{what}"]


def stuck(text: str) -> list[str]:
    """The ``guest stuck:`` lines of a tier's log, at most :data:`STUCK_SHOWN`, each cut to
    :data:`WIDTH` characters."""
    lines = [line.rstrip() for line in ANSI.sub("", text).splitlines()]
    return [line[:WIDTH] for line in _cut([line for line in lines if STUCK.search(line)], STUCK_SHOWN,
                                          " guest stuck lines")]


def why(text: str) -> list[str]:
    """The lines of a failed tier's log that say why: its stuck guests (:func:`stuck`), its failed
    tests, its boot failure, a test's timeout; the log's last lines when none does. At most
    :data:`STUCK_SHOWN` of the first and :data:`REASONS_SHOWN` of the others, each cut to
    :data:`WIDTH` characters."""
    lines = [line.rstrip() for line in ANSI.sub("", text).splitlines() if line.strip()]
    found = [line for line in lines if REASON.search(line) and not STUCK.search(line)]
    found = stuck(text) + _cut(found, REASONS_SHOWN, "")
    return [line[:WIDTH] for line in (found or lines[-TAIL_SHOWN:])]


def main(args: list[str]) -> int:
    total = {"passed": 0, "failed": 0, "skipped": 0}
    ok = True
    for arg in args:
        name, rest = arg.split("=", 1)
        status, log = rest.split(":", 1)
        text = Path(log).read_text(errors="replace")
        found = counts(text)
        if found is None:
            print(f"{name}: did not run its tests (exit {status})")
            print("".join(f"    {line}\n" for line in why(text)), end="")
            ok = False
            continue
        tier_ok = status == "0" and found["failed"] == 0 and found["passed"] > 0
        ok = ok and tier_ok
        print(f"{name}: {found['passed']} passed, {found['failed']} failed, {found['skipped']} skipped"
              f"{'' if tier_ok else f' (exit {status})'}")
        if not tier_ok:
            print("".join(f"    {line}\n" for line in why(text)), end="")
        else:
            print("".join(f"    {line}\n" for line in stuck(text)), end="")
        for key in total:
            total[key] += found[key]
    print(f"all tiers: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped"
          f"{'' if ok else ' — FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
