"""The cgroup v1 file layer on files a real 6.18 kernel wrote (tests/fixtures/linux-6.18-v1)."""

import pytest

from cgroups.errors import CgroupGone, ControllerMissing, ParseError, WriteRefused
from cgroups.limits import InvalidLimit
from cgroups_v1.cgroup import V1Cgroup
from cgroups_v1.mounts import NotCgroupV1, controller_homes, find_v1
from cgroups_v1.slice import V1Slice
from cgroups_v1.values import MEMORY_UNLIMITED_BYTES, BlkioPair, OomControl, V1CpuStat
from tests.fakecgroup import FIXTURES, fake_v1_tree

HYBRID = (FIXTURES / "mountinfo" / "hybrid.txt").read_text()
UNIFIED = (FIXTURES / "mountinfo" / "unified.txt").read_text()


@pytest.fixture
def mounts(tmp_path):
    return fake_v1_tree(tmp_path)


@pytest.fixture
def sl(mounts):
    return V1Slice(mounts, "user.slice/user-1000.slice")


def test_readers_give_the_kernel_values_typed(sl):
    cpu, acct, mem, blkio = sl.in_("cpu"), sl.in_("cpuacct"), sl.in_("memory"), sl.in_("blkio")
    assert cpu.cpu_cfs_quota_us() is None  # -1
    assert cpu.cpu_cfs_period_us() == 100000 and cpu.cpu_shares() == 1024
    assert cpu.cpu_stat() == V1CpuStat(nr_periods=7, nr_throttled=4, throttled_time=0)
    assert acct.cpuacct_usage() == 513456461
    assert acct.cpuacct_stat_usec()[1] == 0 and acct.cpuacct_stat_usec()[0] > 0
    assert mem.memory_usage_in_bytes() == 266240
    assert mem.memory_limit_in_bytes() is None and mem.memory_soft_limit_in_bytes() is None  # 9223372036854771712
    assert mem.memory_failcnt() == 0
    assert mem.memory_oom_control() == OomControl(0, 0, 0)
    assert mem.memory_stat(("total_cache", "total_shmem")) == {"total_cache": 36864, "total_shmem": 0}
    assert blkio.blkio_throttle_io_service_bytes() == {"254:0": BlkioPair(read=2240512, write=2097152)}
    assert blkio.blkio_throttle_io_serviced() == {"254:0": BlkioPair(read=67, write=32)}
    assert blkio.blkio_throttle("rbps") == {"254:0": 10485760}
    assert blkio.blkio_throttle("wiops") == {"254:0": 1000} and blkio.blkio_throttle("riops") == {}


def test_unlimited_is_the_page_counter_maximum():
    assert MEMORY_UNLIMITED_BYTES == int((FIXTURES / "linux-6.18-v1/memory/memory.limit_in_bytes").read_text())


def test_writers_write_the_kernel_format(sl):
    cpu, mem, blkio = sl.in_("cpu"), sl.in_("memory"), sl.in_("blkio")
    cpu.set_cpu_cfs(50000, 200000)
    assert (cpu.path / "cpu.cfs_quota_us").read_text() == "50000"
    assert (cpu.path / "cpu.cfs_period_us").read_text() == "200000"
    cpu.set_cpu_cfs(None, 200000)
    assert (cpu.path / "cpu.cfs_quota_us").read_text() == "-1"
    cpu.set_cpu_shares(2048)
    mem.set_memory_limit_in_bytes(None)
    assert (mem.path / "memory.limit_in_bytes").read_text() == "-1"
    mem.set_memory_soft_limit_in_bytes(64 << 20)
    assert mem.memory_soft_limit_in_bytes() == 64 << 20
    blkio.set_blkio_throttle("rbps", "254:0", None)
    assert (blkio.path / "blkio.throttle.read_bps_device").read_text() == "254:0 0"  # 0 removes the rule


@pytest.mark.parametrize("write, match", [
    (lambda c: c.set_cpu_cfs(999, 100000), "cpu.cfs_quota_us 999"),
    (lambda c: c.set_cpu_cfs(50000, 2_000_000), "cpu.cfs_period_us"),
    (lambda c: c.set_cpu_shares(1), "cpu.shares 1"),
    (lambda c: c.set_cpu_shares(262145), "cpu.shares"),
    (lambda c: c.set_memory_limit_in_bytes(-5), "memory.limit_in_bytes -5"),
    (lambda c: c.set_blkio_throttle("wbps", "sda", 5), "device 'sda'"),
    (lambda c: c.set_blkio_throttle("wbps", "8:0", 0), "expected a whole number ≥ 1"),
])
def test_values_the_kernel_would_refuse_or_clamp_are_refused_before_writing(sl, write, match):
    cg = V1Cgroup(sl.in_("cpu").path)
    with pytest.raises(InvalidLimit, match=match):
        write(cg)


def test_errors_name_the_file(sl, tmp_path):
    cpu = sl.in_("cpu")
    (cpu.path / "cpu.shares").write_text("lots\n")
    with pytest.raises(ParseError, match=r"cpu.shares:1: expected a whole number \(digits 0-9\), got 'lots'"):
        cpu.cpu_shares()
    (cpu.path / "cpu.stat").write_text("nr_periods 1\n")
    with pytest.raises(ParseError, match="expected a nr_throttled line"):
        cpu.cpu_stat()
    with pytest.raises(ControllerMissing):
        cpu.memory_failcnt()  # no memory file in the cpu hierarchy
    gone = V1Cgroup(tmp_path / "cpu" / "nope")
    with pytest.raises(CgroupGone):
        gone.cpu_shares()
    with pytest.raises(CgroupGone):
        gone.set_cpu_shares(100)


def test_a_write_the_kernel_refuses_is_write_refused(sl):
    cpu = sl.in_("cpu")
    (cpu.path / "cpu.shares").chmod(0o444)
    import os
    if os.geteuid() == 0:  # root writes read-only files: use a directory in its place instead
        (cpu.path / "cpu.shares").unlink()
        (cpu.path / "cpu.shares").mkdir()
    with pytest.raises(WriteRefused, match="cpu.shares"):
        cpu.set_cpu_shares(100)


def test_slice_spans_the_hierarchies_and_is_found_from_any_of_its_paths(mounts, sl):
    assert sl.path == mounts["cpu"] / "user.slice/user-1000.slice"
    again = V1Slice.from_path(mounts, mounts["memory"] / "user.slice/user-1000.slice")
    assert again == sl and again.in_("blkio").path == mounts["blkio"] / "user.slice/user-1000.slice"
    with pytest.raises(ValueError, match="not under any cgroup v1 hierarchy"):
        V1Slice.from_path(mounts, "/elsewhere/user.slice/user-1000.slice")
    with pytest.raises(ValueError):
        V1Slice(mounts, "../user.slice")


def test_a_missing_hierarchy_directory_is_a_missing_controller_until_the_slice_is_gone(mounts, sl):
    import shutil
    shutil.rmtree(mounts["blkio"] / "user.slice")
    with pytest.raises(ControllerMissing):
        sl.in_("blkio")
    shutil.rmtree(mounts["cpu"] / "user.slice")
    with pytest.raises(CgroupGone):
        sl.in_("blkio")  # no longer in the cpu hierarchy either: the slice is gone


def test_mounts_per_controller_on_a_hybrid_host():
    mounts = find_v1(HYBRID, check_magic=False)
    assert {c: str(p) for c, p in mounts.points.items()} == {
        "cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct", "memory": "/sys/fs/cgroup/memory",
        "blkio": "/sys/fs/cgroup/blkio"}
    with pytest.raises(NotCgroupV1, match="no cgroup v1 hierarchy for cpu, cpuacct, memory"):
        find_v1(UNIFIED, check_magic=False)


def test_controller_homes_say_where_each_controller_lives():
    assert controller_homes(HYBRID.replace("/sys/fs/cgroup/unified", "/nonexistent/unified")) == {
        "cpu": "v1", "memory": "v1", "io": "v1"}
    joint = "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    homes = controller_homes(joint)
    assert homes == {"cpu": "v1", "memory": "none", "io": "none"}
    assert find_v1(joint + "35 31 0:32 / /m rw - cgroup cgroup rw,memory\n", check_magic=False).points["cpuacct"] \
        .name == "cpu,cpuacct"


def test_a_host_without_memory_on_v1_or_v2_is_proc_only_and_says_why():
    from governor.service.cgroupkind import choose

    kind = choose("32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n")
    assert kind.kind == "proc" and kind.homes == {"cpu": "v1", "memory": "none", "io": "none"}
    assert "no usable cgroup interface" in kind.reason and "dry run only" in kind.reason


# -- single-integer files: read by v2's rules (cgroups.parse), not Python's int() ------------------

#: Each single-integer file: its hierarchy and its reader.
V1_NUMBER_FILES = {
    "cpu.cfs_quota_us": ("cpu", V1Cgroup.cpu_cfs_quota_us),
    "cpu.cfs_period_us": ("cpu", V1Cgroup.cpu_cfs_period_us),
    "cpu.shares": ("cpu", V1Cgroup.cpu_shares),
    "cpuacct.usage": ("cpuacct", V1Cgroup.cpuacct_usage),
    "memory.usage_in_bytes": ("memory", V1Cgroup.memory_usage_in_bytes),
    "memory.limit_in_bytes": ("memory", V1Cgroup.memory_limit_in_bytes),
    "memory.soft_limit_in_bytes": ("memory", V1Cgroup.memory_soft_limit_in_bytes),
    "memory.failcnt": ("memory", V1Cgroup.memory_failcnt),
}
#: What int() takes and the kernel never writes (each a value within every file's range, so
#: only the digit rule refuses it): an underscore, a sign, other scripts' digits, a negative.
LENIENT = ["20_000", "+20000", "\u0662\u0660\u0660\u0660\u0660", "\uff12\uff10\uff10\uff10\uff10", "-20000"]


def _read(sl, name: str, text: str):
    controller, reader = V1_NUMBER_FILES[name]
    cg = sl.in_(controller)
    (cg.path / name).write_text(text)
    return cg, lambda: reader(cg)


def _refused_v1(sl, name: str, text: str, expected: str):
    cg, read = _read(sl, name, text)
    with pytest.raises(ParseError) as info:
        read()
    message = str(info.value)
    assert message.startswith(f"{cg.path / name}:1: ") and expected in message, message


@pytest.mark.parametrize("name", V1_NUMBER_FILES)
@pytest.mark.parametrize("value", LENIENT)
def test_a_single_integer_file_takes_ascii_digits_alone(sl, name, value):
    """cgroupspy's IntegerFile read these with int(): 20_000, +20000, ٢٠٠٠٠ and -20000 were numbers."""
    _refused_v1(sl, name, f"{value}\n", "digits 0-9")


@pytest.mark.parametrize("name", [n for n in V1_NUMBER_FILES if n != "cpu.cfs_quota_us" and "limit" not in n])
def test_minus_one_is_unlimited_only_where_it_means_it(sl, name):
    """cgroupspy turned -1 into None in every file: a period, a weight or a counter of None."""
    _refused_v1(sl, name, "-1\n", "digits 0-9")


@pytest.mark.parametrize("name, text", [
    ("cpu.cfs_period_us", "0\n"), ("cpu.cfs_period_us", "999\n"), ("cpu.cfs_period_us", "1000001\n"),
    ("cpu.cfs_quota_us", "0\n"), ("cpu.cfs_quota_us", "999\n"), ("cpu.cfs_quota_us", f"{2**63}\n"),
    ("cpu.shares", "1\n"), ("cpu.shares", "262145\n"),
])
def test_a_value_the_kernel_would_not_hold_is_garbage(sl, name, text):
    """The writer's rule (cgroups_v1.values), applied to what is read: sched-bwc.rst (1 ms ≤
    period ≤ 1 s, quota ≥ 1 ms, a signed 64-bit number), MIN_SHARES/MAX_SHARES."""
    _refused_v1(sl, name, text, name)


@pytest.mark.parametrize("name, text, value", [
    ("cpu.cfs_quota_us", "-1\n", None),
    ("cpu.cfs_quota_us", "1000\n", 1000),
    ("cpu.cfs_quota_us", "150000", 150000),
    ("cpu.cfs_period_us", "1000\n", 1000),
    ("cpu.cfs_period_us", " 1000000 \n", 1000000),  # blanks around a number are the kernel's, as in v2
    ("cpu.shares", "2\n", 2),
    ("cpu.shares", "262144\n", 262144),
    ("cpuacct.usage", f"{2**64 - 1}\n", 2**64 - 1),  # a u64 counter: no 2^63 bound
    ("memory.failcnt", "0\n", 0),
    ("memory.limit_in_bytes", f"{MEMORY_UNLIMITED_BYTES}\n", None),  # since 3.19: PAGE_COUNTER_MAX pages
    ("memory.limit_in_bytes", f"{2**63 - 1}\n", None),  # 3.10
    ("memory.limit_in_bytes", f"{2**64 - 1}\n", None),  # reported on 3.x (performancecopilot/pcp#85)
    ("memory.limit_in_bytes", "-1\n", None),  # what was written, read back from a plain file
    ("memory.limit_in_bytes", f"{512 << 20}\n", 512 << 20),
    ("memory.soft_limit_in_bytes", f"{MEMORY_UNLIMITED_BYTES}\n", None),
    ("memory.soft_limit_in_bytes", "-1\n", None),
    ("memory.soft_limit_in_bytes", "0\n", 0),
])
def test_the_kernels_values_read_as_before(sl, name, text, value):
    assert _read(sl, name, text)[1]() == value


@pytest.mark.parametrize("period", ["0\n", "-1\n", "+100000\n", "lots\n"])
def test_a_period_of_0_or_garbage_bounds_no_cpu_capacity(sl, period):
    """A period of 0 was a ZeroDivisionError out of host setup (only CgroupError is caught);
    -1 a TypeError (None); +100000 a bound. Now each is a ParseError, and the capacity that
    of the CPUs alone — as v2's cpu.max with a period of 0 (test_parse_strict)."""
    import os

    from monitors.capacity import cpu_cores_v1

    cpu = sl.in_("cpu")
    (cpu.path / "cpu.cfs_quota_us").write_text("50000\n")
    (cpu.path / "cpu.cfs_period_us").write_text(period)
    assert cpu_cores_v1(cpu) == float(len(os.sched_getaffinity(0)))
    (cpu.path / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_cores_v1(cpu) == 0.5
    (cpu.path / "cpu.cfs_quota_us").write_text("9" * 400 + "\n")  # was an OverflowError (int / int past a float)
    assert cpu_cores_v1(cpu) == float(len(os.sched_getaffinity(0)))


def test_a_period_that_reads_as_garbage_is_written_over(sl):
    cpu = sl.in_("cpu")
    (cpu.path / "cpu.cfs_period_us").write_text("0\n")
    cpu.set_cpu_cfs(50000, 100000)
    assert cpu.cpu_cfs_period_us() == 100000 and cpu.cpu_cfs_quota_us() == 50000
