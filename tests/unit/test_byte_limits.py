"""One rule for byte limits (memory.low|high|max; v1's memory.limit_in_bytes and
memory.soft_limit_in_bytes): a whole number in 0 … 2^63 - 1, or None for max. The kernel's
memparse() wraps past 2^64 - 1 (2^64 written to memory.max is a limit of 0: an immediate OOM),
and its page counters hold at most LONG_MAX bytes (mm/page_counter.c)."""

import pytest

from cgroups import Cgroup, InvalidLimit, ParseError
from cgroups.limits import BYTES_LIMIT_MAX, check_bytes
from tests.fakecgroup import fake_cgroup


def _cg(tmp_path, **files) -> Cgroup:
    return Cgroup(fake_cgroup(tmp_path, **files))


@pytest.mark.parametrize("value", [2**63, 2**64, 2**64 + 4096, -1])
def test_a_byte_limit_the_kernel_cannot_hold_is_not_written(tmp_path, value):
    """memparse() wraps past 2^64 - 1: 2^64 written to memory.max is a limit of 0, an
    immediate OOM. Refused before writing, by the rule v1 shares."""
    from cgroups_v1.values import check_bytes_or_unlimited

    cg = _cg(tmp_path)
    before = {name: (cg.path / name).read_text() for name in ("memory.low", "memory.high", "memory.max")}
    for write in (cg.set_memory_low, cg.set_memory_high, cg.set_memory_max):
        with pytest.raises(InvalidLimit, match="2\\^63"):
            write(value)
    assert {name: (cg.path / name).read_text() for name in before} == before
    with pytest.raises(InvalidLimit):
        check_bytes_or_unlimited("memory.limit_in_bytes", value)
    assert check_bytes_or_unlimited is check_bytes


def test_the_largest_byte_limit_is_written(tmp_path):
    cg = _cg(tmp_path)
    cg.set_memory_max(BYTES_LIMIT_MAX)
    cg.set_memory_high(None)
    assert (cg.path / "memory.max").read_text() == f"{2**63 - 1}" and (cg.path / "memory.high").read_text() == "max"
    assert cg.memory_max() == 2**63 - 1 and cg.memory_high() is None


@pytest.mark.parametrize("name", ["memory.low", "memory.high", "memory.max"])
@pytest.mark.parametrize("text", [f"{2**63}\n", f"{2**64}\n", "-1\n"])
def test_a_byte_limit_read_past_2_63_is_garbage_not_a_setting(tmp_path, name, text):
    """Not recorded as an admin's limit to restore: the read fails, and the backend says so."""
    from governor.enforce.cgroupfs import read_limit_set
    from governor.enforce.model import EnforceError

    cg = _cg(tmp_path, **{name.replace(".", "_"): text})
    with pytest.raises(ParseError) as info:
        getattr(cg, name.replace(".", "_"))()
    assert str(info.value).startswith(f"{cg.path / name}:1: ")
    with pytest.raises(EnforceError, match=name):
        read_limit_set(cg)


@pytest.mark.parametrize("value", [2**63, 2**64 - 1])
def test_memory_current_past_2_63_is_garbage_not_a_use(tmp_path, value):
    """memory.current is a page counter in bytes (mm/page_counter.c: at most PAGE_COUNTER_MAX
    pages, LONG_MAX bytes): 2^63 is no use of hers. Before, it was read, and stopped the tick
    for every user in the plan's int64 array (OverflowError); now it is her ParseError, by
    the rule of the byte limits."""
    from governor.enforce.cgroupfs import read_memory_current
    from governor.enforce.model import EnforceError

    cg = _cg(tmp_path, memory_current=f"{value}\n")
    with pytest.raises(ParseError, match=r"memory.current:1: memory.current \d+: expected whole bytes in 0 … 2\^63"):
        cg.memory_current()
    with pytest.raises(EnforceError, match="memory.current"):
        read_memory_current(cg)
    assert _cg(tmp_path / "b", memory_current=f"{BYTES_LIMIT_MAX}\n").memory_current() == BYTES_LIMIT_MAX


@pytest.mark.parametrize("keys", [None, ("file", "shmem")])
def test_a_memory_stat_amount_past_2_63_is_garbage(tmp_path, keys):
    """Its amounts in bytes are the cgroup's pages too, as memory.current: the same rule, on
    the line of the amount. An event count is a u64 (pgfault), not bytes."""
    text = f"anon 0\nfile 4096\nshmem {2**63}\npgfault {2**64 - 1}\n"
    cg = _cg(tmp_path, memory_stat=text)
    with pytest.raises(ParseError, match=r"memory.stat:3: memory.stat shmem \d+: expected whole bytes in 0 … 2\^63"):
        cg.memory_stat(keys)
    fine = _cg(tmp_path / "b", memory_stat=text.replace(str(2**63), str(BYTES_LIMIT_MAX)))
    assert fine.memory_stat(keys)["shmem"] == BYTES_LIMIT_MAX
    assert fine.memory_stat()["pgfault"] == 2**64 - 1
