"""Finding the cgroup2 hierarchy from mountinfo, and the statfs magic check on this host."""

from pathlib import Path

import pytest

from cgroups import NotCgroup2
from cgroups.mount import CGROUP2_SUPER_MAGIC, filesystem_magic, find_cgroup2, parse_mountinfo
from tests.fakecgroup import FIXTURES

UNIFIED = (FIXTURES / "mountinfo" / "unified.txt").read_text()
HYBRID = (FIXTURES / "mountinfo" / "hybrid.txt").read_text()


def test_parse_mountinfo_finds_cgroup_mounts():
    mounts = parse_mountinfo(UNIFIED)
    cg2 = [m for m in mounts if m.fstype == "cgroup2"]
    assert [m.mount_point for m in cg2] == [Path("/sys/fs/cgroup")]
    hybrid_v1 = {o for m in parse_mountinfo(HYBRID) if m.fstype == "cgroup" for o in m.super_options}
    assert {"cpu", "memory", "blkio"} <= hybrid_v1


def test_hybrid_host_is_explained_not_guessed():
    with pytest.raises(NotCgroup2) as info:
        find_cgroup2(HYBRID)
    text = str(info.value)
    assert "lacks the cpu, memory, io controller(s)" in text
    assert "hybrid" in text and "systemd.unified_cgroup_hierarchy=1" in text and "blkio" in text


def test_no_cgroup2_at_all():
    v1_only = "\n".join(l for l in HYBRID.splitlines() if " - cgroup2 " not in l)
    with pytest.raises(NotCgroup2, match="no cgroup2 filesystem is mounted .* cgroup v1 for: .*memory"):
        find_cgroup2(v1_only)


def test_a_mount_that_is_not_really_cgroup2_is_refused(tmp_path):
    fake = UNIFIED.replace("/sys/fs/cgroup", str(tmp_path))
    with pytest.raises(NotCgroup2, match="filesystem magic"):
        find_cgroup2(fake)


def test_magic_of_this_hosts_real_cgroup2_mount():
    v2 = [m.mount_point for m in parse_mountinfo(Path("/proc/self/mountinfo").read_text()) if m.fstype == "cgroup2"]
    if not v2:
        pytest.fail("this machine has no cgroup2 mount at all; the magic check needs one")
    assert filesystem_magic(v2[0]) == CGROUP2_SUPER_MAGIC
    assert filesystem_magic("/proc") != CGROUP2_SUPER_MAGIC
