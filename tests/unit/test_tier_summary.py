"""scripts/tier_summary.py reads each tier's last pytest summary line, plain or coloured (a
guest's pytest writing to its console, a terminal, colours it)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from tier_summary import counts, why  # noqa: E402


def test_a_plain_summary_line():
    assert counts("x\n==== 3 failed, 268 passed, 2 skipped in 61.81s ====\n") == {"passed": 268, "failed": 3, "skipped": 2}


def test_a_coloured_summary_line_from_a_guest_console():
    line = "\x1b[32m======================== \x1b[32m\x1b[1m19 passed\x1b[0m\x1b[32m in 139.68s (0:02:19)\x1b[0m\x1b[32m ====\x1b[0m\n"
    assert counts(line) == {"passed": 19, "failed": 0, "skipped": 0}


def test_no_summary_is_none():
    assert counts("the VM did not boot\n") is None


def test_a_failed_tier_names_its_failed_tests_and_timeouts():
    """As pytest -v and pytest-timeout 2.4 print them: the opening banner on the line of the
    test's id, the closing one alone (left out: it names nothing), the short summary cut to 80
    columns; and faulthandler's header for a test stuck in the kernel (on its id's line too)."""
    log = ("tests/vm/test_a.py::test_one PASSED\n"
           "tests/vm/test_a.py::test_two +++++++++++++++++++++ Timeout +++++++++++++++++++++\n"
           "~~~~~~~~~~~~~~~~~~~~~~~~~~~~ Stack of MainThread (140) ~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
           "+++++++++++++++++++++++++++++++++++ Timeout +++++++++++++++++++++++++++++++++++\n"
           "tests/vm/test_a.py::test_three Timeout (0:11:00)!\n"
           "\x1b[31mFAILED\x1b[0m tests/vm/test_a.py::test_two - Failed: Timeout (>600.0s) from pytest-...\n"
           "==== 1 failed, 1 passed in 700.00s ====\n")
    assert why(log) == ["tests/vm/test_a.py::test_two +++++++++++++++++++++ Timeout +++++++++++++++++++++",
                        "tests/vm/test_a.py::test_three Timeout (0:11:00)!",
                        "FAILED tests/vm/test_a.py::test_two - Failed: Timeout (>600.0s) from pytest-..."]


def test_a_tier_that_never_ran_shows_its_boot_failure_or_else_its_last_lines():
    hung = "booting\n" + "".join(f"console {i}\n" for i in range(20)) + \
        "VM tier: cannot boot: the systemd VM did not finish within 20 minutes; the last test the console " \
        "named: tests/systemd_vm/test_main_job.py::test_x\n"
    assert why(hung) == [hung.splitlines()[-1]]
    assert why("".join(f"line {i}\n\n" for i in range(30))) == [f"line {i}" for i in range(22, 30)]


def test_many_failures_are_cut_to_a_dozen_lines():
    log = "".join(f"FAILED tests/unit/test_x.py::test_{i} - AssertionError: {'x' * 50}...\n" for i in range(40))
    log += "ERROR tests/unit/test_y.py::test_z - " + "y" * 400 + "\n"  # a long line, as --tb=line may give
    shown = why(log)
    assert len(shown) == 12 and shown[-1] == "... and 30 more"
    assert shown[0].startswith("FAILED tests/unit/test_x.py::test_0 ")
    assert len(why(log.splitlines()[-1])[0]) == 300


def test_a_stuck_guest_is_shown_under_its_tier_even_when_the_second_boot_passed(tmp_path, capsys):
    from tier_summary import main

    log = tmp_path / "tier4.log"
    log.write_text("tests/scenarios/test_scenarios.py::test_scenario[a] \n"
                   "scenario tier: guest stuck: its console printed nothing for 13 minutes (pytest-timeout and "
                   "faulthandler neither), killed; the last test the console named: "
                   "tests/scenarios/test_scenarios.py::test_scenario[a]; booting again, every test runs again\n"
                   "==== 9 passed in 600.00s ====\n")
    assert main([f"tier 4=0:{log}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tier 4: 9 passed, 0 failed, 0 skipped" and out[1].startswith("    scenario tier: guest stuck:")
    assert out[2] == "all tiers: 9 passed, 0 failed, 0 skipped"
