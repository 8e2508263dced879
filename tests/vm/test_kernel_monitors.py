"""monitors against the real kernel: a user slice with real work, measured as the governor will."""

import time

import pytest

from cgroups import Cgroup, IoMax
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
    time.sleep(2.0)
    first = sample_cgroup(alice, time.monotonic)
    time.sleep(4.0)
    second = sample_cgroup(alice, time.monotonic)
    usage = usage_between(first, second)
    read = usage.disks[whole].read_bytes_per_s
    print(f"\nuser-1000: {usage.cpu_cores:.2f} cores, {usage.memory_used_bytes / 2**20:.1f} MiB used, "
          f"{read / 2**20:.2f} MiB/s read, cpu some avg10 {usage.pressure_some_avg10['cpu']:.1f}%")
    assert 0.8 <= usage.cpu_cores <= 1.6  # one busy loop, plus dd and python on 2 CPUs
    assert 48 * 2**20 <= usage.memory_used_bytes <= 80 * 2**20
    assert read == pytest.approx(2 * 2**20, rel=0.15)
    for p in (busy, hog, reader):
        p.kill()
