"""The VM tiers' relay (tests/vm/boot.py): a timeout ends the VM however deep its process tree,
and says which test the console last named."""

import time

from tests.vm.boot import _relay


def test_a_timeout_kills_the_whole_process_tree_holding_the_console():
    """vng starts virtme-run, which starts qemu: killing the first alone left qemu holding the
    pipe, and the relay waited past its timeout for as long as the guest stayed frozen."""
    start = time.monotonic()
    lines: list[str] = []
    tree = "(sleep 60; echo late) & echo started; sleep 60"
    assert _relay(["bash", "-c", tree], timeout_s=1, keep=lines) == "timeout"
    assert time.monotonic() - start < 20 and lines == ["started\n"]


def test_a_vm_that_ends_in_time_is_relayed_whole():
    lines: list[str] = []
    assert _relay(["bash", "-c", "echo one; echo; echo two"], timeout_s=30, keep=lines) == "finished"
    assert lines == ["one\n", "two\n"]


def test_a_tier_out_of_time_names_the_last_test_its_console_named():
    from tests.vm.boot import where_it_stopped

    console = ["[    1.2] systemd[1]: Started drfgov-test.service\n",
               "tests/systemd_vm/test_main_job.py::test_a PASSED\n",
               "tests/systemd_vm/test_main_job.py::test_b[alice] \n", "a print from the test\n"]
    assert where_it_stopped(console) == \
        "the last test the console named: tests/systemd_vm/test_main_job.py::test_b[alice]"
    assert where_it_stopped(console[:1] + ["\n"]) == \
        "pytest named no test; the console's last line: '[    1.2] systemd[1]: Started drfgov-test.service'"
    done = console + ["==== 3 passed in 12.00s ====\n", "[  99.1] reboot: Power down\n"]
    assert where_it_stopped(done) == "pytest had finished (==== 3 passed in 12.00s ====): the guest hung after it"


def test_a_guest_silent_too_long_is_killed_as_stuck_and_one_that_talks_is_not():
    """A stuck guest (tiers 2 and 4 here: vCPUs busy, no I/O, nothing printed; pytest-timeout
    and faulthandler could not speak) is killed after the silence, long before the tier's limit."""
    lines: list[str] = []
    start = time.monotonic()
    assert _relay(["bash", "-c", "echo started; sleep 60"], timeout_s=60, keep=lines, silence_s=1) == "silent"
    assert time.monotonic() - start < 20 and lines == ["started\n"]
    talking = "for i in 1 2 3 4 5 6; do echo $i; sleep 0.5; done"  # 3 s in all, never 1 s silent
    assert _relay(["bash", "-c", talking], timeout_s=60, keep=lines, silence_s=1) == "finished"


def test_a_stuck_boot_is_said_and_booted_again_once(capsys):
    from tests.vm.boot import BOOTS, boot_while_stuck

    results = iter([("silent", ["tests/vm/test_a.py::test_b \n"]), ("finished", ["done\n"])])
    assert boot_while_stuck("VM tier", lambda attempt: next(results)) == ("finished", ["done\n"])
    said = capsys.readouterr().out
    assert said.startswith("VM tier: guest stuck: its console printed nothing for 13 minutes") and \
        "tests/vm/test_a.py::test_b; booting again, every test runs again" in said
    attempts = []
    assert boot_while_stuck("VM tier", lambda attempt: attempts.append(attempt) or ("silent", []))[0] == "silent"
    assert attempts == list(range(1, BOOTS + 1))
