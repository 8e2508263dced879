"""A limit someone else writes to a governed slice while the daemon runs is hers: never lifted,
and left so at stop (:meth:`governor.control.loop.Governor._take_changes_by_others`).

Before, the governor's next write of that knob overwrote it, and the restore at stop wrote her
limits from before the daemon started over it: an admin's ``cpu.max`` of half a core became
the governor's whole core, then ``max``."""

from dataclasses import replace

from cgroups import CpuMax
from governor.control.loop import Governor
from governor.control.model import Capacity
from governor.config.policy import Policy
from governor.enforce.model import MEMORY_HIGH, EnforceError, LimitSet
from tests.simhost import SimBackend, SimHost, SimMonitor, run_ticks

GiB, MiB = 2**30, 2**20
HALF_CORE = CpuMax(50_000, 100_000)


def governor(host, backend, on_snapshot=None):
    return Governor(Policy().loop_settings(), Capacity(host.cores, host.memory_bytes), SimMonitor(host), backend,
                    host.clock, lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0}, on_snapshot=on_snapshot)


def contended_cpu(backend_class=SimBackend):
    """alice and bob each want 1.5 cores of 2: the governor caps both (host, backend, governor)."""
    host = SimHost(cores=2.0, memory_bytes=16 * GiB)
    for uid, name in ((1000, "alice"), (1001, "bob")):
        host.add(uid, name, 1.5, 1 * GiB)
    backend = backend_class(host)
    gov = governor(host, backend)
    run_ticks(host, gov, 4)
    assert host.users[1000].limits.cpu_max.quota_usec is not None  # the governor's cap is in force
    return host, backend, gov


def test_a_cpu_max_an_admin_writes_while_governed_is_never_lifted_and_stays_at_stop():
    host, backend, gov = contended_cpu()
    host.users[1000].limits = replace(host.users[1000].limits, cpu_max=HALF_CORE)  # the admin, by hand
    host.users[1001].want_cores = 0.0  # bob stops: the governor would give alice all she wants
    writes_before = len(backend.writes)
    first = run_ticks(host, gov, 6)[0].users[1000]
    assert first.planned.cpu_max != HALF_CORE and not first.written  # a write was due: the change found first
    alice_cpu_writes = [w[2]["cpu_max"] for w in backend.writes[writes_before:] if w[1] == 1000 and "cpu_max" in w[2]]
    assert all(c.quota_usec is not None and c.cores <= HALF_CORE.cores for c in alice_cpu_writes), alice_cpu_writes
    assert host.users[1000].limits.cpu_max == HALF_CORE
    assert gov.originals[1000][1].cpu_max == HALF_CORE
    assert any("user-1000.slice: cpu.max is 50000 100000" in n and "someone else" in n for n in gov.admin_change_notes)
    assert gov.restore() == []
    assert host.users[1000].limits.cpu_max == HALF_CORE  # hers, not the "max" from before the start
    assert host.users[1001].limits.cpu_max == CpuMax(None)  # bob's own, untouched, given back


def test_a_memory_low_an_admin_raises_while_governed_is_given_back_at_stop():
    """Not only ceilings: any knob someone else changed is what her slice is left with."""
    host, backend, gov = contended_cpu()
    before = gov.originals[1000][1]
    host.users[1000].limits = replace(host.users[1000].limits, memory_low=256 * MiB)  # the admin raises her floor
    run_ticks(host, gov, 1)
    host.users[1000].want_cores = 0.2  # her plan moves: a write is due, and the change is seen first
    run_ticks(host, gov, 3)
    assert gov.originals[1000][1] == replace(before, memory_low=256 * MiB)
    gov.restore()
    assert host.users[1000].limits.memory_low == 256 * MiB


class PageRounding(SimBackend):
    """A kernel that keeps memory limits in whole pages and cpu.max as written (as cgroup v2
    does): what it reads back of the governor's own write differs from what was written."""

    def set_memory(self, target, knob, limit_bytes):
        super().set_memory(target, knob, None if limit_bytes is None else limit_bytes // 4096 * 4096 - 4096)


def test_the_kernels_reading_of_the_governors_own_write_is_not_taken_for_someone_elses():
    host = SimHost(cores=4.0, memory_bytes=4 * GiB)
    for uid in (1000, 1001, 1002):
        host.add(uid, f"u{uid}", 1.5, 3 * GiB).memory_bytes = 1536 * MiB
    backend = PageRounding(host)
    gov = governor(host, backend)
    for step in range(8):
        run_ticks(host, gov, 1)
        for uid in (1000, 1001, 1002):
            host.users[uid].want_memory_bytes = (3 + step % 2) * GiB // 2  # plans move tick after tick
    assert any(MEMORY_HIGH.file in w[2] or "memory_high" in w[2] for w in backend.writes)
    assert gov.admin_change_notes == []
    assert all(original == LimitSet(CpuMax(None), 100, 0, None, None, {}) for _, original in gov.originals.values())


def test_a_change_is_taken_when_her_limits_are_given_back_at_a_reload_that_exempts_her():
    host, backend, gov = contended_cpu()
    host.users[1000].limits = replace(host.users[1000].limits, cpu_max=HALF_CORE)
    # the reload exempts her: her slice lives on, she is no longer governed (as test_loop's)
    gov.monitor.users = lambda: [u for u in host.governed() if u.uid != 1000]
    run_ticks(host, gov, 1)
    assert 1000 not in gov.originals
    assert host.users[1000].limits.cpu_max == HALF_CORE


def test_the_snapshot_is_saved_again_with_her_new_limit():
    host = SimHost(cores=2.0, memory_bytes=16 * GiB)
    for uid in (1000, 1001):
        host.add(uid, f"u{uid}", 1.5, 1 * GiB)
    saved = []
    gov = governor(host, SimBackend(host), on_snapshot=lambda originals: saved.append(dict(originals)))
    run_ticks(host, gov, 4)
    host.users[1000].limits = replace(host.users[1000].limits, cpu_max=HALF_CORE)
    host.users[1001].want_cores = 0.0
    run_ticks(host, gov, 3)
    assert saved[-1][1000][1].cpu_max == HALF_CORE
    assert saved[-1][1001][1].cpu_max == CpuMax(None)


class Unreadable(SimBackend):
    """Her slice cannot be read (EMFILE, say) while ``unreadable`` holds her uid; writes work."""

    unreadable: set = set()

    def read(self, target):
        if target.uid in self.unreadable:
            raise EnforceError(f"{target.unit}: cpu.max: cannot read: EMFILE")
        return super().read(target)


def test_nothing_is_written_over_a_slice_that_could_not_be_checked():
    host, backend, gov = contended_cpu(Unreadable)
    host.users[1000].limits = replace(host.users[1000].limits, cpu_max=HALF_CORE)
    host.users[1001].want_cores = 0.0
    backend.unreadable = {1000}
    errors = [r.users[1000].error or "" for r in run_ticks(host, gov, 3)]
    assert any("nothing written: her limits could not be read first" in e for e in errors), errors
    assert host.users[1000].limits.cpu_max == HALF_CORE and gov.originals[1000][1].cpu_max == CpuMax(None)
    backend.unreadable = set()
    run_ticks(host, gov, 3)
    assert host.users[1000].limits.cpu_max == HALF_CORE and gov.originals[1000][1].cpu_max == HALF_CORE


class LandsThenFails(SimBackend):
    """A cpu.max write that the kernel takes and the backend still reports failed, once: a
    D-Bus call that timed out while systemd did the job (the review of this change)."""

    armed = failed = False

    def set_cpu_max(self, target, limit):
        super().set_cpu_max(target, limit)
        if target.uid == 1000 and self.armed and not self.failed:
            self.failed = True
            raise EnforceError(f"{target.unit}: CPUQuota: timed out")


def test_a_write_reported_failed_that_landed_is_not_taken_for_someone_elses():
    """Before, the reading from before that write stood, the governor's own cap read as someone
    else's and was left on her slice at stop."""
    host, backend, gov = contended_cpu(LandsThenFails)
    backend.armed = True  # a write after the governor's first, whose reading stands
    for want in (0.4, 1.2, 0.3, 1.5, 0.6, 1.4):  # her plan moves: writes due tick after tick
        host.users[1000].want_cores = want
        run_ticks(host, gov, 1)
    assert backend.failed
    assert gov.admin_change_notes == []
    assert gov.restore() == []
    assert host.users[1000].limits.cpu_max == CpuMax(None)


class SystemdLike(SimBackend):
    """systemd's way: its unit properties outlive the cgroup, and setting one writes every knob
    of that controller from them (src/core/cgroup.c, cgroup_context_apply)."""

    limits_outlive_cgroup = True
    _CONTROLLERS = (("cpu_max", "cpu_weight"), ("memory_low", "memory_high", "memory_max"))

    def _set(self, target, **changes):
        u = self._user(target)
        props = self.__dict__.setdefault("props", {}).setdefault(target.uid, dict(u.limits.__dict__))
        props.update(changes)
        super()._set(target, **changes)
        for controller in self._CONTROLLERS:
            if set(changes) & set(controller):
                u.limits = replace(u.limits, **{k: props[k] for k in controller})


def test_with_systemd_a_change_made_in_the_file_is_written_back_as_its_property():
    """``echo 50000 100000 > cpu.max`` under systemd: taken, and set as her CPUQuota, or the
    governor's next cpu.weight write would have systemd put its old quota back."""
    host, backend, gov = contended_cpu(SystemdLike)
    host.users[1000].limits = replace(host.users[1000].limits, cpu_max=HALF_CORE)  # in the file, not systemd's
    host.users[1001].want_cores = 0.0
    run_ticks(host, gov, 2)
    weights = {1000: 3.0}
    gov.weight_of = lambda u: {"cpu": weights.get(u.uid, 1.0), "memory": 1.0, "io": 1.0}  # a reload: cpu.weight due
    host.users[1001].want_cores = 1.5
    seen = []
    for _ in range(6):
        run_ticks(host, gov, 1)
        seen.append(host.users[1000].limits.cpu_max)
    assert any(CpuMax(None) != w[2].get("cpu_weight", CpuMax(None)) for w in backend.writes if w[1] == 1000)
    assert all(c.quota_usec is not None and c.cores <= HALF_CORE.cores for c in seen), seen
    gov.restore()
    assert host.users[1000].limits.cpu_max == HALF_CORE


class WatchedSystemd(SystemdLike):
    """SystemdLike, recording every moment her memory.max stood below what she holds."""

    def _set(self, target, **changes):
        super()._set(target, **changes)
        u = self._user(target)
        if u.limits.memory_max is not None and u.limits.memory_max < u.memory_bytes:
            self.__dict__.setdefault("below", []).append((target.uid, changes, u.limits.memory_max, u.memory_bytes))


def test_a_memory_max_written_back_never_stands_below_her_use_for_a_moment():
    """Her admin lifted memory.high and memory.max in the files, and she grew past the
    governor's old memory.max. Written back memory.high first, systemd wrote every memory knob
    from its properties, the old memory.max among them: below her use (the second review)."""
    host = SimHost(cores=2.0, memory_bytes=4 * GiB)
    for uid in (1000, 1001):
        host.add(uid, f"u{uid}", 1.5, 3 * GiB).memory_bytes = 1536 * MiB
    backend = WatchedSystemd(host)
    gov = governor(host, backend)
    run_ticks(host, gov, 4)
    alice = host.users[1000]
    assert alice.limits.memory_max is not None and alice.limits.memory_high is not None  # the governor's
    alice.limits = replace(alice.limits, memory_high=None, memory_max=None)  # the admin, in the files
    alice.memory_bytes = backend.props[1000]["memory_max"] + 512 * MiB
    alice.want_cores = 0.2  # her plan moves: a write is due
    run_ticks(host, gov, 2)
    assert any("memory.max is max" in n for n in gov.admin_change_notes), gov.admin_change_notes
    assert backend.__dict__.get("below", []) == []


class WriteBackFails(SystemdLike):
    """Her CPUQuota cannot be set (a D-Bus call that timed out) while ``failing``."""

    failing = False

    def set_cpu_max(self, target, limit):
        if self.failing and target.uid == 1000:
            raise EnforceError(f"{target.unit}: CPUQuota: timed out")
        super().set_cpu_max(target, limit)


def test_a_change_taken_whose_write_back_fails_is_in_the_snapshot_all_the_same():
    """Before, her originals held it in memory only: after a crash, drfgov restore would have
    lifted it from the snapshot (the second review)."""
    host = SimHost(cores=2.0, memory_bytes=16 * GiB)
    for uid in (1000, 1001):
        host.add(uid, f"u{uid}", 1.5, 1 * GiB)
    saved = []
    backend = WriteBackFails(host)
    gov = governor(host, backend, on_snapshot=lambda originals: saved.append(dict(originals)))
    run_ticks(host, gov, 4)
    host.users[1000].limits = replace(host.users[1000].limits, cpu_max=HALF_CORE)
    host.users[1001].want_cores = 0.0
    backend.failing = True
    errors = [r.users[1000].error or "" for r in run_ticks(host, gov, 3)]
    assert any("could not be written back" in e for e in errors), errors
    assert saved[-1][1000][1].cpu_max == HALF_CORE == gov.originals[1000][1].cpu_max


def test_changes_taken_from_many_users_in_a_tick_are_saved_once():
    """A save a user is quadratic in users (what _write_first avoids): one save a tick."""
    host = SimHost(cores=2.0, memory_bytes=64 * GiB)
    for uid in range(1000, 1200):
        host.add(uid, f"u{uid}", 0.5, 1 * GiB)
    saved = []
    gov = governor(host, SimBackend(host), on_snapshot=lambda originals: saved.append(len(originals)))
    run_ticks(host, gov, 4)
    before = len(saved)
    for u in host.users.values():
        u.limits = replace(u.limits, cpu_weight=50)  # an admin's, everyone's
        u.want_cores = 0.05  # every plan moves: a write is due for each
    run_ticks(host, gov, 1)
    assert len(gov.admin_change_notes) >= 100
    assert len(saved) - before == 1


def test_a_dry_runs_logout_is_no_change_by_someone_else(tmp_path):
    """With the dry-run backend her slice, once removed, read as the kernel's defaults: her
    logout was taken for three changes by someone else (cpu.max, memory.high, …) and her
    originals replaced by the defaults in the snapshot. It reads as gone now, as with the
    real backends: no note, and her originals given back as they were."""
    from cgroups import Cgroup
    from governor.enforce import DryRunBackend
    from monitors.cgroupmonitor import CgroupMonitor
    from tests.fakecgroup import fake_cgroup

    now, uids = [0.0], (1000, 1001, 1002)
    slices = {uid: fake_cgroup(tmp_path, f"user.slice/user-{uid}.slice", cpu_max="max 100000\n") for uid in uids}
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "stat").write_text("cpu  100 0 100 10000 0 0 0 0 0 0\n")
    (tmp_path / "proc" / "meminfo").write_text("MemTotal: 16000000 kB\nMemAvailable: 8000000 kB\n")
    monitor = CgroupMonitor(Cgroup(tmp_path / "user.slice"), lambda: now[0], min_uid=1000,
                            procfs=str(tmp_path / "proc"))
    snapshots, backend = [], DryRunBackend()
    gov = Governor(Policy().loop_settings(), Capacity(2.0, 800 * MiB), monitor, backend, lambda: now[0],
                   lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0}, on_snapshot=lambda o: snapshots.append(dict(o)))
    used = dict.fromkeys(uids, 0)

    def busy(users):
        for uid in users:
            used[uid] += 1_500_000  # 1.5 cores each: CPU contended, every one capped
            (slices[uid] / "cpu.stat").write_text(f"usage_usec {used[uid]}\nuser_usec 0\nsystem_usec 0\n"
                                                  "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
        now[0] += 1.0
        return gov.tick()

    for _ in range(4):
        busy(uids)
    assert 1001 in gov.originals and gov.originals[1001][1].memory_high == 64 * MiB  # hers, an admin's
    original = gov.originals[1001]
    recorded = len(backend.recorded)
    import shutil
    shutil.rmtree(slices.pop(1001))  # she logs out
    busy((1000, 1002))
    assert gov.admin_change_notes == []
    assert 1001 not in gov.originals and all(1001 not in snapshot or snapshot[1001] == original
                                             for snapshot in snapshots)
    given_back = {r.knob: r.value for r in backend.recorded[recorded:] if r.unit == "user-1001.slice"}
    assert given_back["memory.high"] == 64 * MiB  # hers, written back as the release would (not max)
