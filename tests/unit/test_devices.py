"""Partitions, device-mapper and md devices resolve to the whole disks io.max takes."""

import os

import pytest

from cgroups.devices import DeviceError, Disk, disks_of_device, whole_disks


def _disk(sys, name, dev, parts=()):
    node = sys / "devices" / "virtual" / name
    node.mkdir(parents=True)
    (node / "dev").write_text(dev + "\n")
    (sys / "dev" / "block").mkdir(parents=True, exist_ok=True)
    os.symlink(node, sys / "dev" / "block" / dev)
    for pname, pdev in parts:
        p = node / pname
        p.mkdir()
        (p / "dev").write_text(pdev + "\n")
        (p / "partition").write_text("1\n")
        os.symlink(p, sys / "dev" / "block" / pdev)
    return node


def test_partition_resolves_to_its_disk(tmp_path):
    _disk(tmp_path, "sda", "8:0", [("sda1", "8:1"), ("sda2", "8:2")])
    assert disks_of_device("8:2", tmp_path) == [Disk("sda", "8:0")]
    assert disks_of_device("8:0", tmp_path) == [Disk("sda", "8:0")]


def test_device_mapper_over_two_partitions_resolves_to_both_disks(tmp_path):
    sda = _disk(tmp_path, "sda", "8:0", [("sda1", "8:1")])
    sdb = _disk(tmp_path, "sdb", "8:16", [("sdb1", "8:17")])
    dm = _disk(tmp_path, "dm-0", "253:0")
    (dm / "slaves").mkdir()
    os.symlink(sda / "sda1", dm / "slaves" / "sda1")
    os.symlink(sdb / "sdb1", dm / "slaves" / "sdb1")
    assert disks_of_device("253:0", tmp_path) == [Disk("sda", "8:0"), Disk("sdb", "8:16")]


def test_unknown_device_and_diskless_path(tmp_path):
    with pytest.raises(DeviceError, match="not in"):
        disks_of_device("9:9", tmp_path)
    with pytest.raises(DeviceError, match="no block device"):
        whole_disks("/proc/self")
    with pytest.raises(DeviceError, match="No such file"):
        whole_disks(tmp_path / "missing")


def test_a_real_path_on_this_host_resolves_to_a_disk():
    disks = whole_disks(os.getcwd())  # the work tree sits on a real block device here
    assert disks
    for disk in disks:
        assert not os.path.exists(f"/sys/class/block/{disk.name}/partition")  # a disk, not a partition
        assert open(f"/sys/class/block/{disk.name}/dev").read().strip() == disk.device
