"""monitors against the real kernel: a user slice with real work, measured as the governor will.

Rates are checked against the kernel's per-process accounting of the same processes over the
same interval (/proc/PID/stat, /proc/PID/io), not against absolute figures: under TCG they
follow the host's load.
"""

import os
import select
import subprocess
import time

import pytest

from cgroups import Cgroup, CpuMax, IoMax
from monitors.rates import usage_between
from monitors.sample import sample_cgroup
from monitors.users import discover
from tests.vm.conftest import ROOT, kill_all, spawn_in


@pytest.fixture
def user_slice(test_root):
    """``/sys/fs/cgroup/user.slice/user-1000.slice`` as logind would make it (no systemd here)."""
    top = ROOT / "user.slice"
    top.mkdir(exist_ok=True)
    Cgroup(top).enable_controllers(["cpu", "memory", "io"])
    path = top / "user-1000.slice"
    path.mkdir(exist_ok=True)
    yield Cgroup(top), Cgroup(path)
    kill_all(Cgroup(path))
    path.rmdir()


def test_discovery_and_usage_of_a_busy_user(user_slice, disk):
    top, alice = user_slice
    assert [u.uid for u in discover(top)] == [1000]
    whole, _ = disk
    alice.set_io_max(whole, IoMax(rbps=2 * 2**20))
    busy = spawn_in(alice, "sh", "-c", "while :; do :; done")
    hog = spawn_in(alice, "python3", "-c", "b = bytearray(48 * 2**20); import time; time.sleep(600)")
    reader = spawn_in(alice, "dd", "if=/dev/vda", "of=/dev/null", "bs=64k", "count=10000", "iflag=direct")
    deadline = time.monotonic() + 180  # under a loaded TCG host Python takes tens of seconds to start
    while alice.memory_current() < 48 * 2**20 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.0)
    procs = (busy, hog, reader)
    first, first_procs = sample_cgroup(alice, time.monotonic), [per_process(p.pid) for p in procs]
    time.sleep(4.0)
    second, second_procs = sample_cgroup(alice, time.monotonic), [per_process(p.pid) for p in procs]
    usage = usage_between(first, second)
    read = usage.disks[whole].read_bytes_per_s
    proc_cores = sum(b[0] - a[0] for a, b in zip(first_procs, second_procs)) / usage.interval_s
    proc_read = (second_procs[2][1] - first_procs[2][1]) / usage.interval_s
    print(f"\nuser-1000: {usage.cpu_cores:.2f} cores (its processes: {proc_cores:.2f}), "
          f"{usage.memory_used_bytes / 2**20:.1f} MiB used, {read / 2**20:.2f} MiB/s read (dd: {proc_read / 2**20:.2f}), "
          f"cpu some {usage.stall_some_fraction['cpu']:.1%} of the interval")
    assert usage.cpu_cores / proc_cores == pytest.approx(1.0, rel=0.10)
    assert 48 * 2**20 <= usage.memory_used_bytes <= 80 * 2**20
    assert read / proc_read == pytest.approx(1.0, rel=0.10)
    for p in (busy, hog, reader):
        p.kill()


def test_thread_accounting_reads_a_throttled_loop_as_one_core(user_slice):
    """Under a 0.3-core quota, beside two loops of another user on the guest's two CPUs, her
    busy loop (in a scope below her slice, as a login session's would be) uses ~0.3 core and
    waits the rest: its thread accounting says one core, what it would use alone. cpu.stat's
    used + throttled is printed beside it (the estimate without thread accounting)."""
    top, alice = user_slice
    alice.set_cpu_max(CpuMax.for_cores(0.3))
    scope = alice.path / "session-1.scope"
    scope.mkdir()
    other = top.path / "user-1001.slice"
    other.mkdir()
    loops = [spawn_in(Cgroup(scope), "sh", "-c", "while :; do :; done")]
    loops += [spawn_in(Cgroup(other), "sh", "-c", "while :; do :; done") for _ in range(2)]
    try:
        time.sleep(2.0)
        first = sample_cgroup(alice, time.monotonic, cpu_detail=True)
        time.sleep(4.0)
        second = sample_cgroup(alice, time.monotonic, cpu_detail=True)
        usage = usage_between(first, second)
        print(f"\nuser-1000 at 0.3 core beside 2 loops: used {usage.cpu_cores:.3f}, threads' demand "
              f"{usage.thread_demand_cores:.3f}, used + throttled {usage.cpu_cores + usage.throttled_cores:.3f} cores; "
              f"{len(second.thread_schedstats.by_tid)} thread(s) read")
        assert set(second.thread_schedstats.by_tid) == {loops[0].pid}
        assert usage.cpu_cores < 0.4
        assert usage.thread_demand_cores == pytest.approx(1.0, rel=0.10)
    finally:
        for p in loops:
            p.kill()
            p.wait()
        kill_all(Cgroup(scope))
        scope.rmdir()
        kill_all(Cgroup(other))
        other.rmdir()


def per_process(pid: int) -> tuple[float, int]:
    """``(CPU seconds, bytes read from storage)`` of one process so far (proc(5): stat fields
    14 and 15 in clock ticks; io ``read_bytes``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    with open(f"/proc/{pid}/io") as f:
        read = next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))
    return cpu_s, read


def test_a_sleeping_user_is_still_and_her_work_moves_what_unmoved_reads(user_slice):
    """The premise of still users (governor/control/loop.py, issue 16) on the real kernel: a
    slice whose one process sleeps, holding memory, reads the same a second apart in every
    reading CgroupSample.readings_equal compares (the rstat-flushed cpu.stat, memory.current,
    memory.stat's file and shmem, memory.events, io.stat, the PSI totals), so ``unmoved``
    holds; a command run in it moves cpu.stat, and a direct read from the disk io.stat too."""
    from monitors.sample import unmoved

    _, alice = user_slice
    sleeper = spawn_in(alice, "python3", "-c", "import time; b = bytearray(8 << 20); print('ready', flush=True); "
                       "time.sleep(600)", stdout=subprocess.PIPE)
    try:
        # started and allocated (a Python start takes seconds to tens of them under TCG), then
        # asleep past the memory controller's periodic stats flush (every 2 s: mm/memcontrol.c)
        said = sleeper.stdout.readline() if select.select([sleeper.stdout], [], [], 300)[0] else b"(nothing in 300 s)"
        assert said == b"ready\n", said
        time.sleep(2.5)
        # The kernel may still charge a sleeping slice now and then (CI, stop 31: memory.current
        # +376 KiB over a second in which none of her tasks ran, cpu.stat unchanged). The governor
        # then reads her in full once more — a cost, never a wrong reading — so the premise is
        # that she reads still, not that every second of hers does: one of three pairs must.
        second = sample_cgroup(alice, time.monotonic)
        for _ in range(3):
            time.sleep(1.0)
            first, second = second, sample_cgroup(alice, time.monotonic)
            print(f"asleep: cpu {second.cpu.usage_usec - first.cpu.usage_usec} µs, memory "
                  f"{second.memory_current_bytes - first.memory_current_bytes} B in {second.time_s - first.time_s:.2f} s")
            if second.readings_equal(first):
                break
        assert second.readings_equal(first) and unmoved(alice, second, io_detail=True)
        spawn_in(alice, "true").wait(timeout=60)
        assert not unmoved(alice, second, io_detail=False)
        third = sample_cgroup(alice, time.monotonic)
        spawn_in(alice, "dd", "if=/dev/vda", "of=/dev/null", "bs=64k", "count=16", "iflag=direct").wait(timeout=60)
        assert not unmoved(alice, third, io_detail=True)
        now = sample_cgroup(alice, time.monotonic)
        assert now.io != third.io and now.cpu != third.cpu
    finally:
        sleeper.kill()
        sleeper.wait()
