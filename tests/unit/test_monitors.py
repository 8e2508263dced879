"""monitors: discovery, samples, rates (counters going backwards), /proc sampler, capacity."""

import os
from pathlib import Path
from collections import namedtuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cgroups import Cgroup, CgroupGone, CpuStat, IoStat, MemoryEvents
from monitors.capacity import _count_cpus, disks, host_capacity, memory_total_bytes, nics
from monitors.procfs import ProcSampler
from monitors.rates import counter_delta, counter_rate, usage_between
from monitors.model import LAST_UID, NOTHING_READ, CgroupSample
from monitors.sample import MEMORY_STAT_MAX_AGE_S, MEMORY_STAT_MOVED_BYTES, sample_cgroup
from monitors.users import DESCRIPTOR_RESERVE
from monitors.users import discover
from tests.fakecgroup import fake_cgroup


def test_discover_filters_by_uid_and_exemptions(tmp_path):
    for uid in (0, 999, 1000, 1001, 65534):
        fake_cgroup(tmp_path, f"user.slice/user-{uid}.slice")
    (tmp_path / "user.slice" / "session-1.scope").mkdir()
    (tmp_path / "user.slice" / "user-abc.slice").mkdir()
    users = discover(Cgroup(tmp_path / "user.slice"), min_uid=1000, exempt={1001})
    assert [u.uid for u in users] == [1000] and users[0].cgroup.path.name == "user-1000.slice"  # never nobody
    assert [u.uid for u in discover(Cgroup(tmp_path / "user.slice"), max_uid=65534)] == [1000, 1001]
    assert [u.uid for u in discover(Cgroup(tmp_path / "user.slice"), max_uid=1000)] == [1000]
    assert discover(Cgroup(tmp_path / "absent")) == []


def test_only_canonical_slice_names_are_users(tmp_path):
    """``user-070001.slice`` beside ``user-70001.slice`` named the same uid: sorting the two
    compared their cgroups and every tick failed with a TypeError (the cgroup audit of
    2026-11-26). Only logind's own spelling is a user: canonical ASCII decimal below 2^32."""
    from monitors.users import slice_uid

    for name in ("user-70001.slice", "user-070001.slice", "user-\u0667\u0660\u0660\u0660\u0661.slice",
                 "user-+70001.slice", "user-4294967296.slice", "user-0.slice"):
        fake_cgroup(tmp_path, f"user.slice/{name}")
    users = discover(Cgroup(tmp_path / "user.slice"), min_uid=0, max_uid=LAST_UID)
    assert [(u.uid, u.cgroup.path.name) for u in users] == [(0, "user-0.slice"), (70001, "user-70001.slice")]
    assert slice_uid("user-4294967295.slice") == 4294967295 and slice_uid("user-1000.slice\n") is None


def test_unknown_uid_is_named_by_number(tmp_path):
    fake_cgroup(tmp_path, "user.slice/user-54123.slice")
    assert discover(Cgroup(tmp_path / "user.slice"))[0].name == "uid54123"


def test_sample_reads_the_kernel_files_and_tolerates_missing_controllers(tmp_path):
    path = fake_cgroup(tmp_path, io_stat=None, io_pressure=None)
    s = sample_cgroup(Cgroup(path), clock=lambda: 12.5)
    assert s.time_s == 12.5 and s.cpu.usage_usec == 5723367
    assert s.io == {} and set(s.pressure) == {"cpu", "memory"}
    # memory.current 262144? the capture: current less (file − shmem)
    assert s.memory_used_bytes == max(0, s.memory_current_bytes - s.memory_stat["file"])
    with pytest.raises(CgroupGone):
        sample_cgroup(Cgroup(tmp_path / "gone"), clock=lambda: 0)


def test_counter_rates_never_go_backwards():
    assert counter_delta(5, 9) == 4 and counter_rate(5, 9, 2.0) == 2.0
    assert counter_delta(9, 5) is None and counter_rate(9, 5, 1.0) is None
    assert counter_rate(None, 5, 1.0) is None and counter_rate(1, 5, 0.0) is None


def _sample(t, usage, periods, throttled, rbytes, high, current=100, file=40, shmem=10):
    return CgroupSample(
        time_s=t, cpu=CpuStat(usage, usage, 0, periods, throttled, 0), memory_current_bytes=current,
        memory_stat={"file": file, "shmem": shmem}, memory_events=MemoryEvents(0, high, 0, 0, 0),
        io={"8:0": IoStat(rbytes, 0, rbytes // 4096, 0)},
    )


def test_usage_between_two_samples():
    u = usage_between(_sample(10.0, 1_000_000, 10, 0, 0, 3), _sample(12.0, 2_000_000, 30, 5, 8192, 7))
    assert u.cpu_cores == pytest.approx(0.5)
    assert (u.nr_throttled, u.throttled_fraction) == (5, 0.25)
    assert u.memory_events["high"] == 4 and u.memory_used_bytes == 70
    assert u.disks["8:0"].read_bytes_per_s == 4096 and u.disks["8:0"].read_iops == 1


def test_usage_after_a_counter_reset_has_no_rate():
    u = usage_between(_sample(10.0, 5_000_000, 100, 9, 8192, 7), _sample(11.0, 1_000, 1, 0, 0, 0))
    assert u.cpu_cores is None and u.nr_throttled is None and u.memory_events["high"] is None
    assert u.disks["8:0"].read_bytes_per_s is None


Uids = namedtuple("Uids", "real effective saved")
Times = namedtuple("Times", "user system")
Mem = namedtuple("Mem", "rss")
Io = namedtuple("Io", "read_bytes write_bytes")


def _proc(pid, uid, cpu_s, rss=100, read=0, created=0.0):
    return {"pid": pid, "uids": Uids(uid, uid, uid), "cpu_times": Times(cpu_s, 0.0), "memory_info": Mem(rss),
            "io_counters": Io(read, 0), "create_time": created}


def test_proc_sampler_uses_per_process_deltas():
    table = [[_proc(1, 1000, 10.0), _proc(2, 1000, 50.0), _proc(3, 1001, 1.0)]]
    clock = iter([0.0, 2.0]).__next__
    sampler = ProcSampler(clock, min_uid=1000, processes=lambda: table[0], wall_clock=iter([100.0, 102.0]).__next__)
    first = sampler.sample()
    assert first[1000].cpu_cores == 0 and first[1000].processes == 2
    # pid 2 (50 s of CPU) exits; pid 1 uses 1 s more; pid 4 starts after the first sample and uses 0.5 s
    table[0] = [_proc(1, 1000, 11.0, read=4096), _proc(3, 1001, 1.0), _proc(4, 1000, 0.5, created=101.0)]
    second = sampler.sample()
    assert second[1000].cpu_cores == pytest.approx((1.0 + 0.5) / 2)  # never negative despite the exit
    assert second[1000].read_bytes_per_s == pytest.approx(4096 / 2) and second[1001].cpu_cores == 0
    assert sorted(second[1000].pids) == [1, 4]


def test_capacity_from_fake_sysfs_and_procfs(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text("MemTotal:       2048 kB\nMemFree: 1 kB\n")
    for name, dev, has_device, removable, rot in (("sda", "8:0", True, "0", "1"), ("loop0", "7:0", False, "0", "0"),
                                                  ("sr0", "11:0", True, "1", "1"), ("nvme0n1", "259:0", True, "0", "0")):
        node = tmp_path / "sys" / "block" / name
        (node / "queue").mkdir(parents=True)
        (node / "dev").write_text(dev + "\n")
        (node / "removable").write_text(removable + "\n")
        (node / "queue" / "rotational").write_text(rot + "\n")
        if has_device:
            (node / "device").mkdir()
    for name, speed, has_device in (("eth0", "1000", True), ("lo", None, False), ("eth1", "-1", True)):
        node = tmp_path / "sys" / "class" / "net" / name
        node.mkdir(parents=True)
        if speed is not None:
            (node / "speed").write_text(speed + "\n")
        if has_device:
            (node / "device").mkdir()
    cap = host_capacity(None, memory_reserve_bytes=1024, sysfs=str(tmp_path / "sys"), procfs=str(tmp_path / "proc"))
    assert cap.memory_bytes == 2048 * 1024 - 1024
    assert list(cap.disks) == ["nvme0n1", "sda"] and cap.disks["sda"].rotational
    assert cap.nics["eth0"].speed_bits_per_s == 1_000_000_000 and cap.nics["eth1"].speed_bits_per_s is None
    assert "lo" not in cap.nics
    assert cap.cpu_cores == len(os.sched_getaffinity(0))


STAT = "cpu  100 0 100 10000 0 0 0 0 0 0\ncpu0 100 0 100 10000 0 0 0 0 0 0\n"
MEMINFO = "MemTotal:       16000000 kB\nMemAvailable:    8000000 kB\n"


@pytest.mark.parametrize("name, text", [
    ("meminfo", "MemTotal: 16000000 kB\nMemAvailable: 80x0000 kB\n"),  # int(): ValueError
    ("meminfo", "MemTotal: 16000000 kB\nMemAvailable:\n"),  # IndexError
    ("meminfo", "MemTotal: 16000000 kB\nMemAvailable: \u0668\u0660\u0660 kB\n"),  # int() took ٨٠٠ as 800
    ("meminfo", "MemTotal: 16000000 kB\nMemAvailable: -800 kB\n"),
    ("meminfo", "MemTotal: 16000000 kB\nMemAvailable: 800 MB\n"),
    ("stat", "cpu  100 0 1x0 10000 0 0 0 0 0 0\n"),  # ValueError
    ("stat", "cpu  \u0661 0 100 10000\n"),  # int() took ١ as 1
    ("stat", "cpu  100 0 +100 10000 0 0 0 0 0 0\n"),
    ("stat", f"cpu  100 0 {2**64} 10000 0 0 0 0 0 0\n"),
])
def test_host_files_not_the_kernels_give_none_and_never_raise(tmp_path, name, text):
    """HostReader's promise: a file that cannot be parsed gives None for its field, the other
    field read as usual. Before, garbage in /proc/stat or /proc/meminfo raised out of the
    reader, and stopped every tick; other scripts' digits were read as numbers."""
    from monitors.host import HostReader, parse_cpu_busy_usec, parse_memory_available_bytes

    (tmp_path / "stat").write_text(STAT)
    (tmp_path / "meminfo").write_text(MEMINFO)
    (tmp_path / name).write_text(text)
    parser = parse_cpu_busy_usec if name == "stat" else parse_memory_available_bytes
    assert parser(text) is None
    sample = HostReader(lambda: 7.0, str(tmp_path))()
    assert sample.time_s == 7.0
    if name == "stat":
        assert sample.cpu_busy_usec is None and sample.memory_available_bytes == 8000000 * 1024
    else:
        assert sample.memory_available_bytes is None and sample.cpu_busy_usec == parse_cpu_busy_usec(STAT) > 0


def test_host_files_as_the_kernel_writes_them_read(tmp_path):
    from monitors.host import _USEC_PER_TICK, parse_cpu_busy_usec, parse_memory_available_bytes

    assert parse_cpu_busy_usec(STAT) == round(200 * _USEC_PER_TICK)
    assert parse_cpu_busy_usec("cpu  100 0 100 10000\n") == round(200 * _USEC_PER_TICK)  # fewer fields: 0
    assert parse_cpu_busy_usec("cpu0 100 0 100 10000\n") is None  # no line of all CPUs
    assert parse_memory_available_bytes(MEMINFO) == 8000000 * 1024
    assert parse_memory_available_bytes("MemTotal: 16000000 kB\n") is None  # before 3.14


def test_cpulist_and_user_slice_quota(tmp_path):
    assert _count_cpus("0-3,8,10-11") == 7
    path = fake_cgroup(tmp_path, "user.slice", cpu_max="150000 100000")
    (path / "cpuset.cpus.effective").write_text("0-3\n")
    from monitors.capacity import cpu_cores
    assert cpu_cores(Cgroup(path)) == 1.5
    (path / "cpu.max").write_text("max 100000\n")
    assert cpu_cores(Cgroup(path)) == 4.0


def test_capacity_of_this_host_is_plausible():
    assert memory_total_bytes() > 2**30
    assert all(":" in d.device for d in disks())
    # the NICs are exactly the interfaces of this host backed by a device, with their speeds
    net = Path("/sys/class/net")
    backed = sorted(n.name for n in net.iterdir() if (n / "device").exists())
    assert [n.name for n in nics()] == backed
    for nic in nics():
        speed = (net / nic.name / "speed").read_text().strip() if nic.speed_bits_per_s else None
        assert nic.speed_bits_per_s is None or nic.speed_bits_per_s == int(speed) * 1_000_000


def test_nics_of_a_fake_sysfs(tmp_path):
    for name, speed, backed in (("eth0", "1000", True), ("eth1", "-1", True), ("lo", None, False), ("veth0", "10000", False)):
        node = tmp_path / "class" / "net" / name
        node.mkdir(parents=True)
        if backed:
            (node / "device").mkdir()
        if speed is not None:
            (node / "speed").write_text(speed + "\n")
    assert [(n.name, n.speed_bits_per_s) for n in nics(str(tmp_path))] == [("eth0", 10**9), ("eth1", None)]


def test_slice_discovery_reuses_users_and_closes_files_of_the_gone(tmp_path):
    import shutil

    from monitors.users import SliceDiscovery

    for uid in (1000, 1001):
        fake_cgroup(tmp_path, f"user.slice/user-{uid}.slice")
    discovery = SliceDiscovery(Cgroup(tmp_path / "user.slice"))
    first = discovery()
    first[0].cgroup.cpu_stat()
    assert first[0].cgroup._fds and discovery() == first and discovery()[0] is first[0]
    shutil.rmtree(tmp_path / "user.slice" / "user-1000.slice")
    assert [u.uid for u in discovery()] == [1001] and not first[0].cgroup.keeps_open
    assert discovery.descriptors.held == 0  # hers given back
    discovery.exempt = {1001}
    discovery.min_uid = 0
    assert discovery() == []


def test_sample_skips_the_details_nobody_wants(tmp_path):
    cg = Cgroup(fake_cgroup(tmp_path))
    lean = sample_cgroup(cg, lambda: 1.0, memory_detail=False, io_detail=False)
    assert lean.memory_events is None and lean.io == {} and set(lean.pressure) == {"cpu"}
    assert lean.cpu is not None and lean.memory_used_bytes is not None
    full = sample_cgroup(cg, lambda: 1.0)
    assert full.memory_events is not None and full.io and set(full.pressure) == {"cpu", "memory", "io"}


def _memory_files(path, current_bytes, file_bytes):
    (path / "memory.current").write_text(f"{current_bytes}\n")
    stat = (path / "memory.stat").read_text().splitlines()
    (path / "memory.stat").write_text("".join(f"file {file_bytes}\n" if line.startswith("file ") else f"{line}\n"
                                              for line in stat))


def test_memory_stat_is_taken_again_while_memory_current_holds(tmp_path):
    """memory.stat is read when memory.current moved by MEMORY_STAT_MOVED_BYTES or more since
    the kept reading was taken, or when that is MEMORY_STAT_MAX_AGE_S old; else the kept one
    is taken again, with its origin (issue 16)."""
    path = fake_cgroup(tmp_path)
    cg, now = Cgroup(path, keep_open=True), [10.0]
    _memory_files(path, 600 << 20, 100 << 20)
    first = sample_cgroup(cg, lambda: now[0], kept=None)
    assert first.memory_stat["file"] == 100 << 20 and first.memory_stat_origin == (10.0, 600 << 20)
    assert first.memory_used_bytes == 500 << 20

    # her page cache grew by 1 MiB less a byte, her memory.current with it: the kept stat holds
    now[0] += 1.0
    _memory_files(path, (601 << 20) - 1, (101 << 20) - 1)
    second = sample_cgroup(cg, lambda: now[0], kept=first)
    assert second.memory_stat is first.memory_stat and second.memory_stat_origin is first.memory_stat_origin
    assert second.memory_used_bytes == (501 << 20) - 1  # off by what the cache grew: under the bound
    # the movement is counted from the origin, not from the tick before: one more byte is read
    now[0] += 1.0
    _memory_files(path, 601 << 20, 101 << 20)
    third = sample_cgroup(cg, lambda: now[0], kept=second)
    assert third.memory_stat["file"] == 101 << 20 and third.memory_stat_origin == (12.0, 601 << 20)
    assert third.memory_used_bytes == 500 << 20
    # downwards as upwards (she freed, or the kernel reclaimed her cache)
    now[0] += 1.0
    _memory_files(path, 600 << 20, 100 << 20)
    assert sample_cgroup(cg, lambda: now[0], kept=third).memory_stat["file"] == 100 << 20

    # a memory.current that stands still: the stat is read again at MEMORY_STAT_MAX_AGE_S
    _memory_files(path, 600 << 20, 100 << 20)
    now[0] = 20.0
    kept = sample_cgroup(cg, lambda: now[0])
    _memory_files(path, 600 << 20, 300 << 20)  # her anonymous memory became page cache
    now[0] = 20.0 + MEMORY_STAT_MAX_AGE_S - 0.25  # exact in binary: the bound itself is tested
    assert sample_cgroup(cg, lambda: now[0], kept=kept).memory_stat is kept.memory_stat
    now[0] = 20.0 + MEMORY_STAT_MAX_AGE_S
    late = sample_cgroup(cg, lambda: now[0], kept=kept)
    assert late.memory_stat["file"] == 300 << 20 and late.memory_used_bytes == 300 << 20
    # a clock gone back: read
    now[0] = 19.0
    assert sample_cgroup(cg, lambda: now[0], kept=kept).memory_stat["file"] == 300 << 20

    # a kept sample that does not say when its stat was read (another monitor's): read
    told = sample_cgroup(cg, lambda: now[0], kept=late._replace(memory_stat_origin=None, memory_stat={"file": 1}))
    assert told.memory_stat["file"] == 300 << 20
    assert MEMORY_STAT_MOVED_BYTES == 1 << 20


def test_a_kept_memory_stat_needs_a_memory_current(tmp_path):
    """Without a memory.current now (the memory controller went off) nothing is kept: no stat
    and no origin. A kept memory.stat without the keys (an origin, an empty reading) is kept
    as any other: read again, it would say the same."""
    path = fake_cgroup(tmp_path)
    cg = Cgroup(path)
    first = sample_cgroup(cg, lambda: 1.0)
    (path / "memory.current").unlink()
    (path / "memory.stat").unlink()
    bare = sample_cgroup(cg, lambda: 2.0, kept=first)
    assert bare.memory_current_bytes is None and bare.memory_stat == {} and bare.memory_stat_origin is None
    fake_cgroup(tmp_path)  # the files back
    empty = first._replace(memory_stat=NOTHING_READ)
    assert sample_cgroup(cg, lambda: 3.0, kept=empty).memory_stat is NOTHING_READ
    assert sample_cgroup(cg, lambda: 3.0, kept=first).memory_stat is first.memory_stat


def test_memory_stat_is_not_read_while_it_holds(tmp_path):
    """What it saves: the file is not read (a counting Cgroup), and her memory.current is."""
    class Counting(Cgroup):
        __slots__ = ("reads",)

        def _read_bytes(self, name):
            self.reads.append(name)
            return super()._read_bytes(name)

    cg = Counting(fake_cgroup(tmp_path), keep_open=True)
    cg.reads = []
    first = sample_cgroup(cg, lambda: 1.0, memory_detail=False, io_detail=False)
    assert sorted(cg.reads) == ["cpu.pressure", "cpu.stat", "memory.current", "memory.stat"]
    cg.reads.clear()
    sample_cgroup(cg, lambda: 2.0, memory_detail=False, io_detail=False, kept=first)
    assert sorted(cg.reads) == ["cpu.pressure", "cpu.stat", "memory.current"]


@pytest.mark.parametrize("memory_high, reclaimed, read_at", [
    ("max", False, [1.0, 1.0, 1.0, 1.0, 1.0, 6.0, 6.0]),
    ("max", True, [1.0, 1.0, 1.0, 1.0, 1.0, 6.0, 6.0]),  # no memory.high: her events are not read
    ("67108864", False, [1.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0]),
    ("67108864", True, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]),
])
def test_the_loop_keeps_memory_stat_while_it_holds(tmp_path, memory_high, reclaimed, read_at):
    """The governor hands each user's last sample to the monitor: over a fake cgroupfs where
    she computes and her memory does not move, memory.stat is read at first sight and again
    when it is too old. At a memory.high (an admin's, then the governor's below it from the
    second tick) the kernel reclaims her page cache for her growth with memory.current standing
    still: memory.stat is read every tick until her memory.events are read with it (the third
    tick), then again only when they move (``reclaimed``: her ``high`` count rises each tick)."""
    from governor.config.policy import Policy
    from governor.control.loop import Governor
    from governor.control.model import Capacity
    from governor.enforce import DryRunBackend
    from monitors.cgroupmonitor import CgroupMonitor

    path = fake_cgroup(tmp_path, "user.slice/user-1000.slice", memory_high=memory_high)
    now = [0.0]
    monitor = CgroupMonitor(Cgroup(tmp_path / "user.slice"), lambda: now[0], min_uid=1000)
    loop = Governor(Policy().loop_settings(), Capacity(2.0, 4 * 2**30), monitor, DryRunBackend(), lambda: now[0],
                    lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0})
    origins = []
    try:
        for tick in range(7):
            now[0] += 1.0
            usec = (tick + 1) * 500_000
            (path / "cpu.stat").write_text(f"usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0\n")
            if reclaimed:
                (path / "memory.events").write_text(f"low 0\nhigh {tick}\nmax 0\noom 0\noom_kill 0\n")
            loop.tick()
            origins.append(loop.state[1000].sample.memory_stat_origin.time_s)
    finally:
        monitor.close()
    assert origins == read_at


def test_any_number_of_users_fits_in_the_descriptor_limit(tmp_path):
    """The audit: each user kept 10–14 files open and user #73 hit EMFILE at a soft limit of
    1,024. Beyond the budget, users' files are opened per read and closed again. Her limits are
    read through the same cgroup (six more files): a budget of ten files a user ran out at 76."""
    import subprocess
    import sys

    top = tmp_path / "user.slice"
    for uid in range(2000, 2300):  # 300 users, as in the audit
        fake_cgroup(tmp_path, f"user.slice/user-{uid}.slice")
    code = f"""
import resource, time
resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from cgroups import Cgroup
from monitors.cgroupmonitor import CgroupMonitor
monitor = CgroupMonitor(Cgroup({str(top)!r}), time.monotonic, min_uid=1000)
from governor.enforce.cgroupfs import read_limit_set
for _ in range(3):
    users = monitor.users()
    for user in users:
        monitor.sample(user)
        read_limit_set(user.cgroup)
import os
budget = monitor.discovery.descriptors
print(len(users), len(os.listdir("/proc/self/fd")), budget.total, budget.held)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    users, fds, budget, held = map(int, out.stdout.split())
    assert users == 300 and budget == 1024 - DESCRIPTOR_RESERVE and held == budget and fds < 1024


def test_the_daemon_loop_stays_within_the_descriptor_limit(tmp_path):
    """The budget counts every file a governed user keeps open, her limit files too: the loop
    reads her originals (cpu.max, cpu.weight, memory.low/high/max, io.max) through the same
    kept-open cgroup as her counters — 12 files a user here, not 10 — and 10,000 users at a
    soft limit of 20,000 ran out of descriptors (issue 16's 10,000-user run)."""
    import subprocess
    import sys

    top = tmp_path / "user.slice"
    for uid in range(2000, 2300):
        fake_cgroup(tmp_path, f"user.slice/user-{uid}.slice")
    code = f"""
import os, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (2048, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from cgroups import Cgroup
from governor.config.policy import Policy
from governor.control.loop import Governor
from governor.control.model import Capacity
from governor.enforce import DryRunBackend
from monitors.cgroupmonitor import CgroupMonitor
clock = [0.0]
monitor = CgroupMonitor(Cgroup({str(top)!r}), lambda: clock[0], min_uid=1000)
gov = Governor(Policy().loop_settings(), Capacity(64.0, 256 * 2**30), monitor, DryRunBackend(), lambda: clock[0],
               lambda u: {{"cpu": 1.0, "memory": 1.0, "io": 1.0}})
for _ in range(3):
    clock[0] += 1.0
    report = gov.tick()
errors = sorted({{r.error for r in report.users.values() if r.error}})
print(len(report.users), len(os.listdir("/proc/self/fd")), errors)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr
    users, fds, errors = out.stdout.split(maxsplit=2)
    assert int(users) == 300 and errors.strip() == "[]" and int(fds) < 2048 - 128


@given(some=st.integers(0, 2**40), full=st.one_of(st.none(), st.integers(0, 2**40)),
       events=st.tuples(*[st.integers(0, 2**31)] * 6), dt=st.sampled_from([-1.0, 0.0, 0.5, 1.0]))
def test_a_reading_kept_at_both_ends_gives_the_usage_equal_copies_give(some, full, events, dt):
    """A counter file whose bytes did not change is the same object at both ends
    (cgroups.Cgroup._counter); usage_between's shortcut for it changes no figure."""
    from cgroups.limits import PressureTotals

    psi, ev = PressureTotals(some, full), MemoryEvents(*events)
    prev = CgroupSample(10.0, None, None, memory_events=ev, pressure={"cpu": psi, "memory": psi})
    same = prev._replace(time_s=10.0 + dt)
    copies = same._replace(memory_events=MemoryEvents(*events),
                           pressure={c: PressureTotals(some, full) for c in ("cpu", "memory")})
    assert usage_between(prev, same) == usage_between(prev, copies)
