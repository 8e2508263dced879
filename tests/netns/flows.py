"""Two network namespaces joined by a veth pair, and timed TCP flows between them.

drfgov-a (va, 10.77.0.1) ↔ drfgov-b (vb, 10.77.0.2). A flow belongs to a uid: it is her
sending socket (egress tests: the sender runs as her in drfgov-a) or her receiving socket
(ingress tests: the sink runs as her in drfgov-a). Rates are TCP payload in bits/s over the
middle :data:`SECONDS` of each run. Used by tests/netns (host) and tests/vm (the VM's kernel).
"""

import json
import subprocess
import sys
from pathlib import Path

A, B = "drfgov-a", "drfgov-b"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
# The helper runs as other uids, who may not be able to read this checkout (a clone in a 0700
# directory): its source goes on the command line, and it starts in /.
TRAFFIC_SOURCE = (Path(__file__).with_name("traffic.py")).read_text()
SECONDS, SKIP = 4.0, 1.5
# HTB shapes frames; the sink counts TCP payload: 1448 bytes (MSS with timestamps) of every
# 1514-byte frame at MTU 1500 (14 Ethernet + 20 IP + 32 TCP header bytes).
PAYLOAD_PER_WIRE = 1448 / 1514


def payload(wire_bits_per_s: float) -> float:
    """The TCP payload rate a flow shaped to ``wire_bits_per_s`` delivers."""
    return wire_bits_per_s * PAYLOAD_PER_WIRE


def sh(*args: str) -> str:
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def make_pair() -> tuple[str, str]:
    drop_pair()
    for ns in (A, B):
        sh("ip", "netns", "add", ns)
    sh("ip", "-n", A, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", B)
    sh("ip", "-n", A, "addr", "add", "10.77.0.1/24", "dev", "va")
    sh("ip", "-n", B, "addr", "add", "10.77.0.2/24", "dev", "vb")
    for ns, dev in ((A, "va"), (B, "vb")):
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    return A, B


def drop_pair() -> None:
    for ns in (A, B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def classify(tree, netns: str, link_bits_per_s: int, weights: dict[int, float],
             allocation: dict[int, float] | None = None, ingress: bool = False):
    """Give each uid her class in ``tree`` (planned as the daemon plans them) and her entry in
    the nftables maps; returns ``(NftClassifier, uid → minor)``."""
    from governor.shaping.classes import MinorAllocator, plan_classes
    from governor.shaping.nft import NftClassifier

    minors = MinorAllocator().assign(weights)
    tree.apply({minors[u]: r for u, r in plan_classes(link_bits_per_s, weights, allocation).items()}, {})
    nft = NftClassifier(netns, ingress=ingress)
    nft.install()
    nft.apply(minors, {})
    return nft, minors


def nft_uid_classes(netns: str) -> dict[int, int]:
    """The ``inet drfgov`` uid → class minor map as the kernel has it (the test's own reading,
    through ``nft -j``, independent of the classifier under test)."""
    listed = json.loads(sh("ip", "netns", "exec", netns, "nft", "-j", "list", "map", "inet", "drfgov", "uid_class"))
    for entry in listed.get("nftables", []):
        if "map" in entry:
            return {int(uid): int(cls.split(":")[1], 16) for uid, cls in entry["map"].get("elem", [])}
    return {}


def _as(uid: int | None) -> list[str]:
    return [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def traffic_command(*args: str) -> list[str]:
    """The argv that runs :mod:`tests.netns.traffic` with ``args``, readable by any uid: the
    source is passed with ``-c``, so it needs no access to the checkout."""
    return [PYTHON, "-c", TRAFFIC_SOURCE, *args]


def spawn_traffic(ns: str, uid: int | None, *args: str, **popen) -> subprocess.Popen:
    """:func:`traffic_command` ``ARGS`` in network namespace ``ns``, as ``uid`` (None: root), from /."""
    return subprocess.Popen(["ip", "netns", "exec", ns, *_as(uid), *traffic_command(*args)], cwd="/", **popen)


def measure(ports: dict[int, int], user_side: str = "sender", seconds: float = SECONDS,
            skip: float = SKIP) -> dict[int, float]:
    """Run one flow per uid (uid → TCP port) from drfgov-a to drfgov-b (``user_side="sender"``)
    or from drfgov-b to drfgov-a (``"receiver"``); returns uid → payload bits/s over ``seconds``
    after the first ``skip`` (TCP's slow start)."""
    timing = ["--seconds", str(seconds), "--skip", str(skip)]
    sender_seconds = str(seconds + skip + 0.5)
    if user_side == "sender":
        sink = spawn_traffic(B, None, "sink", *map(str, ports.values()), *timing, stdout=subprocess.PIPE, text=True)
        assert sink.stdout.readline().strip() == "ready"
        senders = [spawn_traffic(A, uid, "send", "10.77.0.2", str(port), "--seconds", sender_seconds)
                   for uid, port in ports.items()]
        _wait(senders)
        got = json.loads(sink.stdout.readline())
        sink.wait(timeout=30)
        return {uid: got[str(port)] for uid, port in ports.items()}
    sinks = {uid: spawn_traffic(A, uid, "sink", str(port), *timing, stdout=subprocess.PIPE, text=True)
             for uid, port in ports.items()}
    for sink in sinks.values():
        assert sink.stdout.readline().strip() == "ready"
    _wait([spawn_traffic(B, None, "send", "10.77.0.1", str(port), "--seconds", sender_seconds)
           for port in ports.values()])
    out = {}
    for uid, sink in sinks.items():
        out[uid] = json.loads(sink.stdout.readline())[str(ports[uid])]
        sink.wait(timeout=30)
    return out


def _wait(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.wait(timeout=60)
