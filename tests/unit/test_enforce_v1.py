"""The cgroup v1 backend: the conformance suite on a fake v1 tree of real kernel files, the v2→v1
mapping, exact restore, the never-OOM rule through it, and the v1 monitor's samples."""

import pytest

from cgroups.limits import CpuMax, IoMax
from cgroups_v1.slice import V1Slice
from governor.enforce import make_backend
from governor.enforce.apply import apply_limit_set, restore_originals
from governor.enforce.cgroupfs_v1 import CgroupfsV1Backend
from governor.enforce.dryrun import DryRunBackend
from governor.enforce.model import MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, EnforceError, LimitSet, Target, TargetGone
from governor.enforce.v1map import cpu_weight_from_shares, shares_for_cpu_weight
from monitors.cgroupv1monitor import CgroupV1Monitor
from monitors.rates import usage_between
from tests.backend_conformance import check_dry_run, check_gone, check_writes
from tests.fakecgroup import fake_v1_tree
from tests.v1fixtures import mounts, target  # noqa: F401 (fixtures)

MiB = 2**20


def files(mounts):
    """Every file of the slice in every hierarchy, as text."""
    return {str(p.relative_to(mounts["cpu"].parent)): p.read_text()
            for point in mounts.points.values() for p in sorted((point / "user.slice/user-1000.slice").iterdir())}


def test_conformance_on_a_fake_v1_tree(mounts, target):
    check_writes(CgroupfsV1Backend(mounts), target, "254:0", lacks=(MEMORY_HIGH,))
    check_gone(CgroupfsV1Backend(mounts), Target(4242, V1Slice(mounts, "user.slice/user-4242.slice")))


def test_dry_run_reads_v1_files_through_the_v1_backend(mounts, target):
    check_dry_run(DryRunBackend(reader=CgroupfsV1Backend(mounts)), target, "254:0")


def test_reads_map_v1_files_to_the_planners_knobs(mounts, target):
    limits = CgroupfsV1Backend(mounts).read(target)
    assert limits == LimitSet(CpuMax(None, 100000), 100, 0, None, None,
                              {"254:0": IoMax(rbps=10485760, wbps=20971520, riops=None, wiops=1000)})


def test_writes_land_in_the_v1_files(mounts, target):
    backend = CgroupfsV1Backend(mounts)
    backend.read(target)
    backend.set_cpu_max(target, CpuMax(150000, 100000))
    backend.set_cpu_weight(target, 200)
    backend.set_memory(target, MEMORY_MAX, 512 * MiB)
    backend.set_memory(target, MEMORY_LOW, 64 * MiB)
    backend.set_memory(target, MEMORY_HIGH, 256 * MiB)  # no such file in v1: nothing written
    backend.set_io_max(target, "254:0", IoMax(rbps=MiB))
    f = files(mounts)
    assert f["cpu/user.slice/user-1000.slice/cpu.cfs_quota_us"] == "150000"
    assert f["cpu/user.slice/user-1000.slice/cpu.shares"] == "2048"
    assert f["memory/user.slice/user-1000.slice/memory.limit_in_bytes"] == str(512 * MiB)
    assert f["memory/user.slice/user-1000.slice/memory.soft_limit_in_bytes"] == str(64 * MiB)
    assert f["blkio/user.slice/user-1000.slice/blkio.throttle.read_bps_device"] == f"254:0 {MiB}"
    assert f["blkio/user.slice/user-1000.slice/blkio.throttle.write_bps_device"] == "254:0 0"  # rule removed
    assert not any("memory.high" in name for name in f)


def test_weight_and_shares_line_up_and_round_trip():
    assert shares_for_cpu_weight(100) == 1024 and cpu_weight_from_shares(1024) == 100
    assert shares_for_cpu_weight(10000) == 102400 and shares_for_cpu_weight(1) == 10
    assert all(cpu_weight_from_shares(shares_for_cpu_weight(w)) == w for w in range(1, 10001))
    assert cpu_weight_from_shares(2) == 1 and cpu_weight_from_shares(262144) == 10000


def test_restore_puts_an_admins_odd_shares_and_soft_limit_back_exactly(mounts, target):
    cpu = mounts["cpu"] / "user.slice/user-1000.slice"
    mem = mounts["memory"] / "user.slice/user-1000.slice"
    (cpu / "cpu.shares").write_text("1000\n")  # weight 97.66: not a whole weight
    (mem / "memory.soft_limit_in_bytes").write_text("0\n")  # reads as memory.low 0, like unlimited
    before = files(mounts)
    backend = CgroupfsV1Backend(mounts)
    original = backend.read(target)
    backend.set_cpu_weight(target, 300)
    backend.set_memory(target, MEMORY_LOW, 32 * MiB)
    backend.set_cpu_max(target, CpuMax(50000))
    backend.set_io_max(target, "254:0", IoMax(wbps=MiB))
    assert files(mounts) != before
    restored, failed = restore_originals(backend, {1000: (target, original)})
    assert (restored, failed) == (["user-1000.slice"], {})
    after = files(mounts)
    norm = lambda d: {k: v.strip().replace("-1", "x") for k, v in d.items()}  # noqa: E731 - unlimited: -1 written
    assert after["cpu/user.slice/user-1000.slice/cpu.shares"] == "1000"
    assert after["memory/user.slice/user-1000.slice/memory.soft_limit_in_bytes"] == "0"
    assert norm(after).keys() == norm(before).keys()


def test_a_slice_made_again_has_its_own_first_reading(mounts, target):
    """A logout and a login remove the slice and make it again: its first reading is its own.
    The old slice's raw cpu.shares were "restored exactly" onto the new one, whose admin had
    set others (the cgroup audit of 2026-11-26)."""
    import shutil

    cpu = mounts["cpu"] / "user.slice/user-1000.slice"
    (cpu / "cpu.shares").write_text("1000\n")
    backend = CgroupfsV1Backend(mounts)
    backend.read(target)
    saved = {p.name: p.read_text() for p in cpu.iterdir()}
    moved = cpu.with_name("old")
    cpu.rename(moved)  # the old directory keeps its inode number: the new one gets another
    cpu.mkdir()
    for name, text in saved.items():
        (cpu / name).write_text(text)
    (cpu / "cpu.shares").write_text("3001\n")  # her admin's, on the new slice (weight 293.07)
    original = backend.read(target)
    backend.set_cpu_weight(target, 300)
    assert restore_originals(backend, {1000: (target, original)}) == (["user-1000.slice"], {})
    assert (cpu / "cpu.shares").read_text().strip() == "3001"
    shutil.rmtree(moved)


def test_restore_never_writes_the_limit_below_what_the_kernel_holds(mounts, target):
    """The v2 backend's memory.max rule (apply_limit_set), reused: usage 266240 B + margin."""
    backend = CgroupfsV1Backend(mounts)
    original = backend.read(target)
    low_original = LimitSet(original.cpu_max, original.cpu_weight, 0, None, 4096, {})
    note = apply_limit_set(backend, target, low_original, margin_bytes=MiB)
    limit = int((mounts["memory"] / "user.slice/user-1000.slice/memory.limit_in_bytes").read_text())
    assert limit >= 266240 + MiB and note and "below what the kernel holds" in note


def test_refusals_name_the_unit(mounts, target):
    backend = CgroupfsV1Backend(mounts)
    with pytest.raises(EnforceError, match="user-1000.slice: cpu.max quota 10 µs"):
        backend.set_cpu_max(target, CpuMax(10))
    with pytest.raises(EnforceError, match="user-1000.slice: cpu.weight 0"):
        backend.set_cpu_weight(target, 0)
    outside = Target(1000, V1Slice(mounts, "user.slice/user-1000.slice"))
    outside_path = type("P", (), {"path": mounts["cpu"].parent / "elsewhere" / "user-1000.slice"})()
    with pytest.raises(EnforceError, match="not under any cgroup v1 hierarchy"):
        backend.read(Target(1000, outside_path))
    assert backend.read(outside).cpu_weight == 100


def test_a_snapshot_path_finds_the_slice_in_every_hierarchy(mounts, target):
    """Snapshots keep the slice's path (in the cpu hierarchy) and rebuild a v2 Cgroup from it."""
    from cgroups import Cgroup

    backend = CgroupfsV1Backend(mounts)
    again = Target(1000, Cgroup(target.cgroup.path))
    backend.set_memory(again, MEMORY_MAX, 300 * MiB)
    assert backend.read(target).memory_max == 300 * MiB
    with pytest.raises(TargetGone):
        backend.read(Target(7, Cgroup(mounts["cpu"] / "user.slice/user-7.slice")))


def test_make_backend_builds_the_v1_backend_a_snapshot_names():
    backend, why = make_backend("cgroupfs-v1")
    assert backend.name == "cgroupfs-v1" and "v1" in why


def test_monitor_discovers_slices_and_samples_v1_counters_in_v2_units(tmp_path):
    mounts = fake_v1_tree(tmp_path, "sub/user.slice/user-1000.slice")
    fake_v1_tree(tmp_path, "sub/user.slice/user-7.slice")
    (mounts["cpu"] / "sub/user.slice/not-a-user").mkdir()
    now = [10.0]
    monitor = CgroupV1Monitor(mounts, lambda: now[0], min_uid=1000, parent="sub")
    users = monitor.users()
    assert [u.uid for u in users] == [1000]
    first = monitor.sample(users[0])
    assert first.cpu.usage_usec == 513456 and first.cpu.throttled_usec == 0 and first.cpu.nr_throttled == 4
    assert first.memory_current_bytes == 266240 and first.memory_stat == {"file": 36864, "shmem": 0}
    assert first.memory_events.max == 0 and first.memory_events.oom_kill == 0
    assert first.io["254:0"].rbytes == 2240512 and first.io["254:0"].wios == 32
    assert first.pressure == {}  # v1: no per-cgroup PSI
    acct = mounts["cpuacct"] / "sub/user.slice/user-1000.slice/cpuacct.usage"
    acct.write_text(str(513456461 + 1_500_000_000))
    now[0] = 12.0
    usage = usage_between(first, monitor.sample(users[0]))
    assert usage.cpu_cores == pytest.approx(0.75)


def test_user_slices_quota_bounds_the_cpu_capacity_on_v1(mounts):
    import os

    from cgroups_v1.cgroup import V1Cgroup
    from monitors.capacity import cpu_cores_v1

    user_slice = V1Cgroup(mounts["cpu"] / "user.slice")
    assert cpu_cores_v1(user_slice) == len(os.sched_getaffinity(0))  # no files there: nothing bounds it
    (user_slice.path / "cpu.cfs_quota_us").write_text("50000\n")
    (user_slice.path / "cpu.cfs_period_us").write_text("100000\n")
    assert cpu_cores_v1(user_slice) == 0.5
