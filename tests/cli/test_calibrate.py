"""`drfgov calibrate io` through the installed command (the VM tier checks its accuracy)."""

import json
import os
import re


def test_calibrate_a_directory_on_this_hosts_disk(drfgov, tmp_path):
    out = drfgov("calibrate", "io", tmp_path, "--size-mib", "8", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["size_bytes"] == 8 * 2**20 and doc["disks"]
    for disk in doc["disks"].values():
        assert disk["read_bytes_per_s"] > 0 and disk["write_bytes_per_s"] > 0 and ":" in disk["device"]
    assert list(tmp_path.iterdir()) == []  # scratch file removed


def test_calibrate_prints_a_config_snippet(drfgov, tmp_path):
    out = drfgov("calibrate", "io", tmp_path, "--size-mib", "4")
    assert out.returncode == 0, out.stderr
    assert "capacity:\n  disks:\n" in out.stdout and "read_bytes_per_s:" in out.stdout


def test_calibrate_on_tmpfs_is_a_clear_error(drfgov):
    out = drfgov("calibrate", "io", "/dev/shm")
    assert out.returncode == 2 and out.stdout == ""
    assert re.fullmatch(r"drfgov: error: /dev/shm: on a filesystem with no block device \(device 0:\d+\); "
                        r"nothing to limit with io.max", out.stderr.strip()), out.stderr


def test_calibrate_missing_path(drfgov, tmp_path):
    out = drfgov("calibrate", "io", tmp_path / "nope")
    assert out.returncode == 2 and "No such file or directory" in out.stderr and "Traceback" not in out.stderr


def test_a_file_another_user_made_first_neither_stops_calibration_nor_is_removed(tmp_path):
    """The audit: the scratch name was .drfgov-calibrate-PID, so anyone could take it first
    ('File exists') — and the failed run then removed her file. Now the name is unguessable."""
    import os

    from governor.service.calibrate import calibrate_io

    theirs = tmp_path / f".drfgov-calibrate-{os.getpid()}"
    theirs.write_text("mine\n")
    os.chown(theirs, 65534, 65534)
    result = calibrate_io(tmp_path, size_bytes=4 << 20)
    assert result.read_bytes_per_s > 0 and result.write_bytes_per_s > 0
    assert list(tmp_path.iterdir()) == [theirs] and theirs.read_text() == "mine\n"


def test_calibrate_refuses_a_scratch_file_of_more_than_half_the_free_space(drfgov, tmp_path):
    """The audit: --size-mib had no free-space check and filled the filesystem. statvfs first:
    more than half of what is free there exits 2 in one line, nothing written."""
    free_mib = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize >> 20
    out = drfgov("calibrate", "io", tmp_path, "--size-mib", str(free_mib // 2 + 64))
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1, out.stderr
    assert "MiB scratch file is more than half of the" in out.stderr and "use --size-mib" in out.stderr
    assert list(tmp_path.iterdir()) == []


def test_calibrate_io_checks_free_space_before_it_writes(tmp_path, monkeypatch):
    """The library's own check (safe to run against the old code: 8 MiB of a filesystem that
    says 10 MiB are free is refused, not written)."""
    import pytest

    from governor.service import calibrate

    real = os.statvfs(tmp_path)
    fake = os.statvfs_result((real.f_bsize, 4096, real.f_blocks, 2560, 2560, *real[5:]))  # 10 MiB free
    monkeypatch.setattr(calibrate.os, "statvfs", lambda path: fake)
    with pytest.raises(calibrate.CalibrationError, match=r"8 MiB scratch file is more than half of the 10 MiB free"):
        calibrate.calibrate_io(tmp_path, 8 << 20)
    assert list(tmp_path.iterdir()) == []
