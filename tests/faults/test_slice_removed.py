"""A slice removed mid-tick (she logged out while the daemon read or wrote it), at each access
the tick makes to it; she logs in again later. No tick fails, the others keep their limits,
she is governed again after her login, and the stop restores every original."""

import shutil

import pytest

from cgroups import Cgroup
from tests.faults.harness import FIRST_UID, limits_lost, make_world, record_figures, unlimited_users

VICTIM = FIRST_UID + 1


def accesses_in_tick_2(base):
    """How many reads and writes tick 2 (the first that writes limits) makes to VICTIM's slice."""
    world = make_world(base / "count", 3)
    d = world.daemon()
    seen = []
    d.tick()
    with pytest.MonkeyPatch.context() as mp:
        for name in ("_read_bytes", "write_text"):
            real = getattr(Cgroup, name)
            mp.setattr(Cgroup, name, lambda self, *a, real=real, name=name:
                       (seen.append(name) if self.path == world.host.slice(VICTIM) else None, real(self, *a))[1])
        d.tick()
    d.governor.restore()
    d.host.monitor.close()
    return seen


def test_a_slice_removed_at_each_access_of_a_tick(base):
    accesses = accesses_in_tick_2(base)
    assert accesses.count("write_text") >= 5
    problems, missed = [], 0
    for j in range(1, len(accesses) + 1):
        world = make_world(base / f"at{j}", 3)
        d = world.daemon()
        missed += d._guarded_tick() is None
        count = [0]
        with pytest.MonkeyPatch.context() as mp:
            for name in ("_read_bytes", "write_text"):
                real = getattr(Cgroup, name)

                def access(self, *args, real=real):
                    if self.path == world.host.slice(VICTIM):
                        count[0] += 1
                        if count[0] == j:
                            shutil.rmtree(self.path)  # as the kernel's rmdir: her files go with it
                    return real(self, *args)
                mp.setattr(Cgroup, name, access)
            missed += d._guarded_tick() is None
        missed += d._guarded_tick() is None
        others = [u for u in unlimited_users(world.host) if u != VICTIM]
        fresh = make_world(base / f"fresh{j}", 3).host.slice(VICTIM)  # she logs in again: a new slice
        shutil.copytree(fresh, world.host.slice(VICTIM))
        for _ in range(3):
            missed += d._guarded_tick() is None
        unlimited = unlimited_users(world.host)
        status = d._stop()
        d.host.monitor.close()
        lost = limits_lost(world.host)
        if others or unlimited or not status or lost:
            problems.append(f"access {j} ({accesses[j - 1]}): others unlimited {others}, after login "
                            f"unlimited {unlimited}, stop ok {status}, lost {lost}")
    record_figures("slice_removed", "a slice removed at each access of a tick, then her login again",
                   len(accesses), sum(1 for p in problems if "lost []" not in p), missed, 0)
    assert not problems and missed == 0
