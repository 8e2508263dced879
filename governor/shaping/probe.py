"""Which kernel pieces of network shaping this host has, tried for real in a scratch network
namespace (so nothing on the host's interfaces is touched): each piece is created once, and
a refusal names the kernel module behind it.
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from dataclasses import dataclass

__all__ = ["Piece", "probe"]


@dataclass(frozen=True)
class Piece:
    name: str  # what it is for
    module: str  # the kernel module that provides it
    ok: bool
    detail: str = ""


# (what for, module, command run inside the scratch namespace with a veth "p0" and an ifb "b0")
_PIECES = (
    ("HTB classes (egress shaping)", "sch_htb", "tc qdisc add dev p0 root handle 1: htb default 1"),
    ("nftables uid classification", "nf_tables", "nft add table inet probe"),
    ("nftables output hook", "nf_tables", "nft add chain inet probe c { type filter hook output priority 0 ; }"),
    ("connection marks (ingress)", "nft_ct", "nft add rule inet probe c ct mark set 1"),
    ("IFB device (ingress shaping)", "ifb", "ip link add b0 type ifb"),
    ("ingress hook", "sch_ingress", "tc qdisc add dev p0 ingress"),
    ("redirect to IFB", "act_mirred",
     "tc filter add dev p0 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev b0"),
    ("connection mark restore (ingress)", "act_connmark",
     "tc filter add dev p0 parent ffff: protocol all prio 2 u32 match u32 0 0 action connmark"),
    ("HTB on the IFB device (ingress)", "sch_htb", "tc qdisc add dev b0 root handle 1: htb"),
    ("mark classifier on IFB (ingress)", "cls_fw", "tc filter add dev b0 parent 1: protocol all prio 1 fw"),
)
EGRESS_MODULES = ("sch_htb", "nf_tables")


def probe(timeout_s: float = 10.0) -> list[Piece]:
    """Try every piece in order; a piece that depends on a failed one is reported failed too.

    Needs root and iproute2 (``ip``, ``tc``); without ``nft`` the nftables piece fails.
    """
    if not shutil.which("ip") or not shutil.which("tc"):
        return [Piece(name, module, False, "iproute2 (ip, tc) is not installed") for name, module, _ in _PIECES]
    ns = f"drfgov-probe-{uuid.uuid4().hex[:8]}"
    run = _runner(ns, timeout_s)
    out = []
    try:
        made = run(f"ip netns add {ns}", inside=False)
        if made:
            return [Piece(name, module, False, f"cannot create a network namespace: {made}") for name, module, _ in _PIECES]
        run("ip link add p0 type veth peer name p1")
        run("ip link set p0 up")
        for name, module, command in _PIECES:
            error = run(command)
            out.append(Piece(name, module, error is None, "" if error is None else error))
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    return out


def _runner(ns: str, timeout_s: float):
    def run(command: str, inside: bool = True) -> str | None:
        argv = (["ip", "netns", "exec", ns] if inside else []) + command.split()
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return str(exc)
        return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["failed"])[0]
    return run
