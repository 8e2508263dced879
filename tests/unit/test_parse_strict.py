"""Kernel files are read as the kernel writes them: ASCII digits, ``max`` where the format
allows it, values within the kernel's ranges. Anything else is a ParseError naming file and
line — never a number Python's lenient ``int()``/``float()`` made of it (Documentation/
admin-guide/cgroup-v2.rst, "Interface Files"; kernel/sched/psi.c; block/blk-throttle.c)."""

import pytest

from cgroups import Cgroup, CpuMax, IoMax, IoStat, ParseError
from cgroups import parse
from tests.fakecgroup import fake_cgroup

#: What int() takes and the kernel never writes: an underscore, a sign, other scripts' digits.
NOT_KERNEL_NUMBERS = ["1_000", "+100", "-4096", "\u0661\u0662", "\uff11\uff12", "1e3", "0x10", ""]


def _cg(tmp_path, **files) -> Cgroup:
    return Cgroup(fake_cgroup(tmp_path, **files))


def _refused(read, path, line_no: int, expected: str) -> None:
    with pytest.raises(ParseError) as info:
        read()
    message = str(info.value)
    assert message.startswith(f"{path}:{line_no}: ") and expected in message, message


# -- numbers: ASCII digits only ------------------------------------------------------------------

@pytest.mark.parametrize("value", NOT_KERNEL_NUMBERS)
def test_a_number_is_ascii_digits_alone(value):
    with pytest.raises(ParseError, match=r"f:3: expected a whole number \(digits 0-9\)"):
        parse.uint(value, "f", 3)
    with pytest.raises(ParseError):
        parse.single_int(f"{value}\n", "f")
    with pytest.raises(ParseError):
        parse.int_or_max(value, "f")
    with pytest.raises(ParseError, match="f:2:"):
        parse.flat_keyed(f"a 1\nb {value}\n", "f")
    with pytest.raises(ParseError, match="f:2:"):
        parse.flat_keyed_select(f"a 1\nb {value}\n", ("b",), "f")
    if value:  # a blank line in cgroup.procs is skipped, as before
        with pytest.raises(ParseError, match="f:2:"):
            parse.int_list(f"1\n{value}\n", "f")


#: Numbers no u64 holds: the kernel prints none of them (``%llu``), whatever the path that reads it.
PAST_U64 = [str(2**64), str(10**25), str(10**400), "9" * 4301]


@pytest.mark.parametrize("value", PAST_U64)
def test_a_number_past_2_64_is_garbage_on_every_path(value):
    """Before, any size passed: 10**25 in cpu.stat read as 1e19 cores, 10**400 failed inside
    the rates (OverflowError, int to float), and a 4,301-digit io.stat key not required
    escaped as int()'s ValueError. Fast paths and checked ones refuse them alike."""
    with pytest.raises(ParseError, match=r"f:3: expected a whole number of at most 2\^64 - 1"):
        parse.uint(value, "f", 3)
    with pytest.raises(ParseError, match="f:1: expected a whole number of at most 2"):
        parse.single_int(f"{value}\n", "f")
    with pytest.raises(ParseError, match="f:1:"):
        parse.int_or_max(value, "f")
    for read in (parse.flat_keyed, lambda text, path: parse.flat_keyed_select(text, ("b",), path)):
        with pytest.raises(ParseError, match="f:2: expected a whole number of at most 2"):
            read(f"a 1\nb {value}\n", "f")
    with pytest.raises(ParseError, match="f:2:"):
        parse.int_list(f"1\n{value}\n", "f")
    with pytest.raises(ParseError, match="f:1:"):
        parse.device_keyed(f"8:0 rbytes={value} wbytes=0\n", "f", frozenset({"rbytes", "wbytes"}))
    # a key not required is left out, as another key whose value is not a number
    assert parse.device_keyed(f"8:0 rbytes=1 wbytes=0 cost.usage={value}\n", "f", frozenset({"rbytes", "wbytes"})) \
        == {"8:0": {"rbytes": 1, "wbytes": 0}}


@pytest.mark.parametrize("value", [2**64 - 1, 10**19, 10**19 - 1, 0])
def test_a_u64_reads_on_every_path(value):
    assert parse.uint(str(value)) == parse.single_int(f"{value}\n") == parse.int_or_max(str(value)) == value
    assert parse.flat_keyed(f"a 1\nb {value}\n") == {"a": 1, "b": value}
    assert parse.flat_keyed_select(f"a 1\nb {value}\n", ("b",)) == {"b": value}
    assert parse.int_list(f"1\n{value}\n") == [1, value]
    assert parse.device_keyed(f"8:0 rbytes={value} wbytes=0 cost.usage={value}\n", "f", frozenset({"rbytes"})) == {
        "8:0": {"rbytes": value, "wbytes": 0, "cost.usage": value}}


@pytest.mark.parametrize("value", PAST_U64)
def test_readers_refuse_a_counter_past_2_64(tmp_path, value):
    """cpu.stat, memory.events, memory.stat, io.stat and the pressure files: the kernel's
    layouts taken in one match (whose numbers are of 19 digits at most) and the checked parse."""
    full = "full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"
    cg = _cg(tmp_path, memory_events=f"low 0\nhigh {value}\nmax 0\noom 0\noom_kill 0\n",
             cpu_stat=f"usage_usec 1\nuser_usec {value}\nsystem_usec 1\nnr_periods 0\nnr_throttled 0\n"
                      "throttled_usec 0\n",
             memory_stat=f"anon 0\npgfault {value}\n", io_stat=f"8:0 rbytes=1 wbytes={value} rios=1 wios=0\n",
             io_pressure=f"some avg10=0.00 avg60=0.00 avg300=0.00 total={value}\n{full}")
    _refused(cg.memory_events, cg.path / "memory.events", 2, "at most 2^64 - 1")
    _refused(cg.cpu_stat, cg.path / "cpu.stat", 2, "at most 2^64 - 1")
    _refused(lambda: cg.memory_stat(("pgfault",)), cg.path / "memory.stat", 2, "at most 2^64 - 1")
    _refused(cg.memory_stat, cg.path / "memory.stat", 2, "at most 2^64 - 1")
    _refused(cg.io_stat, cg.path / "io.stat", 1, "at most 2^64 - 1")
    for read in (cg.pressure, cg.pressure_totals):
        _refused(lambda: read("io"), cg.path / "io.pressure", 1, "at most 2^64 - 1")


@pytest.mark.parametrize("text", ["12\n", "12", "  12 \n", "\n12\n\n"])
def test_blanks_around_a_number_and_the_newline_pass(text):
    assert parse.single_int(text, "f") == 12


@pytest.mark.parametrize("value", NOT_KERNEL_NUMBERS[:5])
def test_readers_refuse_what_int_would_take(tmp_path, value):
    cg = _cg(tmp_path, memory_current=f"{value}\n", memory_events=f"low 0\nhigh {value}\nmax 0\noom 0\noom_kill 0\n",
             cpu_stat=f"usage_usec 1\nuser_usec {value}\nsystem_usec 1\n", cgroup_procs=f"{value}\n",
             memory_stat=f"anon 0\nfile {value}\n")
    _refused(cg.memory_current, cg.path / "memory.current", 1, "digits 0-9")
    _refused(cg.memory_events, cg.path / "memory.events", 2, "digits 0-9")
    _refused(cg.cpu_stat, cg.path / "cpu.stat", 2, "digits 0-9")
    _refused(lambda: cg.memory_stat(("file",)), cg.path / "memory.stat", 2, "digits 0-9")
    _refused(cg.memory_stat, cg.path / "memory.stat", 2, "digits 0-9")
    _refused(cg.procs, cg.path / "cgroup.procs", 1, "digits 0-9")


def test_v1_rule_files_take_ascii_digits_alone(tmp_path):
    from cgroups_v1.cgroup import V1Cgroup

    path = tmp_path / "blkio"
    path.mkdir()
    (path / "blkio.throttle.read_bps_device").write_text("8:0 +5\n")
    (path / "blkio.throttle.io_service_bytes").write_text("8:0 Read -4096\n")
    cg = V1Cgroup(path)
    _refused(lambda: cg.blkio_throttle("rbps"), path / "blkio.throttle.read_bps_device", 1, "digits 0-9")
    _refused(lambda: cg.blkio_throttle_io_service_bytes(False), path / "blkio.throttle.io_service_bytes", 1,
             "digits 0-9")


# -- cpu.max and cpu.weight: the kernel's ranges ---------------------------------------------------

@pytest.mark.parametrize("text", ["-5 100000\n", "50000 0\n", "50000 999\n", "50000 1000001\n", "999 100000\n",
                                  "max 0\n", "50000 +100000\n", "max max\n"])
def test_cpu_max_out_of_the_kernels_range_is_garbage(tmp_path, text):
    cg = _cg(tmp_path, cpu_max=text)
    _refused(cg.cpu_max, cg.path / "cpu.max", 1, "")


@pytest.mark.parametrize("text, value", [("max 100000\n", CpuMax(None, 100000)), ("1000 1000\n", CpuMax(1000, 1000)),
                                         ("200000 1000000\n", CpuMax(200000, 1000000))])
def test_cpu_max_within_the_range_reads(tmp_path, text, value):
    assert _cg(tmp_path, cpu_max=text).cpu_max() == value


def test_a_cpu_max_period_of_0_no_longer_divides_by_zero(tmp_path):
    """A period of 0 reached CpuMax.cores: ZeroDivisionError, which no caller catches
    (monitors.capacity catches CgroupError). Now it is a ParseError, and the capacity is that
    of the CPUs alone."""
    import os

    from monitors.capacity import cpu_cores

    cg = _cg(tmp_path, cpu_max="50000 0\n")
    assert cpu_cores(cg) == float(len(os.sched_getaffinity(0)))


@pytest.mark.parametrize("text", ["0\n", "10001\n", "-100\n", "+100\n"])
def test_cpu_weight_outside_1_to_10000_is_garbage(tmp_path, text):
    cg = _cg(tmp_path, cpu_weight=text)
    _refused(cg.cpu_weight, cg.path / "cpu.weight", 1, "")


def test_cpu_weight_at_its_bounds_reads(tmp_path):
    assert _cg(tmp_path, cpu_weight="1\n").cpu_weight() == 1
    assert _cg(tmp_path / "b", cpu_weight="10000\n").cpu_weight() == 10000


# -- io.max and io.stat: a device and its keys on every line ---------------------------------------

@pytest.mark.parametrize("text, line_no", [
    ("8:0 rbps=-1 wbps=max riops=max wiops=max\n", 1),
    ("garbage\n", 1),
    ("8:0\n", 1),
    ("254:0 rbps=1048576 wbps=max riops=max wiops=120\n8:0\n", 2),
    ("8:0 rbps=0 wbps=max riops=max wiops=max\n", 1),  # the kernel refuses 0 (ERANGE): it holds none
    ("8:0 rbps=1_0 wbps=max riops=max wiops=max\n", 1),
    ("8:0 rbps=10 wbps=max riops=max\n", 1),
    ("sda rbps=10 wbps=max riops=max wiops=max\n", 1),
])
def test_io_max_lines_not_the_kernels_are_garbage(tmp_path, text, line_no):
    cg = _cg(tmp_path, io_max=text)
    _refused(cg.io_max, cg.path / "io.max", line_no, "")


def test_io_max_as_the_kernel_lists_it_reads(tmp_path):
    cg = _cg(tmp_path, io_max="254:0 rbps=1048576 wbps=max riops=max wiops=120\n8:0 rbps=max wbps=max riops=max "
                              "wiops=max\n")
    assert cg.io_max() == {"254:0": IoMax(1048576, None, None, 120)}


@pytest.mark.parametrize("text, line_no", [
    ("garbage\n", 1),
    ("8:0 rbytes=max wbytes=0 rios=0 wios=0\n", 1),
    ("254:0 \n8:0 rbytes=-1 wbytes=0 rios=0 wios=0\n", 2),
    ("8:0 rbytes=1 wbytes=0\n", 1),
])
def test_io_stat_lines_not_the_kernels_are_garbage(tmp_path, text, line_no):
    cg = _cg(tmp_path, io_stat=text)
    _refused(cg.io_stat, cg.path / "io.stat", line_no, "")


def test_io_stat_as_the_kernel_lists_it_reads(tmp_path):
    cg = _cg(tmp_path, io_stat="254:0 \n8:0 rbytes=5 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n")
    assert cg.io_stat() == {"254:0": IoStat(0, 0, 0, 0, 0, 0), "8:0": IoStat(5, 0, 1, 0, 0, 0)}


def test_io_stat_of_a_kernel_with_debug_stats_reads(tmp_path):
    """With ``blkcg_debug_stats=1`` the kernel adds io.latency's ``depth=max`` and
    ``use_delay=-1`` (blkcg_set_delay): keys of no reading of ours, whose values are not
    counters. Refusing them failed every user's reading each tick (the review of the strict
    parsers); their required keys are still read strictly."""
    text = ("8:0 rbytes=5 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 use_delay=-1 delay=0 "
            "depth=max avg_lat=0 win=0\n")
    assert _cg(tmp_path, io_stat=text).io_stat() == {"8:0": IoStat(5, 0, 1, 0, 0, 0)}


@pytest.mark.parametrize("text", [
    "", "254:0 \n", "8:0 rbytes=5 wbytes=0 rios=1 wios=0\n", "8:0 rbytes=5 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
    "254:0 \n8:0 rbytes=5 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n", "8:0 rbytes=5 wbytes=0 rios=1 wios=0",
    "8:0 rbytes=5 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.usage=7\n", "8:0 wbytes=0 rbytes=5 rios=1 wios=0\n",
    "8:0 rbytes=-5 wbytes=0 rios=1 wios=0\n", "8:0 rbytes=5 wbytes=0\n", f"8:0 rbytes={'9' * 21} wbytes=0 rios=1 wios=0\n",
    "garbage\n", "\n\n8:0 rbytes=5 wbytes=0 rios=1 wios=0\n", "8:0 rbytes=5 wbytes=0 rios=1 wios=0\n8:0\n",
    # u64s of 19 and 20 digits, numbers past 2^64 - 1 (of a key required, and of one not)
    f"8:0 rbytes={10**19 - 1} wbytes=0 rios=1 wios=0\n", f"8:0 rbytes={2**64 - 1} wbytes=0 rios=1 wios=0\n",
    f"8:0 rbytes={2**64} wbytes=0 rios=1 wios=0\n", f"8:0 rbytes=1 wbytes=0 rios=1 wios=0 dbytes={10**400} dios=0\n",
    f"8:0 rbytes=1 wbytes=0 rios=1 wios=0 cost.usage={'9' * 4301}\n",
])
def test_io_stat_in_one_pass_agrees_with_the_parse_key_by_key(text):
    """The kernel's lines in one regex pass: the reading (or the error) of the checked parse."""
    from cgroups.cgroup import _IO_STAT_KEYS, _NO_IO, _io_stat, _keyed

    def key_by_key(text, path):
        return {dev: _keyed(IoStat, kv, path) if kv else _NO_IO
                for dev, kv in parse.device_keyed(text, path, _IO_STAT_KEYS, bare=True).items()}

    def outcome(read):
        try:
            return read(text, "io.stat")
        except ParseError as exc:
            return str(exc)

    assert outcome(_io_stat) == outcome(key_by_key)


# -- PSI: digits.digits averages, digit totals --------------------------------------------------------

GOOD_FULL = "full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"


@pytest.mark.parametrize("some", [
    "some avg10=nan avg60=0.00 avg300=0.00 total=5\n",
    "some avg10=inf avg60=0.00 avg300=0.00 total=5\n",
    "some avg10=-1.00 avg60=0.00 avg300=0.00 total=5\n",
    "some avg10=1e3 avg60=0.00 avg300=0.00 total=5\n",
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=-5\n",
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=+5\n",
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=\u0661\n",
    "some avg10=0.00 avg60=0.00 avg300=0.00\n",
    "some avg10=0.00 avg60=0.00 avg300=0.00 total=5 extra=1\n",
])
def test_pressure_numbers_not_the_kernels_are_garbage(tmp_path, some):
    cg = _cg(tmp_path, io_pressure=some + GOOD_FULL)
    for read in (cg.pressure, cg.pressure_totals):
        _refused(lambda: read("io"), cg.path / "io.pressure", 1, "expected 'some|full")


@pytest.mark.parametrize("text, line_no, expected", [
    (GOOD_FULL, 1, "expected a 'some' line"),
    ("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n" * 2, 2, "a second 'some' line"),
    ("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nwhat avg10=0.00 avg60=0.00 avg300=0.00 total=5\n", 2,
     "expected 'some|full"),
])
def test_pressure_lines_not_the_kernels_are_garbage(tmp_path, text, line_no, expected):
    cg = _cg(tmp_path, io_pressure=text)
    for read in (cg.pressure, cg.pressure_totals):
        _refused(lambda: read("io"), cg.path / "io.pressure", line_no, expected)
