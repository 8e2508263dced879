"""The systemd backend on a real systemd 252 host: real user-UID.slice units, real D-Bus."""

import subprocess
import time
from pathlib import Path

import pytest

from cgroups import Cgroup
from governor.enforce import SystemdBackend, make_backend
from governor.enforce.model import MEMORY_HIGH, Target
from tests.backend_conformance import check_gone, check_writes

SLICE = Path("/sys/fs/cgroup/user.slice/user-1000.slice")


@pytest.fixture(scope="module")
def slice_1000():
    """user-1000.slice made by systemd itself: a transient service placed in it."""
    subprocess.run(["systemd-run", "--unit=drfgov-sleeper", "--slice=user-1000.slice", "sleep", "infinity"], check=True)
    for _ in range(50):
        if SLICE.is_dir():
            break
        time.sleep(0.1)
    yield Target(1000, Cgroup(SLICE))
    subprocess.run(["systemctl", "stop", "drfgov-sleeper"], check=False)


@pytest.fixture(scope="module")
def root_disk():
    return Path("/sys/class/block/vda/dev").read_text().strip()


def systemctl_show(unit: str, prop: str) -> str:
    return subprocess.run(["systemctl", "show", "-p", prop, "--value", unit], capture_output=True, text=True).stdout.strip()


def test_auto_picks_systemd_here():
    backend, why = make_backend("auto")
    assert backend.name == "systemd" and "answers" in why


def test_systemd_backend_conformance(slice_1000, root_disk):
    check_writes(SystemdBackend(), slice_1000, root_disk)


def test_systemd_itself_holds_the_settings(slice_1000):
    backend = SystemdBackend()
    backend.set_memory(slice_1000, MEMORY_HIGH, 123 * 2**20)
    assert systemctl_show("user-1000.slice", "MemoryHigh") == str(123 * 2**20)
    assert Path("/run/systemd/system.control/user-1000.slice.d").is_dir()  # runtime=true: gone at reboot
    backend.set_memory(slice_1000, MEMORY_HIGH, None)
    assert systemctl_show("user-1000.slice", "MemoryHigh") == "infinity"


def test_vanished_slice(slice_1000):
    check_gone(SystemdBackend(), Target(4242, Cgroup(SLICE.parent / "user-4242.slice")))
