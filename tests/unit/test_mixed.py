"""A mixed host (cpu on a cgroup v1 hierarchy, memory and maybe io in cgroup v2): ``choose()`` on
mountinfo text of such hosts, the mixed sampler and monitor, and the mixed backend — the
conformance suite, each knob in its own interface's file, the never-OOM rule through v2's
memory.current, exact restore — over fake trees of files real kernels wrote."""

from pathlib import Path

import pytest

import cgroups.mount
import cgroups_v1.mounts
from cgroups import Cgroup, CgroupGone
from cgroups.limits import CpuMax, IoMax
from cgroups_v1.mixed import MixedLayout, MixedSlice, NotMixed, find_mixed
from cgroups_v1.mounts import V1Mounts
from governor.config.policy import Policy
from governor.enforce import make_backend
from governor.enforce.apply import apply_limit_set, restore_originals
from governor.enforce.dryrun import DryRunBackend
from governor.enforce.mixed import CgroupfsMixedBackend
from governor.enforce.model import KERNEL_DEFAULTS, MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, EnforceError, LimitSet, Target
from governor.service.cgroupkind import choose
from monitors.mixed import MixedMonitor, sample_mixed
from tests.backend_conformance import check_dry_run, check_gone, check_writes
from tests.fakecgroup import fake_mixed_tree

MiB = 2**20
SLICE = "user.slice/user-1000.slice"


# -- choose() on mountinfo of mixed hosts ------------------------------------------------------------

def mountinfo(root: Path, v1: dict[str, str], v2_controllers: str) -> str:
    """mountinfo text of a host with v1 hierarchies ``v1`` (dir name → super options) under
    ``root`` and a cgroup2 mount ``root/unified`` offering ``v2_controllers``; the dirs exist."""
    lines = []
    for n, (name, options) in enumerate(v1.items()):
        (root / name).mkdir(parents=True, exist_ok=True)
        lines.append(f"{40 + n} 31 0:{40 + n} / {root / name} rw,relatime - cgroup cgroup rw,{options}")
    (root / "unified").mkdir(parents=True, exist_ok=True)
    (root / "unified" / "cgroup.controllers").write_text(v2_controllers + "\n")
    lines.append(f"30 25 0:27 / {root / 'unified'} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate")
    return "\n".join(lines) + "\n"


@pytest.fixture
def statfs(monkeypatch, tmp_path):
    """statfs(2) of the fake mounts: cgroup2's magic for ``tmp_path/unified``, v1's elsewhere."""
    def magic(path):
        return cgroups.mount.CGROUP2_SUPER_MAGIC if Path(path) == tmp_path / "unified" else \
            cgroups.mount.CGROUP_SUPER_MAGIC
    monkeypatch.setattr(cgroups.mount, "filesystem_magic", magic)
    monkeypatch.setattr(cgroups_v1.mounts, "filesystem_magic", magic)


def test_cpu_on_v1_with_memory_and_io_in_v2_is_mixed_and_says_which_is_where(tmp_path, statfs):
    text = mountinfo(tmp_path, {"cpu,cpuacct": "cpu,cpuacct", "blkio": "blkio"}, "memory io pids")
    kind = choose(text)
    assert kind.kind == "mixed" and kind.homes == {"cpu": "v1", "memory": "v2", "io": "v2"}
    assert f"cpu on cgroup v1 ({tmp_path / 'cpu,cpuacct'})" in kind.reason
    assert f"memory and io on cgroup v2 ({tmp_path / 'unified'})" in kind.reason
    # blkio is mounted on v1 but io is offered by v2 (a controller is in one place): not in the layout
    assert set(kind.layout.v1.points) == {"cpu", "cpuacct"} and kind.mounts == kind.layout.v1


def test_io_on_blkio_beside_cpu_and_memory_in_v2(tmp_path, statfs):
    text = mountinfo(tmp_path, {"cpu": "cpu", "cpuacct": "cpuacct", "blkio": "blkio"}, "memory pids")
    kind = choose(text)
    assert kind.kind == "mixed" and kind.homes == {"cpu": "v1", "memory": "v2", "io": "v1"}
    assert "cpu and io on cgroup v1" in kind.reason and "memory on cgroup v2" in kind.reason
    assert set(kind.layout.v1.points) == {"cpu", "cpuacct", "blkio"}


def test_io_nowhere_is_said_and_not_governed(tmp_path, statfs):
    kind = choose(mountinfo(tmp_path, {"cpu,cpuacct": "cpu,cpuacct"}, "memory"))
    assert kind.kind == "mixed" and kind.layout.interface("io") == "none"
    assert "io on neither (not governed)" in kind.reason


def test_the_reverse_mix_and_a_missing_cpuacct_are_proc_and_say_why(tmp_path, statfs):
    reverse = choose(mountinfo(tmp_path, {"memory": "memory"}, "cpu io"))
    assert reverse.kind == "proc" and reverse.homes == {"cpu": "v2", "memory": "v1", "io": "v2"}
    assert "cpu is in cgroup v2 and memory on a v1 hierarchy" in reverse.reason and "not built" in reverse.reason
    no_acct = choose(mountinfo(tmp_path, {"cpu": "cpu"}, "memory io"))
    assert no_acct.kind == "proc" and "no cgroup v1 hierarchy for cpuacct" in no_acct.reason


def test_find_mixed_refuses_a_host_that_is_not_mixed(tmp_path, statfs):
    with pytest.raises(NotMixed, match="cpu on v1, memory on v1"):
        find_mixed(mountinfo(tmp_path, {"cpu,cpuacct": "cpu,cpuacct", "memory": "memory"}, ""))
    with pytest.raises(ValueError, match="needs cpu and cpuacct on cgroup v1"):
        MixedLayout({"cpu": "v2", "memory": "v2", "io": "v2"}, V1Mounts({}), tmp_path)


# -- the sampler and the monitor ---------------------------------------------------------------------

@pytest.fixture
def layout(tmp_path):
    lay = fake_mixed_tree(tmp_path)
    # values that tell the interfaces apart
    (tmp_path / "v1/cpuacct" / SLICE / "cpuacct.usage").write_text("7000000000\n")
    (tmp_path / "v1/memory" / SLICE / "memory.usage_in_bytes").write_text("111\n")
    (tmp_path / "v2" / SLICE / "memory.current").write_text(f"{300 * MiB}\n")
    (tmp_path / "v2" / SLICE / "cpu.max").write_text("12345 100000\n")
    return lay


def slice_of(layout) -> MixedSlice:
    return MixedSlice(layout, SLICE)


def test_a_sample_takes_each_controller_from_its_interface(layout, tmp_path):
    s = sample_mixed(slice_of(layout), lambda: 5.0)
    assert s.cpu.usage_usec == 7_000_000  # cpuacct.usage (ns) / 1000, from v1
    assert s.cpu.throttled_usec is not None  # v1 cpu.stat's throttled_time
    assert s.memory_current_bytes == 300 * MiB  # v2 memory.current, not v1's usage_in_bytes
    assert s.memory_events is not None and s.memory_events.high is not None  # v2's own events
    v2_io = Cgroup(tmp_path / "v2" / SLICE).io_stat()
    assert s.io == v2_io and s.io
    assert "cpu" in s.pressure and "memory" in s.pressure  # PSI from the v2 cgroup


def test_a_sample_keeps_the_v2_memory_stat_as_the_v2_sampler_does(layout, tmp_path):
    """Her memory.stat is the v2 side's: taken again from ``kept`` while memory.current holds,
    with its origin (monitors.sample.sample_cgroup), and read again when it moved."""
    first = sample_mixed(slice_of(layout), lambda: 5.0)
    assert first.memory_stat_origin == (5.0, 300 * MiB)
    (tmp_path / "v2" / SLICE / "memory.stat").write_text("anon 0\nfile 7\nshmem 0\n")
    kept = sample_mixed(slice_of(layout), lambda: 6.0, kept=first)
    assert kept.memory_stat is first.memory_stat and kept.memory_stat_origin is first.memory_stat_origin
    (tmp_path / "v2" / SLICE / "memory.current").write_text(f"{302 * MiB}\n")
    moved = sample_mixed(slice_of(layout), lambda: 7.0, kept=kept)
    assert moved.memory_stat == {"file": 7, "shmem": 0} and moved.memory_stat_origin == (7.0, 302 * MiB)


def test_io_from_blkio_when_io_is_on_v1(tmp_path):
    lay = fake_mixed_tree(tmp_path, io="v1")
    s = sample_mixed(MixedSlice(lay, SLICE), lambda: 1.0)
    blkio = MixedSlice(lay, SLICE).v1.in_("blkio").blkio_throttle_io_service_bytes()
    assert set(s.io) == set(blkio) and s.io
    assert s.memory_current_bytes == Cgroup(tmp_path / "v2" / SLICE).memory_current()


def test_without_her_v2_cgroup_she_is_sampled_on_cpu_and_gone_only_from_the_cpu_hierarchy(layout, tmp_path):
    import shutil

    shutil.rmtree(tmp_path / "v2" / SLICE)
    s = sample_mixed(slice_of(layout), lambda: 1.0)
    assert s.cpu.usage_usec == 7_000_000 and s.memory_current_bytes is None and s.io == {}
    for hierarchy in ("cpu", "cpuacct"):
        shutil.rmtree(tmp_path / "v1" / hierarchy / SLICE)
    with pytest.raises(CgroupGone):
        sample_mixed(slice_of(layout), lambda: 1.0)


def test_the_monitor_finds_users_in_the_cpu_hierarchy_and_keeps_their_slices(tmp_path):
    lay = fake_mixed_tree(tmp_path, uid=1000, parent="site")
    fake_mixed_tree(tmp_path, uid=1001, parent="site")
    fake_mixed_tree(tmp_path, uid=1002, parent="site")
    (tmp_path / "v2/user.slice/user-1002.slice/memory.current").write_text("4096\n")
    monitor = MixedMonitor(lay, lambda: 1.0, min_uid=1000, exempt={1001}, parent="site", descriptors=1)
    users = monitor.users()
    assert [u.uid for u in users] == [1000, 1002]
    assert users[0].cgroup.path == tmp_path / "v1/cpu/site/user.slice/user-1000.slice"
    assert users[1].cgroup.v2.path == tmp_path / "v2/user.slice/user-1002.slice"  # the v2 side has no parent
    assert monitor.sample(users[1]).memory_current_bytes == 4096
    assert [u.cgroup.keeps_open for u in users] == [False, True]  # a budget of one descriptor: the first read's
    assert monitor.users()[0] is users[0]  # kept between ticks
    monitor.exempt = set()
    assert [u.uid for u in monitor.users()] == [1000, 1001, 1002]
    monitor.close()


def test_the_v1_side_never_governs_nobody_and_governs_dynamic_users_only_up_to_max_uid(tmp_path):
    """uid 65534 (nobody) with slices of its own is never a user; 61184 (a systemd
    DynamicUser=) is one unless max_uid (60000: local regular users end there) leaves it out."""
    lay = fake_mixed_tree(tmp_path, uid=1000)
    for uid in (61184, 65534):
        fake_mixed_tree(tmp_path, uid=uid)
    assert [u.uid for u in MixedMonitor(lay, lambda: 1.0, descriptors=0).users()] == [1000, 61184]
    assert [u.uid for u in MixedMonitor(lay, lambda: 1.0, descriptors=0, max_uid=60000).users()] == [1000]


def test_a_user_is_governed_only_once_her_v2_cgroup_has_memory_and_her_admins_limit_is_then_a_ceiling(tmp_path):
    """Her originals are read at first sight: a v2 cgroup that appeared later, with an admin's
    memory.max, would have been lifted and never put back (review of issue 18)."""
    import shutil

    from governor.control.loop import Governor
    from governor.control.model import Capacity

    lay = fake_mixed_tree(tmp_path, uid=1000)
    v2 = tmp_path / "v2" / SLICE
    moved = tmp_path / "later"
    shutil.move(v2, moved)  # her v1 side only, as before logind (or the admin) made the v2 one
    monitor = MixedMonitor(lay, lambda: 1.0, min_uid=1000)
    assert monitor.users() == []
    v2.mkdir(parents=True)
    (v2 / "cgroup.procs").write_text("")  # a v2 cgroup without the memory controller: not yet
    assert monitor.users() == []
    shutil.rmtree(v2)
    shutil.move(moved, v2)
    (v2 / "memory.max").write_text(f"{1024 * MiB}\n")  # the admin's own limit
    users = monitor.users()
    assert [u.uid for u in users] == [1000]
    backend = CgroupfsMixedBackend(lay)
    governor = Governor(Policy().loop_settings(), Capacity(2.0, 8 * 1024 * MiB), monitor, backend, lambda: 1.0,
                        lambda u: {})
    assert governor._original(users[0]).memory_max == 1024 * MiB  # read as her ceiling at first sight


def test_restore_of_a_user_whose_v2_cgroup_went_puts_the_cpu_side_back_and_fails_nothing(layout, target, tmp_path):
    """Defaults written where her v2 cgroup (or its memory controller) is gone are nothing to
    put back; a stop would otherwise fail, and keep failing at every start (review of issue 18)."""
    import shutil

    backend = CgroupfsMixedBackend(layout)
    original = backend.read(target)
    assert original.memory_max is None and original.memory_low == 0
    apply_limit_set(backend, target, LimitSet(CpuMax(30000), 300, 0, None, None, {}), margin_bytes=64 * MiB)
    shutil.rmtree(tmp_path / "v2" / SLICE)
    restored, failed = restore_originals(backend, {1000: (target, original)}, 64 * MiB)
    assert failed == {} and restored
    assert (tmp_path / "v1/cpu" / SLICE / "cpu.cfs_quota_us").read_text().strip() == "-1"


# -- the backend -------------------------------------------------------------------------------------

@pytest.fixture
def target(layout):
    return Target(1000, slice_of(layout))


def test_conformance_on_a_fake_mixed_tree(layout, target):
    check_writes(CgroupfsMixedBackend(layout), target, "254:0")  # memory.high too: it is v2's
    check_gone(CgroupfsMixedBackend(layout), Target(4242, MixedSlice(layout, "user.slice/user-4242.slice")))


def test_conformance_with_io_on_blkio(tmp_path):
    lay = fake_mixed_tree(tmp_path, io="v1")
    check_writes(CgroupfsMixedBackend(lay), Target(1000, MixedSlice(lay, SLICE)), "254:0")


def test_dry_run_reads_both_interfaces_through_the_mixed_backend(layout, target):
    assert DryRunBackend(reader=CgroupfsMixedBackend(layout)).read(target).cpu_max == CpuMax(None, 100000)
    check_dry_run(DryRunBackend(reader=CgroupfsMixedBackend(layout)), target, "254:0")


def test_reads_merge_cpu_from_v1_and_memory_and_io_from_v2(layout, target, tmp_path):
    (tmp_path / "v1/cpu" / SLICE / "cpu.cfs_quota_us").write_text("150000\n")
    (tmp_path / "v2" / SLICE / "memory.max").write_text(f"{8 << 30}\n")
    limits = CgroupfsMixedBackend(layout).read(target)
    assert limits.cpu_max == CpuMax(150000, 100000)  # not v2's cpu.max (12345)
    assert limits.memory_max == 8 << 30
    assert limits.io_max == Cgroup(tmp_path / "v2" / SLICE).io_max()


def test_each_knob_lands_in_its_own_interfaces_file(layout, target, tmp_path):
    v1cpu, v1mem, v2 = tmp_path / "v1/cpu" / SLICE, tmp_path / "v1/memory" / SLICE, tmp_path / "v2" / SLICE
    v1_memory_before = {p.name: p.read_text() for p in v1mem.iterdir()}
    v2_cpu_before = {n: (v2 / n).read_text() for n in ("cpu.max", "cpu.weight")}
    backend = CgroupfsMixedBackend(layout)
    backend.read(target)
    backend.set_cpu_max(target, CpuMax(150000, 100000))
    backend.set_cpu_weight(target, 200)
    backend.set_memory(target, MEMORY_MAX, 512 * MiB)
    backend.set_memory(target, MEMORY_HIGH, 400 * MiB)
    backend.set_memory(target, MEMORY_LOW, 64 * MiB)
    backend.set_io_max(target, "254:0", IoMax(rbps=MiB))
    assert (v1cpu / "cpu.cfs_quota_us").read_text() == "150000"
    assert (v1cpu / "cpu.shares").read_text() == "2048"
    assert (v2 / "memory.max").read_text().strip() == str(512 * MiB)
    assert (v2 / "memory.high").read_text().strip() == str(400 * MiB)
    assert (v2 / "memory.low").read_text().strip() == str(64 * MiB)
    assert "254:0 rbps=1048576" in (v2 / "io.max").read_text()
    assert {p.name: p.read_text() for p in v1mem.iterdir()} == v1_memory_before  # memory's v1 files untouched
    assert {n: (v2 / n).read_text() for n in v2_cpu_before} == v2_cpu_before  # cpu's v2 files untouched


def test_memory_max_is_never_written_below_v2_memory_current(layout, target, tmp_path):
    backend = CgroupfsMixedBackend(layout)
    assert backend.memory_current(target) == 300 * MiB
    note = apply_limit_set(backend, target, LimitSet(CpuMax(None), 100, 0, None, 100 * MiB), margin_bytes=64 * MiB)
    assert note and "below what the kernel holds" in note
    assert int((tmp_path / "v2" / SLICE / "memory.max").read_text()) == 364 * MiB
    assert int((tmp_path / "v2" / SLICE / "memory.high").read_text()) == 100 * MiB


def test_restore_puts_odd_shares_and_every_file_back_exactly(layout, target, tmp_path):
    (tmp_path / "v1/cpu" / SLICE / "cpu.shares").write_text("1000\n")
    watched = [tmp_path / "v1/cpu" / SLICE / n for n in ("cpu.shares", "cpu.cfs_quota_us", "cpu.cfs_period_us")] + \
        [tmp_path / "v2" / SLICE / n for n in ("memory.low", "memory.high", "memory.max", "io.max")]
    before = [p.read_text() for p in watched]
    backend = CgroupfsMixedBackend(layout)
    original = backend.read(target)
    assert original.cpu_weight == 98  # 1000 shares
    backend.set_cpu_weight(target, 300)
    backend.set_memory(target, MEMORY_HIGH, 400 * MiB)
    backend.set_io_max(target, "254:0", IoMax(wbps=MiB))
    restored, failed = restore_originals(backend, {1000: (target, original)})
    assert restored == ["user-1000.slice"] and not failed
    assert (tmp_path / "v1/cpu" / SLICE / "cpu.shares").read_text().strip() == "1000"
    assert [p.read_text().strip() for p in watched] == [b.strip() for b in before]


def test_a_snapshots_path_finds_both_sides_and_a_foreign_one_is_refused(layout, tmp_path):
    backend = CgroupfsMixedBackend(layout)
    snap = Target(1000, Cgroup(tmp_path / "v1/cpu" / SLICE))  # what load_snapshot gives
    backend.set_memory(snap, MEMORY_HIGH, 200 * MiB)
    assert int((tmp_path / "v2" / SLICE / "memory.high").read_text()) == 200 * MiB
    with pytest.raises(EnforceError, match="not under the cgroup v1 hierarchies"):
        backend.read(Target(1000, Cgroup(tmp_path / "v2" / SLICE)))


def test_without_her_v2_cgroup_memory_reads_as_defaults_and_a_write_is_an_error_not_gone(layout, target, tmp_path):
    import shutil

    shutil.rmtree(tmp_path / "v2" / SLICE)
    backend = CgroupfsMixedBackend(layout)
    limits = backend.read(target)
    assert (limits.memory_low, limits.memory_high, limits.memory_max) == (0, None, None)
    assert limits.cpu_max == CpuMax(None, 100000) and backend.memory_current(target) is None
    with pytest.raises(EnforceError, match="no cgroup v2 directory") as caught:
        backend.set_memory(target, MEMORY_MAX, 512 * MiB)
    assert type(caught.value) is EnforceError  # not TargetGone: she is still governed on cpu
    backend.set_cpu_max(target, CpuMax(50000))


def test_io_nowhere_is_refused_and_read_as_unlimited(tmp_path):
    lay = fake_mixed_tree(tmp_path, io="none")
    target = Target(1000, MixedSlice(lay, SLICE))
    backend = CgroupfsMixedBackend(lay)
    assert backend.read(target).io_max == KERNEL_DEFAULTS.io_max
    with pytest.raises(EnforceError, match="io controller is on neither"):
        backend.set_io_max(target, "254:0", IoMax(rbps=MiB))


def test_make_backend_on_a_mixed_host(layout, tmp_path):
    backend, why = make_backend("auto", systemd_runtime_dir=str(tmp_path / "none"), mixed=layout)
    assert isinstance(backend, CgroupfsMixedBackend) and backend.name == "cgroupfs-mixed" and "systemd is not running" in why
    (tmp_path / "systemd").mkdir()
    backend, why = make_backend("auto", systemd_runtime_dir=str(tmp_path / "systemd"), mixed=layout)
    assert isinstance(backend, CgroupfsMixedBackend) and "manages no controller in cgroup v2" in why
    assert isinstance(make_backend("cgroupfs", mixed=layout)[0], CgroupfsMixedBackend)
    with pytest.raises(EnforceError, match="systemd cannot govern a mixed host"):
        make_backend("systemd", mixed=layout)


def test_a_mixed_backend_named_by_a_snapshot_finds_the_host_or_says_it_is_not_mixed(tmp_path, statfs, monkeypatch):
    text = mountinfo(tmp_path, {"cpu,cpuacct": "cpu,cpuacct"}, "memory io")
    real_find = find_mixed
    monkeypatch.setattr("governor.enforce.mixed.find_mixed", lambda: real_find(text))
    backend, why = make_backend("cgroupfs-mixed")
    assert backend.layout.v2_root == tmp_path / "unified" and "cgroupfs-mixed requested" in why
    monkeypatch.setattr("governor.enforce.mixed.find_mixed", lambda: real_find(mountinfo(tmp_path, {}, "cpu memory")))
    with pytest.raises(EnforceError, match="not a mixed host"):
        make_backend("cgroupfs-mixed")


# -- the service builds it -----------------------------------------------------------------------------

def test_set_up_builds_the_mixed_monitor_and_backend_and_says_why(tmp_path, statfs):
    from governor.service.hostsetup import set_up

    text = mountinfo(tmp_path, {"cpu,cpuacct": "cpu,cpuacct"}, "memory io")
    (tmp_path / "cpu,cpuacct" / "user.slice").mkdir()
    host = set_up(Policy(backend="cgroupfs"), dry_run=False, clock=lambda: 0.0, mountinfo=text)
    assert isinstance(host.monitor, MixedMonitor) and isinstance(host.backend, CgroupfsMixedBackend)
    assert "cpu on cgroup v1" in host.source and "memory and io on cgroup v2" in host.source
    assert "cgroupfs requested: writing each controller's files on its own interface" in host.backend_reason
    dry = set_up(Policy(), dry_run=True, clock=lambda: 0.0, mountinfo=text)
    assert isinstance(dry.monitor, MixedMonitor) and isinstance(dry.backend.reader, CgroupfsMixedBackend)


def test_doctor_says_mixed_and_checks_the_v2_user_slice(tmp_path, statfs):
    from governor.service.doctor import run_checks

    text = mountinfo(tmp_path, {"cpu,cpuacct": "cpu,cpuacct"}, "memory io")
    (tmp_path / "cpu,cpuacct" / "user.slice").mkdir()
    (tmp_path / "unified" / "user.slice").mkdir()
    (tmp_path / "unified" / "user.slice" / "cgroup.controllers").write_text("memory\n")
    (tmp_path / "unified" / "user.slice" / "cgroup.subtree_control").write_text("memory\n")
    checks = {c.name: c for c in run_checks(Policy(), mountinfo=text, systemd_dir=str(tmp_path / "none"))}
    assert checks["cgroup interface"].status == "ok" and checks["cgroup interface"].detail.startswith("mixed: ")
    assert "cpu on cgroup v1" in checks["cgroup interface"].detail
    v2 = checks["user.slice (cgroup v2)"]
    assert v2.status == "fail" and "io not enabled" in v2.detail and "+io" in v2.fix
