"""ProcMonitor feeds the control loop from /proc: injected processes, then real ones on this host."""

import os
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


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start processes as other uids")
def test_the_loop_plans_for_real_processes_of_two_uids():
    """Two busy processes under uids 50001 and 50002 on this host, measured from /proc."""
    procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"], preexec_fn=lambda uid=uid: os.setuid(uid))
             for uid in (50001, 50002)]
    try:
        monitor = ProcMonitor(time.monotonic, min_uid=50000)
        backend = DryRunBackend()
        gov = Governor(Policy(mode="dry-run").loop_settings(), Capacity(float(len(os.sched_getaffinity(0))), 2**34), monitor, backend,
                       time.monotonic, lambda u: {"cpu": 2.0 if u.uid == 50001 else 1.0, "memory": 1.0, "io": 1.0})
        gov.tick()
        time.sleep(2.0)
        report = gov.tick()
    finally:
        for p in procs:
            p.kill()
            p.wait()
    busy = {uid: report.users[uid].usage[CPU] for uid in (50001, 50002)}
    print(f"\n/proc-measured use of two busy uids: {busy}")
    # each spins a whole core, or what a loaded host (a VM tier beside us) leaves: the two loops
    # get alike shares, both measured, and never more than the CPUs there are
    assert all(cores > 0.02 for cores in busy.values()) and 0.5 <= busy[50001] / busy[50002] <= 2.0, busy
    assert sum(busy.values()) <= gov.capacity.cpu_cores * 1.1, busy
    assert {r.unit for r in backend.recorded} == {"user-50001.slice", "user-50002.slice"}
    assert report.users[50001].limits.cpu_weight == 200 and report.users[50002].limits.cpu_weight == 100
