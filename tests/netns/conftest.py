"""Real network namespaces joined by a veth pair, on this host's kernel (tier 1, as root).

``pair`` gives ``(sender netns, receiver netns)``: drfgov-a (va, 10.77.0.1) ↔ drfgov-b (vb,
10.77.0.2). These tests need root, iproute2 and nftables; without them they fail, not skip:
scripts/run-tests installs nftables.
"""

import os
import shutil
import subprocess

import pytest

A, B = "drfgov-a", "drfgov-b"


def sh(*args: str) -> str:
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


@pytest.fixture
def pair():
    if os.geteuid() != 0 or not shutil.which("nft"):
        pytest.fail("network shaping tests need root and nftables (apt-get install nftables)", pytrace=False)
    for ns in (A, B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        sh("ip", "netns", "add", ns)
    sh("ip", "-n", A, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", B)
    sh("ip", "-n", A, "addr", "add", "10.77.0.1/24", "dev", "va")
    sh("ip", "-n", B, "addr", "add", "10.77.0.2/24", "dev", "vb")
    for ns, dev in ((A, "va"), (B, "vb")):
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    yield A, B
    for ns in (A, B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
