"""`drfgov calibrate io` (the installed command) measures what io.max allows, on the real kernel.

Under TCG the virtual disk's own speed follows the host's load, so each test first calibrates
without a limit, then sets io.max to at most a quarter of that and expects the limit back:
the measured share of the unlimited rate, in the same run.
"""

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


def limit_below(unlimited_bytes_per_s: float, most_bytes_per_s: int) -> int:
    """An io.max rate at most a quarter of what the disk did unlimited (so the limit binds)."""
    return min(most_bytes_per_s, int(unlimited_bytes_per_s / 4) // 4096 * 4096)


def test_calibrate_a_block_device_reads_at_the_io_max_limit(cgroup, disk, out_dir):
    whole, _ = disk
    unlimited = calibrate(cgroup, "/dev/vda", out_dir / "cal-dev-free.json")["disks"]["vda"]["read_bytes_per_s"]
    rbps = limit_below(unlimited, 8 * MiB)
    cgroup.set_io_max(whole, IoMax(rbps=rbps))
    doc = calibrate(cgroup, "/dev/vda", out_dir / "cal-dev.json")
    measured = doc["disks"]["vda"]
    print(f"\ncalibrate /dev/vda: unlimited {unlimited / MiB:.2f} MiB/s; under rbps={rbps / MiB:.2f} MiB/s: "
          f"{measured['read_bytes_per_s'] / MiB:.2f} MiB/s")
    assert measured["device"] == whole and "write_bytes_per_s" not in measured
    assert measured["read_bytes_per_s"] / rbps == pytest.approx(1.0, rel=0.15)


def test_calibrate_a_directory_writes_then_reads_a_scratch_file(cgroup, disk, out_dir):
    whole, _ = disk
    subprocess.run(["mkfs.ext4", "-q", "-F", "/dev/vda2"], check=True)
    mnt = Path(tempfile.mkdtemp())
    subprocess.run(["mount", "/dev/vda2", str(mnt)], check=True)
    try:
        free = calibrate(cgroup, str(mnt), out_dir / "cal-dir-free.json")["disks"]["vda"]
        rbps, wbps = limit_below(free["read_bytes_per_s"], 8 * MiB), limit_below(free["write_bytes_per_s"], 4 * MiB)
        cgroup.set_io_max(whole, IoMax(rbps=rbps, wbps=wbps))
        doc = calibrate(cgroup, str(mnt), out_dir / "cal-dir.json")
        measured = doc["disks"]["vda"]
        print(f"\ncalibrate ext4 on /dev/vda2: unlimited read {free['read_bytes_per_s'] / MiB:.2f}, write "
              f"{free['write_bytes_per_s'] / MiB:.2f} MiB/s; under rbps={rbps / MiB:.2f}, wbps={wbps / MiB:.2f} MiB/s: "
              f"read {measured['read_bytes_per_s'] / MiB:.2f}, write {measured['write_bytes_per_s'] / MiB:.2f} MiB/s")
        assert measured["read_bytes_per_s"] / rbps == pytest.approx(1.0, rel=0.15)
        assert measured["write_bytes_per_s"] / wbps == pytest.approx(1.0, rel=0.15)
        assert list(mnt.iterdir()) == [mnt / "lost+found"]  # the scratch file is gone
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
