"""cgroups.Cgroup on fake trees made of files the real kernel wrote."""

import errno
import os

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cgroups import (
    Cgroup, CgroupGone, ControllerMissing, CpuMax, CpuStat, InvalidLimit, IoMax, IoStat, MemoryEvents,
    ParseError, WriteRefused,
)
from cgroups.parse import FAST_DIGITS, U64_MAX
from tests.fakecgroup import FIXTURES, fake_cgroup


@pytest.fixture
def cg(tmp_path):
    return Cgroup(fake_cgroup(tmp_path))


def test_readers_parse_the_kernel_captures(cg):
    assert cg.cpu_stat() == CpuStat(5723367, 5667839, 55528, 125, 113, 5571956, 0, 0)
    assert cg.cpu_max() == CpuMax(50000, 100000)
    assert cg.cpu_weight() == 100
    assert cg.memory_current() > 0
    stat = cg.memory_stat()
    assert stat["file"] == 102400 and stat["anon"] == 0 and "workingset_refault_file" in stat
    assert cg.memory_events() == MemoryEvents(0, 0, 0, 0, 0, 0)
    assert (cg.memory_low(), cg.memory_high(), cg.memory_max()) == (0, 64 * 2**20, None)
    assert cg.io_stat() == {"254:0": IoStat(1048576, 0, 16, 0, 0, 0)}
    assert cg.io_max() == {"254:0": IoMax(rbps=1048576, wbps=None, riops=None, wiops=120)}
    cpu = cg.pressure("cpu")
    assert (cpu.some.avg10, cpu.some.total_usec, cpu.full.avg300) == (27.32, 4838997, 1.60)
    assert cg.procs() == [1234]
    assert cg.controllers() == {"cpu", "io", "memory"}


def test_missing_optional_keys_are_none(tmp_path):
    # cpu.stat of a cgroup without the cpu controller has only the usage keys
    cg = Cgroup(fake_cgroup(tmp_path, cpu_stat="usage_usec 10\nuser_usec 6\nsystem_usec 4\n",
                            memory_events="low 0\nhigh 3\nmax 0\noom 0\noom_kill 0\n",
                            io_pressure="some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"))
    assert cg.cpu_stat() == CpuStat(10, 6, 4)
    assert cg.cpu_stat().nr_throttled is None
    assert cg.memory_events().oom_group_kill is None and cg.memory_events().high == 3
    assert cg.pressure("io").full is None
    assert cg.io_max() == {"254:0": IoMax(1048576, None, None, 120)}


def test_empty_io_files(tmp_path):
    cg = Cgroup(fake_cgroup(tmp_path, io_stat="", io_max=""))
    assert cg.io_stat() == {} and cg.io_max() == {}


def test_io_stat_device_line_without_keys_means_no_io_yet(tmp_path):
    # Linux 6.1 prints "254:0" alone once io.max names a device the cgroup has not used yet
    cg = Cgroup(fake_cgroup(tmp_path, io_stat="254:0 \n8:0 rbytes=5 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n"))
    assert cg.io_stat() == {"254:0": IoStat(0, 0, 0, 0, 0, 0), "8:0": IoStat(5, 0, 1, 0, 0, 0)}


@pytest.mark.parametrize(
    "file, text, line",
    [
        ("cpu.stat", "usage_usec 1\nuser_usec lots\n", 2),
        ("cpu.max", "fifty 100000\n", 1),
        ("memory.current", "12\n13\n", 1),
        ("io.stat", "254:0 rbytes=1 wbytes\n", 1),
        ("memory.events", "low 0\nhigh\n", 2),
    ],
)
def test_garbage_names_path_and_line(tmp_path, file, text, line):
    cg = Cgroup(fake_cgroup(tmp_path, **{file.replace(".", "_", 1): text}))
    reader = {"cpu.stat": cg.cpu_stat, "cpu.max": cg.cpu_max, "memory.current": cg.memory_current,
              "io.stat": cg.io_stat, "memory.events": cg.memory_events}[file]
    with pytest.raises(ParseError) as info:
        reader()
    assert str(info.value).startswith(f"{cg.path / file}:{line}:")


def test_missing_required_key(tmp_path):
    cg = Cgroup(fake_cgroup(tmp_path, cpu_stat="user_usec 1\nsystem_usec 1\n"))
    with pytest.raises(ParseError, match="usage_usec"):
        cg.cpu_stat()


def test_vanished_cgroup_and_missing_controller_are_distinct(tmp_path):
    cg = Cgroup(fake_cgroup(tmp_path, io_max=None))
    with pytest.raises(ControllerMissing, match=r"io controller is not enabled .* \+io"):
        cg.io_max()
    gone = Cgroup(tmp_path / "user.slice" / "user-4242.slice")
    with pytest.raises(CgroupGone, match="vanished"):
        gone.cpu_stat()
    with pytest.raises(CgroupGone):
        gone.set_cpu_weight(100)
    assert not gone.exists() and cg.exists()


def test_writers_render_the_kernel_formats(cg):
    cg.set_cpu_max(CpuMax(200000, 100000))
    assert (cg.path / "cpu.max").read_text() == "200000 100000"
    cg.set_cpu_max(CpuMax(None))
    assert (cg.path / "cpu.max").read_text() == "max 100000"
    cg.set_cpu_weight(10000)
    assert (cg.path / "cpu.weight").read_text() == "10000"
    cg.set_memory_high(2**30)
    cg.set_memory_max(None)
    cg.set_memory_low(0)
    assert [(cg.path / f).read_text() for f in ("memory.high", "memory.max", "memory.low")] == [str(2**30), "max", "0"]
    cg.set_io_max("8:0", IoMax(rbps=10_000_000, wiops=50))
    assert (cg.path / "io.max").read_text() == "8:0 rbps=10000000 wbps=max riops=max wiops=50"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda cg: cg.set_cpu_max(CpuMax(500, 100000)), "below the kernel's 1000 µs minimum"),
        (lambda cg: cg.set_cpu_max(CpuMax(5000, 2_000_000)), "outside 1000..1000000"),
        (lambda cg: cg.set_cpu_max(CpuMax(5000, 999)), "outside 1000..1000000"),
        (lambda cg: cg.set_cpu_weight(0), "1..10000"),
        (lambda cg: cg.set_cpu_weight(True), "1..10000"),
        (lambda cg: cg.set_memory_high(-1), "whole bytes"),
        (lambda cg: cg.set_memory_max(1.5), "whole bytes"),
        (lambda cg: cg.set_io_max("sda", IoMax(rbps=1)), "MAJ:MIN"),
        (lambda cg: cg.set_io_max("8:0", IoMax(rbps=0)), "≥ 1"),
    ],
)
def test_invalid_limits_are_refused_before_writing(cg, call, message):
    before = {p.name: p.read_text() for p in cg.path.iterdir()}
    with pytest.raises(InvalidLimit, match=message):
        call(cg)
    assert {p.name: p.read_text() for p in cg.path.iterdir()} == before


def test_kernel_refusal_carries_errno_and_meaning(tmp_path):
    path = fake_cgroup(tmp_path, cpu_weight=None)
    os.symlink("/dev/full", path / "cpu.weight")  # every write fails with ENOSPC
    with pytest.raises(WriteRefused) as info:
        Cgroup(path).set_cpu_weight(50)
    assert info.value.errno == errno.ENOSPC and "cpu.weight" in str(info.value) and "'50'" in str(info.value)


def test_cpu_max_for_cores_clamps_to_the_kernel_minimum():
    assert CpuMax.for_cores(0.5) == CpuMax(50000, 100000)
    assert CpuMax.for_cores(2.0).render() == "200000 100000"
    assert CpuMax.for_cores(0.001).quota_usec == 1000  # 100 µs would be refused
    assert CpuMax.for_cores(None).render() == "max 100000"
    assert CpuMax(150000, 100000).cores == 1.5


CPU_STAT_KEYS = ("usage_usec", "user_usec", "system_usec", "nice_usec", "core_sched.force_idle_usec", "nr_periods",
                 "nr_throttled", "throttled_usec", "nr_bursts", "burst_usec", "a_key_of_tomorrow")
CPU_STAT_VALUES = st.one_of(st.integers(0, 2**64).map(str),
                            st.sampled_from(["-1", "+3", "\u0661", "x", "1 2", "", "9" * 21, "9" * 4301]))


def _cpu_stat_outcome(parse, text):
    try:
        return parse(text, "cpu.stat")
    except ParseError as exc:
        return str(exc)


def _kernel_cpu_stat(nice, core_sched, controller, values):
    """cpu.stat in one of the kernel's layouts: the three times, the niced time (6.12), the
    force-idle time (core scheduling), then none, the throttling or the throttling and bursts."""
    keys = ["usage_usec", "user_usec", "system_usec", *(["nice_usec"] if nice else []),
            *(["core_sched.force_idle_usec"] if core_sched else []),
            *(["nr_periods", "nr_throttled", "throttled_usec", "nr_bursts", "burst_usec"][:(0, 3, 5)[controller]])]
    return "".join(f"{k} {v}\n" for k, v in zip(keys, values))


def _kernel_layouts(values):
    """cpu.stat in the kernel's layouts, of numbers drawn from ``values``."""
    return st.builds(_kernel_cpu_stat, st.booleans(), st.booleans(), st.integers(0, 2),
                     st.lists(values, min_size=10, max_size=10))


#: cpu.stat in the kernel's layouts: u64s, and now and then a number past 2^64 - 1
KERNEL_CPU_STAT = _kernel_layouts(st.one_of(st.integers(0, 2**64 - 1), st.integers(2**64 - 2**10, 2**64 + 2**10)))
#: lines of such keys in any order, some missing or added, values the kernel would not write
CPU_STAT_LINES = st.lists(st.tuples(st.sampled_from(CPU_STAT_KEYS), CPU_STAT_VALUES), max_size=10).map(
    lambda lines: "".join(f"{k} {v}\n" for k, v in lines))


@given(st.one_of(KERNEL_CPU_STAT, CPU_STAT_LINES, st.text(max_size=80),
                 st.tuples(KERNEL_CPU_STAT, st.one_of(CPU_STAT_LINES, st.text(max_size=20))).map("".join),
                 KERNEL_CPU_STAT.map(lambda text: text.rstrip("\n"))))
@example(f"usage_usec {'9' * 4301}\nuser_usec 1\nsystem_usec 1\n")  # past int()'s 4,300 digits
@example(f"usage_usec 1\nuser_usec 1\nsystem_usec 1\nnr_periods {'9' * 21}\nnr_throttled 0\nthrottled_usec 0\n")
@example(f"usage_usec {2**64}\nuser_usec 1\nsystem_usec 1\n")  # 20 digits, past a u64
@example(f"usage_usec {2**64 - 1}\nuser_usec 1\nsystem_usec 1\n")
@example(f"usage_usec {10**25}\nuser_usec 1\nsystem_usec 1\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
def test_cpu_stat_in_one_match_agrees_with_the_parse_key_by_key(text):
    """The kernel's layout in one regex match (issue 16): the same reading as the key-by-key
    parse of the same text, and the same error where that refuses it."""
    from cgroups import parse
    from cgroups.cgroup import _cpu_stat, _keyed

    def key_by_key(text, path):
        return _keyed(CpuStat, parse.flat_keyed(text, path), path)

    assert _cpu_stat_outcome(_cpu_stat, text) == _cpu_stat_outcome(key_by_key, text)


@given(_kernel_layouts(st.integers(0, 10**FAST_DIGITS - 1)))
def test_cpu_stat_in_the_kernels_layouts_takes_the_one_match(text):
    """The one match does take the kernel's layouts (the captured file among them): else the
    agreement above would hold of the parse key by key alone. Its numbers are those of 19
    digits at most (10^19 µs is 317,000 years), each a u64; a longer one is checked key by key."""
    from cgroups.cgroup import _CPU_STAT

    assert _CPU_STAT.match(text)
    assert _CPU_STAT.match((FIXTURES / "linux-6.1" / "cgroup" / "cpu.stat").read_text())


PSI = st.floats(min_value=0, max_value=100, allow_nan=False).map(lambda x: f"{x:.2f}")


#: PSI totals: u64s, of 19 digits (the fast match's) and of 20, and now and then a number past 2^64 - 1
PSI_TOTAL = st.one_of(st.integers(0, 2**63), st.integers(10**19 - 2**10, 2**64 + 2**10))


@given(st.lists(PSI, min_size=6, max_size=6), PSI_TOTAL, PSI_TOTAL, st.booleans())
@example(["0.00"] * 6, 2**64, 5, True)
def test_fast_pressure_parse_agrees_with_the_checked_one(avgs, some_total, full_total, with_full):
    """The two-line layout of totals of 19 digits at most is the fast match's, with the checked
    reading; any other text is left to the checked parse (a total past 2^64 - 1 fails there)."""
    from cgroups.cgroup import _pressure_checked, _pressure_fast

    text = f"some avg10={avgs[0]} avg60={avgs[1]} avg300={avgs[2]} total={some_total}\n"
    if with_full:
        text += f"full avg10={avgs[3]} avg60={avgs[4]} avg300={avgs[5]} total={full_total}\n"
    fast = _pressure_fast(text)
    if with_full and max(some_total, full_total) < 10**FAST_DIGITS:
        assert fast == _pressure_checked(text, "x")
    else:
        assert fast is None


@given(st.lists(PSI, min_size=6, max_size=6), PSI_TOTAL, PSI_TOTAL, st.booleans())
@example(["0.00"] * 6, 2**64 - 1, 2**64, True)
def test_pressure_totals_are_the_totals_of_the_full_reading(tmp_path_factory, avgs, some_total, full_total, with_full):
    """What the monitor reads each tick (the two totals) is what pressure() reads, line for
    line; a total past 2^64 - 1 fails both on its line."""
    text = f"some avg10={avgs[0]} avg60={avgs[1]} avg300={avgs[2]} total={some_total}\n"
    if with_full:
        text += f"full avg10={avgs[3]} avg60={avgs[4]} avg300={avgs[5]} total={full_total}\n"
    cg = Cgroup(fake_cgroup(tmp_path_factory.mktemp("psi"), io_pressure=text))
    if some_total > U64_MAX or with_full and full_total > U64_MAX:
        line_no = 1 if some_total > U64_MAX else 2
        for read in (cg.pressure, cg.pressure_totals):
            with pytest.raises(ParseError, match=f"io.pressure:{line_no}: expected a whole number of at most 2"):
                read("io")
        return
    full = cg.pressure("io")
    assert cg.pressure_totals("io") == (full.some.total_usec, full.full.total_usec if with_full else None)


@pytest.mark.parametrize("text", ["some avg10=0.00 avg60=0.00 avg300=0.00 total=x\n",
                                  "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nfull avg10=\ufffd avg60=0.00 "
                                  "avg300=0.00 total=5\n",
                                  # a total no u64 holds, past int()'s own limit of 4,300 digits
                                  f"some avg10=0.00 avg60=0.00 avg300=0.00 total={'9' * 4301}\n"
                                  f"full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n"])
def test_pressure_totals_of_the_kernel_captures_and_of_a_broken_file(tmp_path, text):
    """Garbage fails the totals as it fails the whole reading, averages included."""
    cg = Cgroup(fake_cgroup(tmp_path, memory_pressure=text))
    assert cg.pressure_totals("cpu") == (4838997, 4838997)
    with pytest.raises(ParseError, match="memory.pressure"):
        cg.pressure("memory")
    with pytest.raises(ParseError, match="memory.pressure"):
        cg.pressure_totals("memory")


def test_pressure_totals_of_text_the_kernel_would_not_write_are_what_pressure_reads(tmp_path):
    """Not the kernel's two-line layout but its lines (another order, blank lines, blanks
    around): the checked route, with the full reading's totals. Numbers the kernel does not
    print (nan, inf, a sign, an exponent, other scripts' digits) fail both alike."""
    text = "\nfull avg10=1.00 avg60=0.00 avg300=0.00 total=7\n  some avg10=0.50 avg60=1.00 avg300=2.00 total=12 \n"
    cg = Cgroup(fake_cgroup(tmp_path, io_pressure=text))
    full = cg.pressure("io")
    assert cg.pressure_totals("io") == (full.some.total_usec, full.full.total_usec) == (12, 7)
    bad = Cgroup(fake_cgroup(tmp_path / "bad", io_pressure="some avg10=nan avg60=+1 avg300=1e3 total=\u0661\u0662\n"
                                                          "full avg10=inf avg60=0.00 avg300=0.00 total=7\n"))
    for read in (bad.pressure, bad.pressure_totals):
        with pytest.raises(ParseError, match=r"io.pressure:1: expected 'some\|full avg10="):
            read("io")


def test_kept_open_files_are_reread_in_place(tmp_path):
    path = fake_cgroup(tmp_path)
    cg = Cgroup(path, keep_open=True)
    before = cg.memory_current()
    (path / "memory.current").write_text(f"{before + 4096}\n")  # same inode, like a kernel file's new content
    assert cg.memory_current() == before + 4096 and "memory.current" in cg._fds
    cg.close()  # retired: read on, but nothing kept open again
    assert cg.memory_current() == before + 4096 and not cg.keeps_open


def test_a_counter_file_is_parsed_again_only_when_its_bytes_change(tmp_path, monkeypatch):
    """Unchanged bytes give the last read's value (the same object: no parse); new bytes, or
    the same bytes after a failed parse, are parsed; close() and a vanished cgroup forget."""
    path = fake_cgroup(tmp_path)
    cg = Cgroup(path, keep_open=True)  # as the monitor's are (one pread a file)
    stat, events, psi, io = cg.cpu_stat(), cg.memory_events(), cg.pressure_totals("cpu"), cg.io_stat()
    assert cg.cpu_stat() is stat and cg.memory_events() is events and cg.pressure_totals("cpu") is psi
    assert cg.io_stat() is io and io  # kept and shared, so it cannot be changed:
    with pytest.raises(TypeError):
        io["8:0"] = None
    (path / "cpu.stat").write_text((path / "cpu.stat").read_text().replace("usage_usec 5723367", "usage_usec 5723368"))
    moved = cg.cpu_stat()
    assert moved is not stat and moved == stat._replace(usage_usec=5723368)
    assert cg.memory_events() is events  # one file's change leaves the others' values kept
    (path / "memory.events").write_text("low 0\nhigh x\n")
    for _ in range(2):  # a failed parse is not kept: the same garbage fails again
        with pytest.raises(ParseError, match="memory.events"):
            cg.memory_events()
    (path / "memory.events").write_text("low 0\nhigh 3\nmax 0\noom 0\noom_kill 0\n")
    assert cg.memory_events() == MemoryEvents(0, 3, 0, 0, 0)
    cg.close()
    assert cg._last == {} and cg.cpu_stat() == moved and cg.cpu_stat() is cg.cpu_stat()
    def removed(fd, size, offset):  # what a kept descriptor reads once the cgroup is removed
        raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))

    monkeypatch.setattr(os, "pread", removed)
    with pytest.raises(CgroupGone):
        cg.cpu_stat()
    assert "cpu.stat" not in cg._last and not cg.keeps_open


def test_files_not_kept_open_are_parsed_only_when_their_bytes_change(tmp_path):
    path = fake_cgroup(tmp_path)
    cg = Cgroup(path)
    stat = cg.cpu_stat()
    assert cg.cpu_stat() is stat and cg._fds is None
    (path / "cpu.stat").write_text((path / "cpu.stat").read_text().replace("usage_usec 5723367", "usage_usec 1"))
    assert cg.cpu_stat() == stat._replace(usage_usec=1)


def test_only_counter_files_stay_open(tmp_path):
    """A limit file is read rarely (first sight, around a write): it holds no descriptor."""
    cg = Cgroup(fake_cgroup(tmp_path), keep_open=True)
    cg.cpu_stat(), cg.memory_current(), cg.pressure("cpu"), cg.cpu_weight(), cg.cpu_max(), cg.memory_high(), cg.io_max()
    assert set(cg._fds) == {"cpu.stat", "memory.current", "cpu.pressure"}
    cg.close()


def test_a_descriptor_budget_is_shared_and_given_back(tmp_path, monkeypatch):
    """Descriptors: the files a cgroup reads stay open while the shared budget has one left,
    the others are opened and closed at each read (and still read right); close() and a read
    that fails on a kept file give them back; a budget of 0 keeps nothing open."""
    from cgroups.cgroup import Descriptors

    budget = Descriptors(4)
    first, second = (Cgroup(fake_cgroup(tmp_path / name), keep_open=budget) for name in ("a", "b"))
    first.cpu_stat(), first.memory_current(), first.pressure("cpu")
    second.cpu_stat(), second.memory_current()
    assert (set(first._fds), set(second._fds), budget.left, budget.held) == \
        ({"cpu.stat", "memory.current", "cpu.pressure"}, {"cpu.stat"}, 0, 4)
    (second.path / "memory.current").write_text("4096\n")
    assert second.memory_current() == 4096 and "memory.current" not in second._fds and budget.left == 0
    first.close()  # retired: read on (a restore may), nothing taken from the budget again
    assert budget.left == 3 and first.memory_current() and first.cpu_stat() and budget.left == 3
    assert not first.keeps_open
    second.memory_current()
    assert "memory.current" in second._fds and budget.left == 2

    def removed(fd, size, offset):  # a kept descriptor of a removed cgroup
        raise OSError(errno.ENODEV, os.strerror(errno.ENODEV))

    monkeypatch.setattr(os, "pread", removed)
    with pytest.raises(CgroupGone):
        second.cpu_stat()
    assert budget.left == 4 and second._fds == {}  # all hers were of the removed cgroup
    monkeypatch.undo()
    second.cpu_stat()  # made again under the same name: read, and kept, anew
    assert set(second._fds) == {"cpu.stat"} and budget.left == 3
    none = Cgroup(fake_cgroup(tmp_path / "c"), keep_open=Descriptors(0))
    assert none.cpu_stat() == none.cpu_stat() and not none.keeps_open
    with pytest.raises(ValueError):
        Descriptors(-1)


@given(st.dictionaries(st.sampled_from(["anon", "file", "shmem", "file_mapped", "pgfault", "sock"]),
                       st.one_of(st.integers(0, 2**62), st.integers(2**64 - 2**10, 2**64 + 2**10)), min_size=1))
def test_selected_memory_stat_keys_match_the_full_parse(values):
    """The keys selected read as the full parse reads them; a value past 2^64 - 1 fails both."""
    from cgroups.parse import flat_keyed, flat_keyed_select

    text = "".join(f"{k} {v}\n" for k, v in values.items())
    try:
        full = flat_keyed(text)
    except ParseError as exc:
        key = exc.line.split()[0]
        assert values[key] > U64_MAX
        with pytest.raises(ParseError, match=f"{exc.line_no}: expected a whole number of at most 2"):
            flat_keyed_select(text, (key,))
        return
    assert flat_keyed_select(text, ("file", "shmem", "absent")) == {k: full[k] for k in ("file", "shmem") if k in full}
    assert flat_keyed_select(text.rstrip("\n"), ("file",)) == {k: full[k] for k in ("file",) if k in full}


@pytest.mark.parametrize("text", ["a 1 b\n2\n", "a 1 b 2\n\n", "a 1\nb\n", "a 1\nb x\n"])
def test_flat_keyed_files_need_one_key_and_one_integer_a_line(text):
    """The fast path is as strict as the line-by-line one: no pairing of words across lines."""
    from cgroups import parse
    from cgroups.errors import ParseError

    with pytest.raises(ParseError):
        parse.flat_keyed(text, "cpu.stat")
    assert parse.flat_keyed("a 1\n\nb 2\n", "cpu.stat") == {"a": 1, "b": 2}  # blank lines pass, as before
