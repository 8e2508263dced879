"""Her threads' CPU demand on this machine's own kernel (cgroup v1: ``tasks`` in the cpu
hierarchy): a busy loop held to 0.3 core by cpu.cfs_quota_us, beside another user's two loops
on the two CPUs, reads as one core — what it would use alone — where cpuacct.usage says ~0.3
and used + throttled_time falls short (monitors/schedstat.py)."""

from __future__ import annotations

import time

import pytest

from cgroups_v1.slice import V1Slice
from monitors.rates import usage_between
from monitors.samplev1 import sample_v1_slice
from tests.v1host.workers import BUSY, start_as


def test_a_throttled_loop_reads_as_one_core(tree):
    alice, bob = 61020, 61021
    mine, other = tree.add_user(alice), tree.add_user(bob)
    (mine["cpu"] / "cpu.cfs_quota_us").write_text("30000")  # 0.3 core of a 100 ms period
    session = mine["cpu"] / "session-1.scope"  # below her slice, as a login session's processes are
    session.mkdir()
    workers = [start_as(alice, {"cpu": session, "cpuacct": mine["cpuacct"]}, BUSY)]
    workers += [start_as(bob, {"cpu": other["cpu"], "cpuacct": other["cpuacct"]}, BUSY) for _ in range(2)]
    try:
        time.sleep(2.0)
        her = V1Slice(tree.mounts, f"{tree.parent}/user.slice/user-{alice}.slice")
        first = sample_v1_slice(her, time.monotonic, cpu_detail=True)
        time.sleep(4.0)
        second = sample_v1_slice(her, time.monotonic, cpu_detail=True)
        usage = usage_between(first, second)
        print(f"\nuid {alice} at 0.3 core beside 2 loops: used {usage.cpu_cores:.3f}, threads' demand "
              f"{usage.thread_demand_cores:.3f}, used + throttled {usage.cpu_cores + usage.throttled_cores:.3f} cores")
        assert set(second.thread_schedstats.by_tid) == {workers[0].pid}
        assert usage.cpu_cores < 0.4
        assert usage.thread_demand_cores == pytest.approx(1.0, rel=0.10)
    finally:
        for w in workers:
            w.kill()
            w.wait()
