"""A slice removed and made again under the same name between two ticks (a logout and a login):
the new slice is a new user's, as at a login (the cgroup audit of 2026-11-26). Its originals
are read from it — the old slice's, written back, lifted an admin's memory.max set on the new
one, during the run and again at stop — and nothing is taken as in force on it: a cpu.max
written to the old slice was taken as in force on the new, unlimited one. Both whether the
daemon notices through a kept-open file (kernfs: ENODEV) or reads by path (no descriptor left
in the budget)."""

import errno
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from cgroups.cgroup import Descriptors
from tests.faults.harness import FIRST_UID, limits_lost, make_world, unlimited_users

HERS = FIRST_UID + 1
GiB = 2**30


@pytest.fixture
def kernfs_like():
    """A directory on tmpfs: like kernfs (a cgroup's id is its inode number, 64 bits, never given
    again) and unlike ext4, which gives a removed directory's inode number to the next one made
    — the test's slice made again would look like the one removed."""
    path = Path(tempfile.mkdtemp(prefix="drfgov-made-again-", dir="/dev/shm"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kernfs_enodev(monkeypatch):
    """As kernfs: a read through a descriptor of a removed cgroup file fails with ENODEV."""
    real = os.pread

    def pread(fd, n, off):
        if os.fstat(fd).st_nlink == 0:
            raise OSError(errno.ENODEV, "No such device")
        return real(fd, n, off)
    monkeypatch.setattr(os, "pread", pread)


def log_in_again(world, admin_memory_max_bytes):
    """Her slice removed and made again, with an admin's memory.max (a drop-in applied at login)."""
    shutil.rmtree(world.host.slice(HERS))
    world.host.log_in(HERS)
    (world.host.slice(HERS) / "memory.max").write_text(f"{admin_memory_max_bytes}\n")
    world.host.original[HERS]["memory.max"] = f"{admin_memory_max_bytes}\n"


@pytest.mark.parametrize("descriptors", [None, 0], ids=["kept-open", "read-by-path"])
def test_a_slice_made_again_is_governed_as_new_and_its_admins_limit_kept(kernfs_like, kernfs_enodev, descriptors):
    world = make_world(kernfs_like, 3)
    d = world.daemon()
    if descriptors is not None:
        d.host.monitor.discovery.descriptors = Descriptors(descriptors)
    d.tick(), d.tick()
    assert HERS not in unlimited_users(world.host)
    log_in_again(world, 1 * GiB)
    for _ in range(4):
        d.tick()
        memory_max = (world.host.slice(HERS) / "memory.max").read_text().strip()
        assert memory_max == str(1 * GiB) or int(memory_max) < GiB  # never lifted
    assert HERS not in unlimited_users(world.host)  # her new slice is capped, not taken as capped
    assert d.governor.originals[HERS][1].memory_max == 1 * GiB
    assert d._stop()
    d.host.monitor.close()
    assert limits_lost(world.host) == []


def test_with_systemd_a_slice_made_again_keeps_her_originals(kernfs_like, kernfs_enodev):
    """systemd's runtime drop-ins outlive the slice and come back on the new one: the governor's
    own limits are there again, so the originals on record stay hers (read afresh, they would
    be the governor's) and are what the drop-ins hold after the stop."""
    from governor.enforce.systemd import SystemdBackend
    from tests.faults.fakebus import DropInSystemd

    models = []

    def backend():
        models.append(DropInSystemd(world.host.user_slice))
        return SystemdBackend(connect=models[-1].connect)

    world = make_world(kernfs_like, 3, backend_factory=backend)
    unit = f"user-{HERS}.slice"
    d = world.daemon()
    d.tick(), d.tick()
    assert models[-1].dropins[unit]["CPUQuotaPerSecUSec"][1] != 2**64 - 1  # the governor's cap
    original = d.governor.originals[HERS][1]
    shutil.rmtree(world.host.slice(HERS))
    world.host.log_in(HERS)
    models[-1].log_in(unit)  # the drop-ins applied to the new slice: the governor's cap again
    for _ in range(3):
        d.tick()
    assert d.governor.originals[HERS][1] == original
    assert d._stop()
    d.host.monitor.close()
    assert models[-1].dropins[unit]["CPUQuotaPerSecUSec"][1] == 2**64 - 1  # her original, max


def test_a_slice_removed_before_its_first_write_is_not_written_nor_restored(kernfs_like, kernfs_enodev):
    """Removed (a logout) between her plan and the first write to her, in one tick: nothing is
    written, her originals are off the record, and the others are governed and given back."""
    world = make_world(kernfs_like, 3)
    d = world.daemon()
    d.tick()
    gov = d.governor
    first_write = gov._write_first

    def removed_first():
        if any(user.uid == HERS for user, *_ in gov._first_writes):
            shutil.rmtree(world.host.slice(HERS))
        first_write()

    gov._write_first = removed_first
    report = d.tick()
    gov._write_first = first_write
    assert report.users[HERS].error == "gone: her slice was removed before the first write to it: nothing written"
    assert HERS not in gov.originals and len(gov.originals) == 2
    d.tick()
    assert d._stop()
    d.host.monitor.close()
    assert limits_lost(world.host) == []


@pytest.mark.parametrize("admins", [True, False], ids=["admins-limit", "same-limits"])
def test_a_slice_made_again_before_its_first_write_is_not_written(kernfs_like, kernfs_enodev, admins):
    """Made again between her plan (her originals read) and the first write to her, in one tick
    (the snapshot's save lies between; the loop audit of 2026-11-27): the plan was for the old
    slice, whose originals are not the new one's. Written, an admin's limits on the new slice
    were lifted and then, read again as the new slice's, the governor's own taken for hers —
    lost for good at stop. With the same limits on both, the governor's were taken for hers all
    the same. Nothing is written; the next tick governs the new slice as new."""
    world = make_world(kernfs_like, 3)
    d = world.daemon()
    d.tick()  # first sight: no interval, nothing planned
    gov = d.governor
    first_write = gov._write_first

    def made_again_first():
        if any(user.uid == HERS for user, *_ in gov._first_writes):
            if admins:
                log_in_again(world, 1 * GiB)
            else:
                shutil.rmtree(world.host.slice(HERS))
                world.host.log_in(HERS)
        first_write()

    gov._write_first = made_again_first
    report = d.tick()
    gov._write_first = first_write
    mine = report.users[HERS]
    assert mine.error.startswith("gone: her slice was made again before the first write") and not mine.written
    assert HERS not in gov.originals and HERS in unlimited_users(world.host)  # nothing written on the new one
    assert [lost for lost in limits_lost(world.host) if lost.startswith(f"user-{HERS}.slice/")] == []
    for _ in range(3):
        d.tick()
        memory_max = (world.host.slice(HERS) / "memory.max").read_text().strip()
        assert not admins or memory_max == str(1 * GiB) or int(memory_max) < GiB  # never lifted
    assert HERS not in unlimited_users(world.host)  # governed as new: capped
    assert gov.originals[HERS][1].memory_max == (1 * GiB if admins else None)
    assert d._stop()
    d.host.monitor.close()
    assert limits_lost(world.host) == []
