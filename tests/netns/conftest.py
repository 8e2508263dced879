"""Real network namespaces joined by a veth pair, on this host's kernel (tier 1, as root).

``pair`` gives ``(sender netns, receiver netns)`` (see :mod:`tests.netns.flows`). These tests
need root, iproute2 and nftables; without them they fail, not skip: scripts/run-tests
installs nftables.
"""

import os
import shutil

import pytest

from tests.netns.flows import drop_pair, make_pair


@pytest.fixture
def pair():
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.fail("network shaping tests need root and nftables (apt-get install nftables)", pytrace=False)
    yield make_pair()
    drop_pair()
