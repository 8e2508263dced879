"""Tier 'v1 host': the governor on this machine's own kernel, whose cpu, cpuacct, memory and
blkio controllers are bound to cgroup v1 hierarchies. Runs as root. A host where it cannot run
(not root, no v1 hierarchies) FAILS this tier: it never passes by skipping."""

from __future__ import annotations

import os

import pytest

from cgroups_v1.mounts import NotCgroupV1, find_v1
from tests.v1host.hierarchy import SliceTree


@pytest.fixture(scope="session")
def mounts():
    if os.geteuid() != 0:
        pytest.fail("tests/v1host must run as root (it creates cgroups and setuid workers)", pytrace=False)
    try:
        return find_v1()
    except NotCgroupV1 as exc:
        pytest.fail(f"tests/v1host needs a host with cgroup v1 hierarchies: {exc}", pytrace=False)


@pytest.fixture
def tree(mounts):
    t = SliceTree(mounts)
    try:
        yield t
    finally:
        t.cleanup()
