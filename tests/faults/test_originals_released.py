"""A user's originals stay on record until they are given back (the safety audit of 2026-11-26).
A user whose state a failed read or write dropped still has her originals restored when she
leaves — logs out, or a reload exempts her; a write that finds her slice gone keeps them for
the release (with systemd her limits outlive the slice in its drop-ins and would come back at
her next login, then be read as hers); the start-up restore of a killed run's snapshot keeps
memory.max the policy's margin above her use, as ``drfgov restore`` does."""

import shutil

from cgroups import Cgroup, CpuMax, ReadFailed
from governor.enforce.model import LimitSet, Target
from governor.enforce.systemd import SystemdBackend
from governor.service.snapshot import save_snapshot
from tests.faults.fakebus import DropInSystemd
from tests.faults.harness import FIRST_UID, limits_lost, make_world

MiB = 2**20


def test_a_user_whose_state_a_failed_read_dropped_is_released_when_a_reload_exempts_her(base):
    world = make_world(base, 3)
    victim = FIRST_UID
    d = world.daemon()
    d.tick(), d.tick()
    cpu_max = world.host.slice(victim) / "cpu.max"
    assert cpu_max.read_text().split() != world.host.original[victim]["cpu.max"].split()  # governed
    real = d.host.monitor.sample

    def sample(user, *args, **kwargs):
        if user.uid == victim:
            raise ReadFailed(f"{user.cgroup.path}/cpu.stat", 5, "Input/output error")
        return real(user, *args, **kwargs)

    d.host.monitor.sample = sample
    assert "EIO" in d.tick().users[victim].error
    d.host.monitor.sample = real
    world.write_policy(extra=f"governed: {{min_uid: {FIRST_UID + 1}}}\n")
    d.reload()
    report = d.tick()
    assert victim not in report.users and victim not in d.governor.originals
    assert cpu_max.read_text().split() == world.host.original[victim]["cpu.max"].split()  # given back while her slice lives on
    assert d._stop()
    d.host.monitor.close()
    assert limits_lost(world.host) == []


def test_a_reload_that_lowers_max_uid_past_her_gives_her_originals_back(base):
    """governed.max_uid is part of who is governed: a reload that lowers it below her uid ends
    her governance as raising min_uid does (the monitor is made anew, not kept)."""
    world = make_world(base, 3)
    victim = FIRST_UID + 2
    d = world.daemon()
    d.tick(), d.tick()
    cpu_max = world.host.slice(victim) / "cpu.max"
    assert cpu_max.read_text().split() != world.host.original[victim]["cpu.max"].split()  # governed
    world.write_policy(extra=f"governed: {{max_uid: {victim - 1}}}\n")
    d.reload()
    report = d.tick()
    assert victim not in report.users and victim not in d.governor.originals and FIRST_UID in report.users
    assert cpu_max.read_text().split() == world.host.original[victim]["cpu.max"].split()
    assert d._stop()
    d.host.monitor.close()
    assert limits_lost(world.host) == []


def test_a_logout_between_her_sample_and_her_write_on_systemd_gives_her_originals_back(base):
    """She logs out after her sample, before her cpu.max write of the same tick: her originals
    were dropped unrestored, the governor's limits stayed in her drop-ins, came back at her next
    login and were taken for hers (and "restored" at stop)."""
    models = []

    def backend():
        models.append(DropInSystemd(world.host.user_slice))
        return SystemdBackend(connect=models[-1].connect)

    world = make_world(base, 3, backend_factory=backend)
    victim = FIRST_UID + 1
    unit = f"user-{victim}.slice"
    d = world.daemon()
    d.tick(), d.tick()
    assert models[-1].dropins[unit]["CPUQuotaPerSecUSec"][1] != 2**64 - 1  # the governor's cap
    world.host.log_in(FIRST_UID + 3)  # the allocation moves: her cpu.max is written again
    real = d.host.backend.set_cpu_max
    removed = []

    def set_cpu_max(target, limit):
        if target.uid == victim and not removed:
            removed.append(target)
            shutil.rmtree(world.host.slice(victim))  # she logged out: systemd removed her slice
        return real(target, limit)

    d.host.backend.set_cpu_max = set_cpu_max
    for _ in range(3):
        report = d.tick()
        if removed:
            break
    d.host.backend.set_cpu_max = real
    assert removed and report.users[victim].error.startswith("gone")
    assert victim in d.governor.originals  # kept for the release
    d.tick()
    assert victim not in d.governor.originals
    assert models[-1].dropins[unit]["CPUQuotaPerSecUSec"][1] == 2**64 - 1  # her original, max, in the drop-in
    world.host.log_in(victim)
    models[-1].log_in(unit)
    d.tick()
    assert d.governor.state[victim].ceiling.cpu_max == CpuMax(None)  # read as the admin left it
    assert d._stop()
    d.host.monitor.close()
    assert limits_lost(world.host) == []


def test_the_start_up_restore_of_a_killed_runs_snapshot_keeps_the_margin(base):
    """Her original memory.max (1 GiB) is below what she holds now (1.5 GiB): memory.high takes
    it and memory.max is her use plus the policy's margin (256 MiB) — it was her use exactly."""
    world = make_world(base, 1)
    uid = FIRST_UID
    path = world.host.slice(uid)
    world.runtime_dir.mkdir(parents=True, exist_ok=True)
    save_snapshot(world.snapshot, "cgroupfs",
                  {uid: (Target(uid, Cgroup(path)), LimitSet(CpuMax(None), 100, 0, None, 1024 * MiB, {}))})
    (path / "memory.current").write_text(f"{1536 * MiB}\n")
    (path / "memory.max").write_text("max\n")
    d = world.daemon()
    d.restore_leftovers()
    assert int((path / "memory.max").read_text()) == 1792 * MiB
    assert int((path / "memory.high").read_text()) == 1024 * MiB
    d.host.monitor.close()
