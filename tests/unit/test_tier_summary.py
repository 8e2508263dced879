"""scripts/tier_summary.py reads each tier's last pytest summary line, plain or coloured (a
guest's pytest writing to its console, a terminal, colours it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from tier_summary import counts  # noqa: E402


def test_a_plain_summary_line():
    assert counts("x\n==== 3 failed, 268 passed, 2 skipped in 61.81s ====\n") == {"passed": 268, "failed": 3, "skipped": 2}


def test_a_coloured_summary_line_from_a_guest_console():
    line = "\x1b[32m======================== \x1b[32m\x1b[1m19 passed\x1b[0m\x1b[32m in 139.68s (0:02:19)\x1b[0m\x1b[32m ====\x1b[0m\n"
    assert counts(line) == {"passed": 19, "failed": 0, "skipped": 0}


def test_no_summary_is_none():
    assert counts("the VM did not boot\n") is None
