"""The cgroupfs and dry-run backends pass the conformance suite on the real kernel."""

from cgroups import Cgroup
from governor.enforce import CgroupfsBackend, DryRunBackend
from governor.enforce.model import Target
from tests.backend_conformance import check_dry_run, check_gone, check_writes


def test_cgroupfs_backend_conformance(cgroup, disk, test_root):
    check_writes(CgroupfsBackend(), Target(1000, cgroup), disk[0])
    check_gone(CgroupfsBackend(), Target(4242, Cgroup(test_root.path / "user-4242.slice")))


def test_dry_run_backend_conformance(cgroup, disk):
    check_dry_run(DryRunBackend(), Target(1000, cgroup), disk[0])
