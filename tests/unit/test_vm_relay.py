"""The VM tiers' relay (tests/vm/boot.py): a timeout ends the VM however deep its process tree."""

import time

from tests.vm.boot import _relay


def test_a_timeout_kills_the_whole_process_tree_holding_the_console():
    """vng starts virtme-run, which starts qemu: killing the first alone left qemu holding the
    pipe, and the relay waited past its timeout for as long as the guest stayed frozen."""
    start = time.monotonic()
    lines: list[str] = []
    assert _relay(["bash", "-c", "(sleep 60; echo late) & echo started; sleep 60"], timeout_s=1, keep=lines) is False
    assert time.monotonic() - start < 20 and lines == ["started\n"]


def test_a_vm_that_ends_in_time_is_relayed_whole():
    lines: list[str] = []
    assert _relay(["bash", "-c", "echo one; echo; echo two"], timeout_s=30, keep=lines) is True
    assert lines == ["one\n", "two\n"]
