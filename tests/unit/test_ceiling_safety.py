"""An admin's own limits are ceilings the governor never lifts, and what it wrote goes back
exactly (the safety audit of 2026-11-26): her memory.max near her use is written as it is, not
raised by the margin tick after tick; a restore writes an original memory.max at or above her
use as it is; a plan made without her ceiling (its first read failed) is never written; a
restore that fails keeps her originals on record."""

from pathlib import Path

from cgroups import Cgroup, CpuMax
from governor.config.policy import Policy
from governor.control.loop import Governor
from governor.control.model import Capacity
from governor.enforce.apply import restore_originals
from governor.enforce.cgroupfs import CgroupfsBackend
from governor.enforce.model import MEMORY_MAX, EnforceError, LimitSet, Target
from tests.fakecgroup import fake_cgroup
from tests.simhost import SimBackend, SimHost, SimMonitor

GiB, MiB = 2**30, 2**20


class KernelHost(SimHost):
    """The simulated host, whose kernel never lets memory.current pass memory.max."""

    def step(self, seconds=1.0):
        super().step(seconds)
        for u in self.users.values():
            if u.limits.memory_max is not None:
                u.memory_bytes = min(u.memory_bytes, u.limits.memory_max)


def governor(host, backend):
    return Governor(Policy().loop_settings(), Capacity(host.cores, host.memory_bytes), SimMonitor(host), backend,
                    host.clock, lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0})


def two_users_governed(backend_class):
    """Two busy users on a 2-core host, three ticks governed by a ``backend_class`` backend:
    (host, backend, governor)."""
    host = SimHost(cores=2.0, memory_bytes=16 * GiB)
    for uid in (1000, 1001):
        host.add(uid, f"u{uid}", 1.5, 1 * GiB)
    backend = backend_class(host)
    gov = governor(host, backend)
    for _ in range(3):
        gov.tick()
        host.step(1.0)
    return host, backend, gov


def test_an_admins_memory_max_within_the_margin_of_her_use_is_never_lifted():
    """She sits at her admin's 1 GiB memory.max (the margin is 256 MiB). It was raised to her use
    plus the margin at the first write, planned again as hers (lower) the next tick, raised
    again: 1.25, 1.5, … 2.75 GiB in seven ticks, and 3 GiB "restored"."""
    host = KernelHost(cores=4.0, memory_bytes=16 * GiB)
    alice = host.add(1000, "alice", 0.5, 6 * GiB)
    alice.limits = LimitSet(CpuMax(None), 100, 0, None, 1 * GiB, {})
    alice.memory_bytes = 1 * GiB
    host.add(1001, "bob", 0.5, 1 * GiB)
    backend = SimBackend(host)
    gov = governor(host, backend)
    in_force = []
    for _ in range(8):
        gov.tick()
        host.step(1.0)
        in_force.append(host.users[1000].limits.memory_max)
    assert in_force == [1 * GiB] * 8
    assert [w[2]["memory_max"] for w in backend.writes if w[1] == 1000 and "memory_max" in w[2]] == [1 * GiB]
    gov.restore()
    assert (host.users[1000].limits.memory_max, host.users[1000].limits.memory_high) == (1 * GiB, None)


def test_the_governors_own_memory_max_is_still_raised_to_use_plus_margin():
    """Without an admin's memory.max, the first write's memory.max is at least her use plus
    the margin, as before."""
    host = KernelHost(cores=4.0, memory_bytes=4 * GiB)
    for uid in (1000, 1001, 1002):
        host.add(uid, f"u{uid}", 1.5, 3 * GiB).memory_bytes = 1536 * MiB
    gov = governor(host, SimBackend(host))
    for _ in range(3):
        report = gov.tick()
        host.step(1.0)
        for u in report.users.values():
            if u.limits is not None and u.limits.memory_max is not None:
                assert u.limits.memory_max >= 1536 * MiB + Policy().memory.margin_bytes


def test_a_restore_writes_an_original_memory_max_at_or_above_her_use_as_it_is(tmp_path: Path):
    """The admin's 300 MiB with 200 MiB in use (256 MiB margin) came back as memory.max 456 MiB
    and memory.high 300 MiB: the swap is for an original below what the kernel holds."""
    path = fake_cgroup(tmp_path, memory_max=f"{300 * MiB}\n", memory_high="max\n", memory_current=f"{200 * MiB}\n")
    original = LimitSet(CpuMax(None), 100, 0, None, 300 * MiB, {})
    notes: list[str] = []
    restored, failed = restore_originals(CgroupfsBackend(), {1000: (Target(1000, Cgroup(path)), original)},
                                         256 * MiB, notes)
    assert (restored, failed, notes) == (["user-1000.slice"], {}, [])
    assert (path / "memory.max").read_text().strip() == str(300 * MiB)
    assert (path / "memory.high").read_text().strip() == "max"
    # below what she holds: memory.high takes it, memory.max her use plus the margin
    (path / "memory.current").write_text(f"{400 * MiB}\n")
    restore_originals(CgroupfsBackend(), {1000: (Target(1000, Cgroup(path)), original)}, 256 * MiB, notes)
    assert (path / "memory.max").read_text().strip() == str(656 * MiB)
    assert (path / "memory.high").read_text().strip() == str(300 * MiB)
    assert len(notes) == 1 and "below what the kernel holds for her" in notes[0]


class FlakyRead(SimBackend):
    """Her limits cannot be read the first time (EMFILE, say)."""

    failed = False

    def read(self, target):
        if target.uid == 1000 and not self.failed:
            self.failed = True
            raise EnforceError(f"{target.unit}: cpu.max: cannot read: EMFILE")
        return super().read(target)


def test_a_plan_made_without_her_ceiling_is_never_written():
    """Her limits could not be read at first sight: the next tick's plan, made without them, was
    written as soon as they were read — her admin's 0.5 core and 2 GiB lifted to 2 cores and
    no memory.max. Now she is planned again with them first."""
    host = SimHost(cores=4.0, memory_bytes=16 * GiB)
    admin = LimitSet(CpuMax(50_000), 100, 0, None, 2 * GiB, {})
    host.add(1000, "alice", 0.3, 1 * GiB).limits = admin
    host.add(1001, "bob", 0.3, 1 * GiB)
    backend = FlakyRead(host)
    gov = governor(host, backend)
    for _ in range(4):
        gov.tick()
        host.step(1.0)
        limits = host.users[1000].limits
        assert limits.cpu_max.quota_usec <= 50_000 and limits.memory_max is not None and limits.memory_max <= 2 * GiB
    assert gov.originals[1000][1] == admin
    gov.restore()
    assert host.users[1000].limits == admin


class RefusesOne(SimBackend):
    """Writes to uid 1001's slice are refused once ``refuse`` is set (a bus that stopped answering)."""

    refuse = False

    def _check(self, target):
        if self.refuse and target.uid == 1001:
            raise EnforceError(f"{target.unit}: no answer")

    def set_cpu_max(self, target, limit):
        self._check(target)
        super().set_cpu_max(target, limit)


def test_a_restore_that_fails_keeps_her_originals():
    """A reload through another backend restores through the old one first: one that failed had
    her originals cleared all the same, and the next tick read the governor's limits in her
    slice as hers (and saved them in the snapshot)."""
    host, backend, gov = two_users_governed(RefusesOne)
    kept = dict(gov.originals)
    backend.refuse = True
    errors = gov.restore()
    assert len(errors) == 1 and "user-1001.slice" in errors[0]
    assert gov.originals == {1001: kept[1001]}
    backend.refuse = False
    gov.tick()  # the next tick writes her again as already snapshotted, her ceiling the admin's
    assert gov.originals[1001] == kept[1001] and gov.state[1001].ceiling == kept[1001][1]
    assert gov.restore() == []
    assert host.users[1001].limits == kept[1001][1]


class Host(SimHost):
    """Her memory follows what she wants, clamped by memory.max only: memory.high throttles on the
    way back to user space, so one syscall (fallocate on /dev/shm, mmap MAP_POPULATE) goes past
    it up to memory.max; on cgroup v1 nothing holds her at a memory.high at all."""

    def step(self, seconds=1.0):
        super().step(seconds)
        for u in self.users.values():
            u.memory_bytes = u.want_memory_bytes
            if u.limits.memory_max is not None:
                u.memory_bytes = min(u.memory_bytes, u.limits.memory_max)


class Growing(SimBackend):
    """She grows between her sample and the write (what the read just before it is for)."""

    grow_to = None

    def memory_current(self, target):
        u = self.host.users[target.uid]
        if target.uid == 1000 and self.grow_to is not None:
            u.memory_bytes = min(self.grow_to, u.limits.memory_max or self.grow_to)
            self.grow_to = None
        return super().memory_current(target)


def test_memory_max_is_never_written_below_use_nor_above_her_ceiling_while_she_is_under_it():
    """The reviewer's counter-example to the first fix: memory contended, her admin's memory.max
    1 GiB. The read just before the write added the margin twice (planned use + margin, then
    raised by the margin again), lifting her memory.max past her ceiling; she grew past it in
    one syscall; and her ceiling, written as it was without a read, landed below her use (an
    OOM kill inside her slice)."""
    host = Host(cores=4.0, memory_bytes=2 * GiB)
    alice = host.add(1000, "alice", 0.5, 700 * MiB)
    alice.limits = LimitSet(CpuMax(None), 100, 0, None, 1 * GiB, {})
    host.add(1001, "bob", 0.5, 1400 * MiB)
    backend = Growing(host)
    gov = governor(host, backend)
    for tick in range(12):
        before = len(backend.writes)
        if tick == 6:
            backend.grow_to = 1000 * MiB  # 300 MiB between her sample and the write
        gov.tick()
        for _, uid, changes in backend.writes[before:]:
            if uid == 1000 and "memory_max" in changes:
                assert changes["memory_max"] >= host.users[1000].memory_bytes, tick  # never below use
                assert changes["memory_max"] <= 1 * GiB, tick  # she holds less: her ceiling holds
        if tick == 7:
            alice.want_memory_bytes = 1150 * MiB  # past her ceiling only if it was lifted
        host.step(1.0)
    assert host.users[1000].memory_bytes <= 1 * GiB


def test_a_user_already_past_her_ceiling_has_memory_max_at_her_use_plus_the_margin():
    """Past her admin's memory.max (lifted by hand meanwhile, say), writing it would reclaim or
    kill: her use plus the margin is written, and her reason says why."""
    host = SimHost(cores=4.0, memory_bytes=16 * GiB)
    alice = host.add(1000, "alice", 0.5, 1536 * MiB)
    alice.limits = LimitSet(CpuMax(None), 100, 0, None, 1 * GiB, {})
    alice.memory_bytes = 1536 * MiB  # more than her ceiling: the limit was lifted after it was read
    host.add(1001, "bob", 0.5, 1 * GiB)
    gov = governor(host, SimBackend(host))
    report = gov.tick()
    host.step(1.0)
    report = gov.tick()
    margin = Policy().memory.margin_bytes
    assert host.users[1000].limits.memory_max == 1536 * MiB + margin
    assert "above her own memory.max 1073741824 B" in report.users[1000].reasons[MEMORY_MAX]


class FailsRelease(SimBackend):
    """Her cpu.max cannot be written once she has left (a disk gone, a bus stuck)."""

    attempts = 0

    def set_cpu_max(self, target, limit):
        if target.uid == 1001 and target.uid not in self.host.users:
            self.attempts += 1
            raise EnforceError(f"{target.unit}: cpu.max: refused")
        super().set_cpu_max(target, limit)

    def releasing(self):
        from contextlib import nullcontext

        return nullcontext()


def test_a_release_that_fails_is_tried_once_and_said_then_at_the_final_restore():
    host, backend, gov = two_users_governed(FailsRelease)
    del host.users[1001]  # she logs out
    for _ in range(5):
        gov.tick()
        host.step(1.0)
    assert backend.attempts == 1 and 1001 in gov.originals
    assert len(gov.release_notes) == 1 and "restored at stop" in gov.release_notes[0]
    assert gov.restore() != [] and backend.attempts == 2  # the final restore tries her again


def test_a_starters_demand_is_scaled_up_to_her_admins_limit_not_past_it():
    """A starter's partial first reading is scaled up to a whole resource for one tick: with an
    admin's cpu.max of 0.5 core it was scaled to all 4 cores, and DRF held the other user at 2
    cores while she could use 0.5 (the DRF audit)."""
    from types import SimpleNamespace

    from governor.control.demand import DemandParams
    from governor.control.loop import _UserState
    from governor.control.resources import CPU, MEMORY

    gov = governor(SimHost(cores=4.0), SimBackend(SimHost(cores=4.0)))
    gov.demand_params = DemandParams()
    gov.state = {1: _UserState(ceiling=LimitSet(CpuMax(50_000), 100, 0, None, None, {}),
                               starting=frozenset({CPU, MEMORY})),
                 2: _UserState(starting=frozenset())}
    reports = {1: SimpleNamespace(demand={CPU: 0.1, MEMORY: 1e8}), 2: SimpleNamespace(demand={CPU: 4.0, MEMORY: 1e8})}
    measured = [SimpleNamespace(user=SimpleNamespace(uid=uid)) for uid in (1, 2)]
    gov._scale_starters(measured, reports, {CPU: 4.0, MEMORY: 64e9})
    assert reports[1].demand[CPU] == 0.5 and reports[1].demand[MEMORY] == 1e8  # to her limit; memory, a stock, as read


class CpuMaxRefused(SimBackend):
    """The simulated kernel, refusing her cpu.max once told to (a v1 parent's quota, say)."""

    refuse = False

    def set_cpu_max(self, target, limit):
        if self.refuse and target.uid == 1000:
            raise EnforceError(f"{target.unit}: cpu.max: kernel refused: EINVAL")
        super().set_cpu_max(target, limit)


def test_a_refused_knob_does_not_hold_back_the_memory_max_raise_after_it():
    """Her cpu.max refused tick after tick stopped the knobs after it, memory.max among them:
    her use crept up to within 32 MiB of the governor's memory.max and it was never raised
    (an OOM kill ahead; the cgroup audit of 2026-11-26). Each knob is now tried."""
    host = SimHost(cores=2.0, memory_bytes=4 * GiB)
    alice = host.add(1000, "alice", 2.0, 3 * GiB)
    host.add(1001, "bob", 2.0, 3 * GiB)
    backend = CpuMaxRefused(host)
    gov = governor(host, backend)
    for _ in range(12):
        gov.tick()
        host.step(1.0)
    assert alice.limits.memory_max is not None and alice.limits.cpu_max.quota_usec is not None
    backend.refuse = True
    alice.want_cores = 0.5  # her CPU cap is planned again (and refused)
    written, errors = [], []
    for _ in range(4):
        alice.memory_bytes = alice.limits.memory_max - 32 * MiB  # past her memory.high, near the max
        report = gov.tick().users[1000]
        host.step(1.0)
        written.append(report.written)
        errors.append(report.error or "")
    assert any("cpu.max: kernel refused" in e for e in errors), errors  # said; the rest written all the same
    assert all(MEMORY_MAX in knobs for knobs in written), written
