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


def test_limits_do_not_outlive_her_session_to_come_back_as_her_own():
    """The audit: SetUnitProperties(runtime=true) drop-ins outlive logout, come back at her next
    login and are then read as her originals. Restoring a logged-out user's originals writes
    them into those drop-ins, so her next session starts as it was before the governor."""
    from governor.enforce.apply import restore_originals

    unit, slice_dir = "user-1004.slice", Path("/sys/fs/cgroup/user.slice/user-1004.slice")

    def login():
        subprocess.run(["systemd-run", "--unit=drfgov-session", f"--slice={unit}", "sleep", "infinity"], check=True)
        for _ in range(50):
            if slice_dir.is_dir():
                return Target(1004, Cgroup(slice_dir))
            time.sleep(0.1)
        raise AssertionError(f"{slice_dir} never appeared")

    def logout():
        subprocess.run(["systemctl", "stop", "drfgov-session", unit], check=False)
        for _ in range(50):
            if not slice_dir.exists():
                return
            time.sleep(0.1)

    backend = SystemdBackend()
    target = login()
    original = backend.read(target)
    backend.set_memory(target, MEMORY_HIGH, 123 * 2**20)  # the governor's limit while she works
    assert systemctl_show(unit, "MemoryHigh") == str(123 * 2**20)
    logout()
    assert not slice_dir.exists()
    restored, failed = restore_originals(backend, {1004: (target, original)})
    assert failed == {} and restored == [unit]
    target = login()
    try:
        assert systemctl_show(unit, "MemoryHigh") == "infinity"
        assert backend.read(target) == original  # her next session starts with her own limits
    finally:
        logout()
