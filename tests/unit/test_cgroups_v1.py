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
    with pytest.raises(ParseError, match="cpu.shares:1: expected one integer: 'lots'"):
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
