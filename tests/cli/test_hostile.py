"""Every hostile input file (tests/cli/hostile.py) through the installed command: exit status 2,
one line on stderr naming the file (and line and field where one applies), within 10 s, no
traceback. Issue 15's table: `python tests/cli/hostile.py`."""

import os
import re

import pytest

from tests.cli.conftest import _installed_drfgov
from tests.cli.hostile import MAX_LINE, TIMEOUT_S, cases, run_case

CASES = cases()
ERROR_LINE = re.compile(r"^drfgov: error: (?P<file>[^:]+)(?::(?P<line>\d+))?: (?:(?P<field>[^\s:]+): )?\S")


def test_the_corpus_covers_issue_15s_60_kinds():
    count = {c: sum(case.command == c for case in CASES) for c in ("check-config", "allocate", "compare", "simulate")}
    assert count["check-config"] >= 35 and count["allocate"] >= 13 and count["simulate"] >= 12, count
    assert count["compare"] >= count["allocate"], count  # every problem file allocate refuses, and compare's bounds


@pytest.mark.parametrize("case", CASES, ids=[f"{c.command}: {c.name}" for c in CASES])
def test_hostile_input_is_one_error_line_and_exit_2(case, tmp_path):
    if case.needs_root and os.geteuid() != 0:
        pytest.skip("this case chowns a file to nobody: only root can")
    outcome = run_case(_installed_drfgov(), case, tmp_path, TIMEOUT_S)
    assert outcome.verdict != "hang", f"no answer within {TIMEOUT_S:g} s"
    assert "Traceback" not in outcome.stderr, outcome.stderr[-2000:]
    assert outcome.returncode == 2, (outcome.returncode, outcome.stderr[-2000:])
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr[-2000:]
    line = lines[0]
    assert len(line) <= MAX_LINE, f"{len(line)} characters"
    match = ERROR_LINE.match(line)
    assert match, line
    assert case.expect in line, line


def test_errors_name_file_line_and_field(drfgov, tmp_path):
    """The line found only on error, for JSON as for YAML."""
    doc = ('{"capacity": {"cpu": 9, "memory": 18},\n "users": {\n  "A": {"demand": {"cpu": 1}},\n'
           '  "B": {"demand": {"cpu": 3}, "max_units": -1}}}\n')
    bad = tmp_path / "p.json"
    bad.write_text(doc)
    out = drfgov("allocate", bad)
    assert out.returncode == 2
    assert out.stderr.strip() == f"drfgov: error: {bad}:4: users.B.max_units: expected a number ≥ 0, got -1"
