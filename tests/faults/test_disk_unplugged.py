"""An admin's io.max on a disk unplugged while the governor runs: the kernel drops the disk's
line and refuses a write naming it (ENODEV). The restore wrote it and failed, kept her
originals on record and in the snapshot, and every later start failed the same way (the cgroup
audit of 2026-11-26). A refused io.max of a disk no longer on the host is skipped now: its
limit went with it."""

import errno
from pathlib import Path

from cgroups.devices import disk_present
from cgroups.errors import WriteRefused
from cgroups.identity import CgroupDirectory
from tests.faults.harness import FIRST_UID, limits_lost, make_world

HERS = FIRST_UID + 1
GONE = "8:240"  # sdp: on no host of these tests


def test_the_restore_skips_an_io_max_of_an_unplugged_disk(base, monkeypatch):
    assert not disk_present(GONE) and disk_present(GONE, sysfs=Path("/nonexistent")) is False
    world = make_world(base, 3)
    io = world.host.slice(HERS) / "io.max"
    io.write_text(f"{GONE} rbps=1048576 wbps=max riops=max wiops=max\n")  # the admin's
    d = world.daemon()
    d.tick(), d.tick()
    io.write_text("")  # unplugged: the kernel drops its line and refuses writes naming it
    world.host.original[HERS]["io.max"] = ""
    real = CgroupDirectory.write_text

    def write_text(self, name, value):
        if name == "io.max" and value.startswith(GONE + " "):
            raise WriteRefused(self.path / name, value, errno.ENODEV)
        return real(self, name, value)
    monkeypatch.setattr(CgroupDirectory, "write_text", write_text)
    d.tick()
    assert d._stop()
    d.host.monitor.close()
    assert not world.snapshot.exists() and HERS not in d.governor.originals
    assert limits_lost(world.host) == []
