"""pytest fixtures of a fake cgroup v1 host, for the v1 backends' unit tests: ``mounts`` (the
hierarchies of :func:`tests.fakecgroup.fake_v1_tree` under ``tmp_path``) and ``target``
(uid 1000's ``user.slice/user-1000.slice`` in them). Import both into a test module."""

import pytest

from cgroups_v1.slice import V1Slice
from governor.enforce.model import Target
from tests.fakecgroup import fake_v1_tree

__all__ = ["mounts", "target"]


@pytest.fixture
def mounts(tmp_path):
    return fake_v1_tree(tmp_path)


@pytest.fixture
def target(mounts):
    return Target(1000, V1Slice(mounts, "user.slice/user-1000.slice"))
