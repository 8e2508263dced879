"""`drfgov calibrate io` through the installed command (the VM tier checks its accuracy)."""

import json
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
