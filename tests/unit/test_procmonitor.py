"""ProcMonitor feeds the control loop from /proc: injected processes, then real ones on this host."""

import os
import random
import subprocess
import time

import pytest

from governor.enforce import DryRunBackend
from governor.control.loop import Governor
from governor.control.resources import CPU
from governor.control.model import Capacity
from governor.config.policy import Policy
from monitors.procfs import ProcSampler
from monitors.procmonitor import PROC_DISK, ProcMonitor
from tests.unit.test_monitors import _proc


def test_cumulative_samples_from_per_interval_usage():
    table = [[_proc(1, 1000, 10.0, read=0), _proc(2, 1001, 5.0)]]
    clock = iter([0.0, 0.0, 2.0, 2.0, 4.0, 4.0]).__next__
    monitor = ProcMonitor(clock, sampler=ProcSampler(clock, min_uid=1000, processes=lambda: table[0],
                                                     wall_clock=lambda: 0.0))
    monitor.users()
    table[0] = [_proc(1, 1000, 12.0, read=8192), _proc(2, 1001, 5.0)]
    users = monitor.users()
    alice = next(u for u in users if u.uid == 1000)
    s = monitor.sample(alice)
    assert s.cpu.usage_usec == 2_000_000 and s.io[PROC_DISK].rbytes == 8192
    table[0] = [_proc(2, 1001, 5.5)]  # uid 1000's processes are gone
    assert [u.uid for u in monitor.users()] == [1001]


def _processes_by_uid() -> dict[int, set[int]]:
    """Every running process's pid under each uid it has (real, effective, saved, filesystem), from /proc."""
    out: dict[int, set[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as status:
                uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
        except (OSError, StopIteration):  # gone meanwhile
            continue
        for uid in map(int, uids):
            out.setdefault(uid, set()).add(int(pid))
    return out


def _two_unused_uids() -> tuple[int, int]:
    """Two adjacent uids that no running process has: any other process of theirs (an unrelated
    one on this host, another test's fixed uids 50001/50002, a second run of this test beside
    us) would be measured and planned with ours. Picked at random in 51000…59998, so that two
    runs at once do not pick the same."""
    in_use = _processes_by_uid()
    rng = random.Random()
    for _ in range(1000):
        first = rng.randrange(51000, 59998)
        if first not in in_use and first + 1 not in in_use:
            return first, first + 1
    pytest.skip("no two adjacent uids in 51000…59999 without a process")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start processes as other uids")
def test_the_loop_plans_for_real_processes_of_two_uids():
    """Two busy processes under two uids no other process has, on this host, measured from /proc:
    the monitor governs exactly those two uids, and they hold only the processes started here."""
    heavy, light = uids = _two_unused_uids()
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], preexec_fn=lambda uid=uid: os.setuid(uid))
             for uid in uids]
    try:
        monitor = ProcMonitor(time.monotonic, min_uid=heavy, max_uid=light)
        backend = DryRunBackend()
        gov = Governor(Policy(mode="dry-run").loop_settings(), Capacity(float(len(os.sched_getaffinity(0))), 2**34),
                       monitor, backend, time.monotonic,
                       lambda u: {"cpu": 2.0 if u.uid == heavy else 1.0, "memory": 1.0, "io": 1.0})
        gov.tick()
        time.sleep(2.0)
        report = gov.tick()
        running = _processes_by_uid()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    # what was measured is these two processes and nothing else (none came to these uids meanwhile)
    assert {uid: running.get(uid) for uid in uids} == {uid: {p.pid} for uid, p in zip(uids, procs)}, running
    busy = {uid: report.users[uid].usage[CPU] for uid in uids}
    print(f"\n/proc-measured use of two busy uids: {busy}")
    # each spins a whole core, or what a loaded host (a VM tier beside us) leaves: the two loops
    # get alike shares, both measured, and never more than the CPUs there are
    assert all(cores > 0.02 for cores in busy.values()) and 0.5 <= busy[heavy] / busy[light] <= 2.0, busy
    assert sum(busy.values()) <= gov.capacity.cpu_cores * 1.1, busy
    assert {r.unit for r in backend.recorded} == {f"user-{heavy}.slice", f"user-{light}.slice"}
    assert report.users[heavy].limits.cpu_weight == 200 and report.users[light].limits.cpu_weight == 100
