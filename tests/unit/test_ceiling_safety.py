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
from governor.enforce.model import EnforceError, LimitSet, Target
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
    host = SimHost(cores=2.0, memory_bytes=16 * GiB)
    for uid in (1000, 1001):
        host.add(uid, f"u{uid}", 1.5, 1 * GiB)
    backend = RefusesOne(host)
    gov = governor(host, backend)
    for _ in range(3):
        gov.tick()
        host.step(1.0)
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
