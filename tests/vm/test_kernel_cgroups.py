"""The cgroup v2 layer against Debian's real kernel (runs inside the VM; see conftest.py).

Each test prints what it measured (pytest -s shows it, the CI log keeps it). Under TCG the
guest's CPU and disk speeds follow the host's load: a limit is checked against what the same
work did unlimited in the same test, set well below it.
"""

import errno
import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from cgroups import CgroupGone, CpuMax, InvalidLimit, IoMax, WriteRefused
from cgroups.devices import whole_disks
from cgroups.mount import find_cgroup2
from tests.vm.conftest import cores_used, direct_read, spawn_in

BUSY = ["sh", "-c", "while :; do :; done"]


def test_the_guest_has_a_real_cgroup2_hierarchy():
    hierarchy = find_cgroup2()
    assert hierarchy.root == Path("/sys/fs/cgroup")
    assert not hierarchy.missing and {"cpu", "memory", "io"} <= hierarchy.controllers


def test_every_reader_parses_what_the_kernel_writes(cgroup, disk):
    whole, _ = disk
    cgroup.set_io_max(whole, IoMax(rbps=50_000_000))
    proc = spawn_in(cgroup, "dd", "if=/dev/vda", "of=/dev/null", "bs=64k", "count=64", "iflag=direct")
    proc.wait(timeout=60)
    stat = cgroup.cpu_stat()
    assert stat.usage_usec > 0 and stat.nr_throttled is not None
    assert cgroup.cpu_max() == CpuMax(None, 100000) and cgroup.cpu_weight() == 100
    assert cgroup.memory_current() >= 0 and "anon" in cgroup.memory_stat()
    assert cgroup.memory_events().oom_kill == 0
    assert (cgroup.memory_low(), cgroup.memory_high(), cgroup.memory_max()) == (0, None, None)
    io = cgroup.io_stat()[whole]
    assert io.rbytes == 64 * 65536 and io.rios >= 64
    assert cgroup.io_max() == {whole: IoMax(rbps=50_000_000)}
    for controller in ("cpu", "memory", "io"):
        pressure = cgroup.pressure(controller)
        assert pressure.some.total_usec >= 0 and pressure.full is not None
    assert cgroup.procs() == [] and {"cpu", "memory", "io"} <= cgroup.controllers()


def test_written_limits_read_back(cgroup, disk):
    whole, _ = disk
    cgroup.set_cpu_max(CpuMax(250000, 100000))  # 2.5 cores: quota may exceed period
    cgroup.set_cpu_weight(250)
    cgroup.set_memory_low(16 * 2**20)
    cgroup.set_memory_high(300 * 2**20)
    cgroup.set_memory_max(400 * 2**20)
    cgroup.set_io_max(whole, IoMax(rbps=2**20, wiops=100))
    assert cgroup.cpu_max() == CpuMax(250000, 100000) and cgroup.cpu_weight() == 250
    assert (cgroup.memory_low(), cgroup.memory_high(), cgroup.memory_max()) == (16 * 2**20, 300 * 2**20, 400 * 2**20)
    assert cgroup.io_max() == {whole: IoMax(rbps=2**20, wiops=100)}
    cgroup.set_io_max(whole, IoMax())  # all max: the kernel drops the line
    cgroup.set_cpu_max(CpuMax(None))
    assert cgroup.io_max() == {} and cgroup.cpu_max().quota_usec is None


def test_cpu_max_half_a_core_with_two_busy_processes(cgroup):
    procs = [spawn_in(cgroup, *BUSY) for _ in range(2)]
    time.sleep(1.0)  # let both start and settle
    unlimited = cores_used(cgroup, 3.0)
    limit = min(0.5, unlimited / 3)  # well below what they get unlimited, whatever the host's load
    cgroup.set_cpu_max(CpuMax.for_cores(limit))
    time.sleep(0.5)
    before, t0 = cgroup.cpu_stat(), time.monotonic()
    time.sleep(6.0)
    after, t1 = cgroup.cpu_stat(), time.monotonic()
    cores = (after.usage_usec - before.usage_usec) / 1e6 / (t1 - t0)
    throttled = after.nr_throttled - before.nr_throttled
    print(f"\n2 busy processes: {unlimited:.3f} cores unlimited; under cpu.max {limit:.3f} cores: {cores:.3f} cores "
          f"over {t1 - t0:.1f} s, {throttled} throttled periods")
    for p in procs:
        assert p.poll() is None  # throttled, never killed
    assert cores / limit == pytest.approx(1.0, rel=0.10)
    assert throttled > 0


def test_memory_high_throttles_a_growing_allocator_without_oom(cgroup, out_dir):
    high = 64 * 2**20
    cgroup.set_memory_high(high)
    grow = (
        "import time\n"
        "chunks = []\n"
        "for i in range(300):\n"  # wants 300 MiB, one MiB at a time
        "    chunks.append(bytearray(2**20))\n"
        "    time.sleep(0.005)\n"
        "time.sleep(600)\n"
    )
    proc = spawn_in(cgroup, "python3", "-c", grow)
    # watched until memory.high first holds it back (a Python start takes seconds to tens of
    # them under TCG), then 5 s more
    peak, deadline, held_s = 0, time.monotonic() + 300, None
    while time.monotonic() < (deadline if held_s is None else held_s + 5) and proc.poll() is None:
        peak = max(peak, cgroup.memory_current())
        if held_s is None and cgroup.memory_events().high > 0:
            held_s = time.monotonic()
        time.sleep(0.2)
    events = cgroup.memory_events()
    print(f"\nmemory.high 64 MiB, allocator wanting 300 MiB: peak memory.current {peak / 2**20:.1f} MiB, "
          f"memory.events high={events.high} max={events.max} oom={events.oom} oom_kill={events.oom_kill}")
    assert proc.poll() is None, "the allocator died"
    assert events.high > 0 and events.oom == 0 and events.oom_kill == 0
    assert peak < 2 * high  # held back: far below the 300 MiB it wants


def test_io_max_rbps_caps_direct_reads(cgroup, disk):
    whole, _ = disk
    unlimited = direct_read(cgroup, "/dev/vda")
    limit = min(4 * 2**20, int(unlimited / 4) // 4096 * 4096)  # binds, whatever the host's load
    cgroup.set_io_max(whole, IoMax(rbps=limit))
    before = cgroup.io_stat().get(whole)
    proc = spawn_in(cgroup, "dd", "if=/dev/vda", "of=/dev/null", "bs=64k", "count=320", "iflag=direct",  # 20 MiB
                    stderr=subprocess.PIPE, env={**os.environ, "LC_ALL": "C"})
    _, report = proc.communicate(timeout=120)
    took = re.search(rb"copied, ([0-9.e+-]+) s", report)
    assert proc.returncode == 0 and took, report
    elapsed = float(took[1])  # dd's own time: no process start in it
    read = cgroup.io_stat()[whole].rbytes - (before.rbytes if before else 0)
    rate = read / elapsed
    print(f"\nunlimited {unlimited / 2**20:.2f} MiB/s; io.max rbps={limit}: read {read / 2**20:.1f} MiB in "
          f"{elapsed:.2f} s = {rate / 2**20:.2f} MiB/s ({100 * (rate / limit - 1):+.1f}%)")
    assert read == 20 * 2**20
    assert abs(rate / limit - 1) <= 0.15


def test_io_max_on_a_partition_is_refused_with_enodev(cgroup, disk):
    _, partition = disk
    with pytest.raises(WriteRefused) as info:
        cgroup.set_io_max(partition, IoMax(rbps=2**20))
    assert info.value.errno == errno.ENODEV and "whole disks" in str(info.value)
    # the resolver turns the partition into the disk io.max accepts
    assert [d.device for d in whole_disks("/dev/vda1")] == [disk[0]]


def test_quota_under_1ms_is_refused_by_us_and_by_the_kernel(cgroup):
    with pytest.raises(InvalidLimit):
        cgroup.set_cpu_max(CpuMax(500, 100000))
    with pytest.raises(WriteRefused) as info:
        cgroup.write_text("cpu.max", "500 100000")  # bypass our validation: the kernel says EINVAL
    assert info.value.errno == errno.EINVAL
    with pytest.raises(WriteRefused):
        cgroup.write_text("cpu.max", "100000 2000000")  # period over 1 s
    assert cgroup.cpu_max() == CpuMax(None, 100000)  # nothing changed


def test_vanished_cgroup(test_root):
    path = test_root.path / "short-lived"
    path.mkdir()
    cg = type(test_root)(path)
    path.rmdir()
    with pytest.raises(CgroupGone):
        cg.set_cpu_max(CpuMax(50000))
    with pytest.raises(CgroupGone):
        cg.cpu_stat()


def test_files_kept_open_are_reread_with_pread_and_report_removal(test_root):
    """keep_open: seq_file files re-read at offset 0 give fresh values; rmdir → CgroupGone."""
    from cgroups import Cgroup

    path = test_root.path / "kept-open"
    path.mkdir()
    cg = Cgroup(path, keep_open=True)
    proc = spawn_in(cg, *BUSY)
    try:
        deadline = time.monotonic() + 120
        while not cg.procs() and time.monotonic() < deadline:  # until it has moved itself in
            time.sleep(0.05)
        first = cg.cpu_stat().usage_usec
        pressure = cg.pressure("cpu")
        time.sleep(0.5)
        second = cg.cpu_stat().usage_usec
        assert second > first and cg.pressure("cpu").some.total_usec >= pressure.some.total_usec
        assert cg.memory_current() > 0 and set(cg._fds) >= {"cpu.stat", "cpu.pressure", "memory.current"}
        print(f"\nkept-open cpu.stat usage_usec {first} → {second} over 0.5 s")
    finally:
        proc.kill()
        proc.wait()
    for _ in range(50):
        try:
            path.rmdir()
            break
        except OSError:
            time.sleep(0.1)
    with pytest.raises(CgroupGone):
        cg.cpu_stat()
    cg.close()
