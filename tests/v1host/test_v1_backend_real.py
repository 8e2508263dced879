"""The v1 backend passes the backend conformance suite on the real kernel's v1 files, and the
v1 layer's writers meet the kernel's own refusals (this machine's 6.18)."""

from __future__ import annotations

import pytest

from cgroups.errors import WriteRefused
from cgroups_v1.slice import V1Slice
from governor.enforce.cgroupfs_v1 import CgroupfsV1Backend
from governor.enforce.dryrun import DryRunBackend
from governor.enforce.model import MEMORY_HIGH, Target
from monitors.capacity import disks
from tests.backend_conformance import check_dry_run, check_gone, check_writes


@pytest.fixture
def target(tree):
    tree.add_user(61010)
    return Target(61010, V1Slice(tree.mounts, f"{tree.parent}/user.slice/user-61010.slice"))


@pytest.fixture(scope="session")
def device():
    found = disks()
    if not found:
        pytest.fail("no whole disk on this host to set blkio.throttle rules on", pytrace=False)
    return found[0].device


def test_conformance_on_the_real_v1_hierarchies(tree, target, device):
    before = tree.governed_files(61010)
    check_writes(CgroupfsV1Backend(tree.mounts), target, device, lacks=(MEMORY_HIGH,))
    assert tree.governed_files(61010) == before  # restored exactly, text and all
    check_gone(CgroupfsV1Backend(tree.mounts), Target(61011, V1Slice(tree.mounts, f"{tree.parent}/user.slice/user-61011.slice")))


def test_dry_run_conformance_on_the_real_v1_hierarchies(target, device):
    check_dry_run(DryRunBackend(reader=CgroupfsV1Backend(target.cgroup.mounts)), target, device)


def test_the_kernel_refuses_a_throttle_rule_on_a_partition_or_missing_device(target):
    blkio = target.cgroup.in_("blkio")
    with pytest.raises(WriteRefused, match="blkio.throttle.read_bps_device"):
        blkio.set_blkio_throttle("rbps", "4095:4095", 1 << 20)
