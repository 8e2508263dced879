"""Her threads' CPU demand on this machine's own kernel (cgroup v1: ``tasks`` in the cpu
hierarchy): a busy loop held to 0.3 core by cpu.cfs_quota_us, beside another user's two loops
on the two CPUs, reads as one core — what it would use alone — where cpuacct.usage says ~0.3
and used + throttled_time falls short (monitors/schedstat.py)."""

from __future__ import annotations

import time

import pytest

from cgroups_v1.slice import V1Slice
from monitors.model import ThreadSchedstats
from monitors.rates import thread_demand, usage_between
from monitors.samplev1 import sample_v1_slice
from tests.v1host.workers import BUSY, start_as


def measure(tree, uid):
    """Her slice sampled with her threads 2 s after her workers started, and again 4 s later."""
    her = V1Slice(tree.mounts, f"{tree.parent}/user.slice/user-{uid}.slice")
    time.sleep(2.0)
    first = sample_v1_slice(her, time.monotonic, cpu_detail=True)
    time.sleep(4.0)
    second = sample_v1_slice(her, time.monotonic, cpu_detail=True)
    return first, second, usage_between(first, second)


def test_a_throttled_loop_reads_as_one_core(tree):
    alice, bob = 61020, 61021
    mine, other = tree.add_user(alice), tree.add_user(bob)
    (mine["cpu"] / "cpu.cfs_quota_us").write_text("30000")  # 0.3 core of a 100 ms period
    session = mine["cpu"] / "session-1.scope"  # below her slice, as a login session's processes are
    session.mkdir()
    workers = [start_as(alice, {"cpu": session, "cpuacct": mine["cpuacct"]}, BUSY)]
    workers += [start_as(bob, {"cpu": other["cpu"], "cpuacct": other["cpuacct"]}, BUSY) for _ in range(2)]
    try:
        first, second, usage = measure(tree, alice)
        print(f"\nuid {alice} at 0.3 core beside 2 loops: used {usage.cpu_cores:.3f}, threads' demand "
              f"{usage.thread_demand_cores:.3f}, used + throttled {usage.cpu_cores + usage.throttled_cores:.3f} cores")
        assert set(second.thread_schedstats.by_tid) == {workers[0].pid}
        assert usage.cpu_cores < 0.4
        assert usage.thread_demand_cores == pytest.approx(1.0, rel=0.10)
    finally:
        for w in workers:
            w.kill()
            w.wait()


SLEEPER = "import time\nwhile True:\n    time.sleep(0.001)\n"


def test_a_throttled_thread_that_blocks_reads_as_what_it_ran(tree):
    """A thread that sleeps 1 ms at a time, beside her own busy loop that eats her 0.05-core
    quota, waits (throttled) most of the time, yet blocks hundreds of times a second: it counts
    what it ran, not a core (the scenario tier's reader, counted by its waits, read as wanting
    0.4 core); her demand is her loop's core plus that."""
    uid = 61022
    mine = tree.add_user(uid)
    (mine["cpu"] / "cpu.cfs_quota_us").write_text("5000")
    where = {"cpu": mine["cpu"], "cpuacct": mine["cpuacct"]}
    sleeper, loop = start_as(uid, where, SLEEPER), start_as(uid, where, BUSY)
    try:
        first, second, usage = measure(tree, uid)
        alone = [ThreadSchedstats(s.thread_schedstats.time_s, {sleeper.pid: s.thread_schedstats.by_tid[sleeper.pid]})
                 for s in (first, second)]
        (run0, wait0, switches0), (run1, wait1, switches1) = (a.by_tid[sleeper.pid] for a in alone)
        ran, waited = ((b - a) / 1e9 / usage.interval_s for a, b in ((run0, run1), (wait0, wait1)))
        its_demand = thread_demand(*alone).cores
        print(f"\nuid {uid} at 0.05 core, a loop and a 1 ms sleeper: used {usage.cpu_cores:.3f}; the sleeper waited "
              f"{waited:.2f} s/s, ran {ran:.3f} s/s, blocked {switches1 - switches0} times, demand {its_demand:.3f}; hers "
              f"{usage.thread_demand_cores:.3f} cores")
        # held back far more than it ran (how far depends on the host's load: 0.14-0.3 s/s seen)
        assert waited > 5 * ran and switches1 > switches0
        assert its_demand < 0.05
        assert usage.thread_demand_cores == pytest.approx(1.0 + its_demand, abs=0.1)
    finally:
        for w in (sleeper, loop):
            w.kill()
            w.wait()
