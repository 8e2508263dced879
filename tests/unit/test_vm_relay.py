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


def test_kernel_lines_are_told_by_printk_timestamp():
    from tests.vm.boot import is_kernel_line

    assert is_kernel_line("[   12.345678] rcu: INFO: rcu_preempt self-detected stall on CPU\n")
    assert is_kernel_line("\r[12345.000001] Memory cgroup out of memory: Killed process 77 (python3)\n")
    for line in ("tests/vm/test_a.py::test_b PASSED                    [ 50%]\n", "[  50%] done\n",
                 "[  OK  ] Started drfgov-test.service.\n", "[    1.2] not printk's stamp\n", "\n",
                 "a print [   12.345678] with a kernel line glued on\n"):
        assert not is_kernel_line(line), line


def test_kernel_lines_do_not_keep_a_silent_guest_alive_and_are_kept():
    """A guest in an RCU stall prints a report every ~21 s: still stuck. Its kernel lines are
    relayed and kept; the diagnosis runs once, before the kill."""
    lines: list[str] = []
    called = []
    stall = "echo started; i=0; while :; do i=$((i+1)); echo \"[   $i.000000] rcu: INFO: stall $i\"; sleep 0.1; done"
    start = time.monotonic()
    assert _relay(["bash", "-c", stall], timeout_s=15, keep=lines, silence_s=1.5,
                  on_silent=lambda: called.append(len(lines))) == "silent"
    assert time.monotonic() - start < 10 and len(called) == 1
    assert lines[0] == "started\n" and "rcu: INFO: stall 1" in lines[1] and len(lines) > 5
    talking = "for i in 1 2 3 4 5 6; do echo \"[   $i.000000] kernel\"; echo $i; sleep 0.5; done"
    assert _relay(["bash", "-c", talking], timeout_s=60, keep=[], silence_s=1, on_silent=lambda: 1 / 0) == "finished"


def test_a_diagnosis_that_fails_is_said_and_the_guest_still_killed_as_silent(capsys):
    assert _relay(["bash", "-c", "sleep 60"], timeout_s=60, keep=[], silence_s=0.5, on_silent=lambda: 1 / 0) == "silent"
    assert "could not diagnose the silent guest: ZeroDivisionError" in capsys.readouterr().out


def test_a_stuck_boot_says_where_its_vcpus_were_and_the_kernels_last_words(capsys):
    from tests.vm.boot import boot_while_stuck

    console = ["[    0.000000] Command line: console=ttyS0 panic=-1\n", "tests/vm/test_a.py::test_b \n",
               "[  700.000001] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:\n"]
    results = iter([("silent", console, ["vCPU0 in f+0x1 (5/5 samples)"]), ("finished", ["done\n"], [])])
    assert boot_while_stuck("VM tier", lambda attempt: next(results)) == ("finished", ["done\n"])
    said = capsys.readouterr().out.splitlines()
    assert said[1:] == ["VM tier: guest stuck: vCPU0 in f+0x1 (5/5 samples)",
                        "VM tier: guest stuck: kernel: [  700.000001] rcu: INFO: rcu_preempt detected stalls on "
                        "CPUs/tasks:"]
    boot_while_stuck("systemd tier", lambda attempt: ("silent", console[:2]))
    said = capsys.readouterr().out.splitlines()
    assert said[1] == "systemd tier: guest stuck: kernel: its console printed nothing"
