"""`drfgov calibrate io` (the installed command) measures what io.max allows, on the real kernel."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cgroups import IoMax
from tests.vm.conftest import spawn_in

DRFGOV = str(Path(sys.executable).parent / "drfgov")
MiB = 2**20


def calibrate(cgroup, target: str, out: Path) -> dict:
    proc = spawn_in(cgroup, "sh", "-c", f"{DRFGOV} calibrate io {target} --size-mib 16 --json > {out}")
    assert proc.wait(timeout=300) == 0
    return json.loads(out.read_text())


def test_calibrate_a_block_device_reads_at_the_io_max_limit(cgroup, disk, out_dir):
    whole, _ = disk
    cgroup.set_io_max(whole, IoMax(rbps=8 * MiB))
    doc = calibrate(cgroup, "/dev/vda", out_dir / "cal-dev.json")
    measured = doc["disks"]["vda"]
    print(f"\ncalibrate /dev/vda under rbps=8 MiB/s: {measured['read_bytes_per_s'] / MiB:.2f} MiB/s")
    assert measured["device"] == whole and "write_bytes_per_s" not in measured
    assert measured["read_bytes_per_s"] == pytest.approx(8 * MiB, rel=0.15)


def test_calibrate_a_directory_writes_then_reads_a_scratch_file(cgroup, disk, out_dir):
    whole, _ = disk
    subprocess.run(["mkfs.ext4", "-q", "-F", "/dev/vda2"], check=True)
    mnt = Path(tempfile.mkdtemp())
    subprocess.run(["mount", "/dev/vda2", str(mnt)], check=True)
    try:
        cgroup.set_io_max(whole, IoMax(rbps=8 * MiB, wbps=4 * MiB))
        doc = calibrate(cgroup, str(mnt), out_dir / "cal-dir.json")
        measured = doc["disks"]["vda"]
        print(f"\ncalibrate ext4 on /dev/vda2 under rbps=8, wbps=4 MiB/s: read {measured['read_bytes_per_s'] / MiB:.2f}, "
              f"write {measured['write_bytes_per_s'] / MiB:.2f} MiB/s")
        assert measured["read_bytes_per_s"] == pytest.approx(8 * MiB, rel=0.15)
        assert measured["write_bytes_per_s"] == pytest.approx(4 * MiB, rel=0.15)
        assert list(mnt.iterdir()) == [mnt / "lost+found"]  # the scratch file is gone
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
