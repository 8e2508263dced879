"""Governed users' connections that outlived the governor's table: tracked liberally from then on.

The ``ct`` expressions of the governor's rules (:mod:`governor.shaping.nft`) are what keeps a
network namespace's connection tracking on when no other ruleset uses it (``nf_ct_netns_get``).
Between a stop — ``drfgov restore``, the shipped unit's ExecStopPost, deletes the table — and
the next start's install, nothing is tracked there; a connection that sends on meanwhile comes
back beyond what conntrack last saw of its TCP window. On Linux 6.1 its packets were then
INVALID for good: no connection attached, so the rules could never mark it again, and what
arrived on it was counted in whichever class its old mark names (tier 2,
``tests/vm/test_kernel_ingress.py``).

When the install finds no table of the governor's, the connections that carry one of its marks
(set by a run before: they lived through such a gap) are told to be tracked liberally —
``IP_CT_TCP_FLAG_BE_LIBERAL`` in both directions, what the sysctl
``net.netfilter.nf_conntrack_tcp_be_liberal`` does for every connection of the namespace, here
for those alone: a segment outside the window conntrack knows is taken as part of the
connection instead of INVALID (``tcp_in_window``, net/netfilter/nf_conntrack_proto_tcp.c).
New connections are tracked as always. Through ctnetlink (``IPCTNL_MSG_CT_NEW`` on an existing
entry: ``nlattr_to_tcp`` sets ``seen[dir].flags`` under the attribute's mask), by pyroute2.
"""

from __future__ import annotations

import errno
import socket

from governor.shaping.model import ShapingError

__all__ = ["BE_LIBERAL", "track_liberally"]

#: IP_CT_TCP_FLAG_BE_LIBERAL, include/uapi/linux/netfilter/nf_conntrack_tcp.h.
BE_LIBERAL = 0x08
_TCP = socket.IPPROTO_TCP
_BOTH_LIBERAL = {"attrs": [["CTA_PROTOINFO_TCP", {"attrs": [
    ["CTA_PROTOINFO_TCP_FLAGS_ORIGINAL", {"value": (BE_LIBERAL, BE_LIBERAL)}],  # (flags, mask)
    ["CTA_PROTOINFO_TCP_FLAGS_REPLY", {"value": (BE_LIBERAL, BE_LIBERAL)}]]}]]}


def track_liberally(mark: int, mask: int, netns: str | None = None) -> int:
    """Set ``IP_CT_TCP_FLAG_BE_LIBERAL`` in both directions of every TCP connection of network
    namespace ``netns`` (None: this one), IPv4 and IPv6, whose conntrack mark ``& mask`` is
    ``mark`` (the governor's range: ``HANDLE_MAJOR << 16``, ``0xffff0000``). Returns how many
    were changed; one already liberal both ways, or gone since the dump, is not counted.

    Raises:
        ShapingError: ctnetlink refused the dump or a change (conntrack not in this kernel:
            then no connection can carry a mark either).
    """
    from pyroute2 import NFCTSocket
    from pyroute2.netlink.exceptions import NetlinkError

    changed = 0
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            ct = NFCTSocket(nfgen_family=family, **({"netns": netns} if netns else {}))
        except OSError as exc:
            raise ShapingError(f"conntrack: cannot open ctnetlink: {exc}") from None
        try:
            for entry in [e for e in ct.dump(mark=mark, mark_mask=mask) if _needs_it(e)]:
                try:
                    ct.entry("set", tuple_orig={"attrs": entry.get_attr("CTA_TUPLE_ORIG")["attrs"]},
                             zone=entry.get_attr("CTA_ZONE"), protoinfo=_BOTH_LIBERAL)
                except NetlinkError as exc:
                    if exc.code == errno.ENOENT:
                        continue  # it ended meanwhile
                    raise
                changed += 1
        except NetlinkError as exc:
            raise ShapingError(f"conntrack: {exc}") from None
        finally:
            ct.close()
    return changed


def _needs_it(entry) -> bool:
    """Whether a dumped entry is TCP and not yet liberal in both directions."""
    info = entry.get_attr("CTA_PROTOINFO")
    tcp = info.get_attr("CTA_PROTOINFO_TCP") if info is not None else None
    if tcp is None:
        return False  # not TCP (UDP, ICMP: no window to fall out of)
    flags = [tcp.get_attr(f"CTA_PROTOINFO_TCP_FLAGS_{side}") for side in ("ORIGINAL", "REPLY")]
    return any(f is None or not f[0] & BE_LIBERAL for f in flags)
