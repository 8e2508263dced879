"""Governed users' connections that may have outlived connection tracking: tracked liberally.

The ``ct`` expressions of the governor's rules (:mod:`governor.shaping.nft`) are what keeps a
network namespace's connection tracking on when no other ruleset uses it (``nf_ct_netns_get``).
Between a stop — ``drfgov restore``, the shipped unit's ExecStopPost, deletes the table — and
the next start's install, nothing is tracked there; a connection that sends on meanwhile comes
back beyond what conntrack last saw of its TCP window. On Debian 12's Linux 6.1 its packets
were then INVALID for good in both directions (the remote's data "SEQ over upper bound", her
ACKs "ACK over upper bound"): no connection attached, so the rules could never mark it again,
and what arrived on it was counted in whichever class its old mark names (tier 2,
``tests/vm/test_kernel_ingress.py``; Linux 6.18 picks such a connection up again by itself).

So before an install that finds no table of the governor's marking connections, the
connections that carry one of its marks (set by a run before) are told to be tracked
liberally — ``IP_CT_TCP_FLAG_BE_LIBERAL`` in both directions, what the sysctl
``net.netfilter.nf_conntrack_tcp_be_liberal`` does for every connection of the namespace, here
for these alone and for the rest of their lives (a liberal accept does not move the window
conntrack keeps): a segment outside that window is taken as part of the connection, not
INVALID (``nf_tcp_log_invalid`` in ``tcp_in_window``, net/netfilter/nf_conntrack_proto_tcp.c).
It is what the kernel itself does for a connection it picks up in mid-stream (``tcp_new``);
the TCP stacks at both ends still check every sequence number. New connections are tracked as
always. Where another ruleset kept tracking on (a firewall), nothing had lapsed and the flag
changes nothing that matters.

Only connections that can carry data are told (ESTABLISHED, FIN_WAIT, CLOSE_WAIT, LAST_ACK);
and the pass has a budget of time (:data:`BUDGET_S`): a governed user can make conntrack
entries of hers by the hundred thousand (a SYN to a dead address each), and this runs before
the daemon says it is ready, or within a tick after a firewall reload, where the watchdog
counts. Through ctnetlink (``IPCTNL_MSG_CT_NEW`` on an existing entry: ``nlattr_to_tcp`` sets
``seen[dir].flags`` under the attribute's mask and changes nothing else; one conntrack update
event each), by pyroute2: one socket lists, another changes, the list is never held whole.
"""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Callable
from typing import NamedTuple

from governor.shaping.model import ShapingError

__all__ = ["BE_LIBERAL", "BUDGET_S", "Liberal", "ctnetlink_entries", "track_liberally"]

#: IP_CT_TCP_FLAG_BE_LIBERAL, include/uapi/linux/netfilter/nf_conntrack_tcp.h.
BE_LIBERAL = 0x08
#: The longest a pass may take (seconds): ~1 ms a connection told, so about 5,000
#: (``benchmarks/bench_conntrack.py``); well within the watchdog's 30 s of a tick.
BUDGET_S = 5.0
#: enum tcp_conntrack (include/uapi/linux/netfilter/nf_conntrack_tcp.h) of a connection whose
#: data may still flow one way or both: ESTABLISHED, FIN_WAIT, CLOSE_WAIT, LAST_ACK.
_CARRYING_DATA = frozenset({3, 4, 5, 6})
_IPS_ASSURED = 1 << 2  # enum ip_conntrack_status: seen both ways past the handshake
_BOTH_LIBERAL = {"attrs": [["CTA_PROTOINFO_TCP", {"attrs": [
    ["CTA_PROTOINFO_TCP_FLAGS_ORIGINAL", {"value": (BE_LIBERAL, BE_LIBERAL)}],  # (flags, mask)
    ["CTA_PROTOINFO_TCP_FLAGS_REPLY", {"value": (BE_LIBERAL, BE_LIBERAL)}]]}]]}


class Liberal(NamedTuple):
    """What a pass did: connections told (``changed``), those it could not tell (``failed``:
    gone meanwhile, or refused — a tuple pyroute2 cannot send back, such as a directional
    zone's), and whether its budget ran out before the last was listed (``out_of_time``)."""

    changed: int
    failed: int
    out_of_time: bool


def track_liberally(mark: int, mask: int, netns: str | None = None, budget_s: float = BUDGET_S,
                    clock: Callable[[], float] = time.monotonic) -> Liberal:
    """Set ``IP_CT_TCP_FLAG_BE_LIBERAL`` in both directions of every TCP connection of network
    namespace ``netns`` (None: this one), IPv4 then IPv6, whose conntrack mark ``& mask`` is
    ``mark``, that can carry data and is not liberal both ways yet; for at most ``budget_s``
    seconds of ``clock``.

    Raises:
        ShapingError: ctnetlink cannot be opened or refused the listing (conntrack not in
            this kernel: then no connection can carry a mark either; no CAP_NET_ADMIN), with
            the errno's name. A refused change is counted in ``failed``, not raised.
    """
    from pyroute2 import NFCTSocket
    from pyroute2.netlink.exceptions import NetlinkError

    deadline, changed, failed = clock() + budget_s, 0, 0
    where = {"netns": netns} if netns else {}
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            lister, changer = NFCTSocket(nfgen_family=family, **where), NFCTSocket(nfgen_family=family, **where)
        except (OSError, NetlinkError) as exc:
            raise ShapingError(f"conntrack: cannot open ctnetlink: {_said(exc)}") from None
        try:
            # assured: past the handshake both ways, in the kernel's filter where it has one (5.15)
            for entry in lister.dump(mark=mark, mark_mask=mask, status=_IPS_ASSURED, status_mask=_IPS_ASSURED):
                if clock() >= deadline:
                    return Liberal(changed, failed, True)  # the listing's rest goes with its socket
                if not _needs_it(entry):
                    continue
                try:
                    changer.entry("set", tuple_orig={"attrs": entry.get_attr("CTA_TUPLE_ORIG")["attrs"]},
                                  zone=entry.get_attr("CTA_ZONE"), protoinfo=_BOTH_LIBERAL)
                    changed += 1
                except (OSError, NetlinkError):
                    failed += 1  # ended meanwhile (ENOENT), or refused: the others are told all the same
        except (OSError, NetlinkError) as exc:
            raise ShapingError(f"conntrack: listing the connections: {_said(exc)}") from None
        finally:
            lister.close()
            changer.close()
    return Liberal(changed, failed, False)


def ctnetlink_entries(netns: str | None = None) -> int:
    """How many connections conntrack tracks in network namespace ``netns`` (None: this one),
    asked over the ctnetlink socket :func:`track_liberally` uses (``IPCTNL_MSG_CT_GET_STATS``:
    read-only, one message): whether that pass can run here. The first request loads
    ``nf_conntrack_netlink`` where it is a module (nfnetlink's ``request_module``); the
    socket's open alone loads only nfnetlink.

    Raises:
        ShapingError: ctnetlink cannot be opened or does not answer (EINVAL: no
            ``nf_conntrack_netlink`` in this kernel; EPERM: no CAP_NET_ADMIN), with the errno's name.
    """
    from pyroute2 import NFCTSocket
    from pyroute2.netlink.exceptions import NetlinkError

    try:
        ctnetlink = NFCTSocket(**({"netns": netns} if netns else {}))
    except (OSError, NetlinkError) as exc:
        raise ShapingError(f"conntrack: cannot open ctnetlink: {_said(exc)}") from None
    try:
        answer = ctnetlink.count()
    except (OSError, NetlinkError) as exc:
        raise ShapingError(f"conntrack: ctnetlink does not answer: {_said(exc)}") from None
    finally:
        ctnetlink.close()
    return next((m.get_attr("CTA_STATS_GLOBAL_ENTRIES") or 0 for m in answer), 0)


def _needs_it(entry) -> bool:
    """Whether a listed entry is TCP, can carry data, and is not yet liberal both ways."""
    info = entry.get_attr("CTA_PROTOINFO")
    tcp = info.get_attr("CTA_PROTOINFO_TCP") if info is not None else None
    if tcp is None or tcp.get_attr("CTA_PROTOINFO_TCP_STATE") not in _CARRYING_DATA:
        return False  # not TCP (no window to fall out of), or no data to come
    flags = [tcp.get_attr(f"CTA_PROTOINFO_TCP_FLAGS_{side}") for side in ("ORIGINAL", "REPLY")]
    return any(f is None or not f[0] & BE_LIBERAL for f in flags)


def _said(exc: Exception) -> str:
    """An errno as its name and words (pyroute2's NetlinkError prints as a tuple)."""
    code = getattr(exc, "code", None) or getattr(exc, "errno", None)
    if code:
        return f"{errno.errorcode.get(code, code)} ({os.strerror(code)})"
    return str(exc) or type(exc).__name__
