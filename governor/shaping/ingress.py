"""Ingress shaping: what arrives on an interface is redirected through an IFB device, where an
HTB tree (:class:`governor.shaping.htb.HtbTree`) shapes it as if it were leaving.

Arriving packets carry no socket owner, so the user is found through the connection:

1. nftables marks each governed user's connections at every packet her socket sends
   (``ct mark set meta skuid map @uid_mark`` — :mod:`governor.shaping.nft`, which also takes
   the mark off when she is governed no more); the mark is her class id ``d7f0:N`` as one
   32-bit number;
2. on the interface, an ``ingress`` qdisc runs one u32 match-all filter whose actions are
   ``connmark`` (the connection's mark → the packet's mark, act_connmark) and ``mirred egress
   redirect`` to the IFB device (act_mirred);
3. on the IFB device, the HTB root has one ``fw`` filter without handles: cls_fw's "old method"
   takes a packet's mark as its class id when the mark's major is the qdisc's (net/sched/cls_fw.c,
   ``fw_classify``). Unmarked packets fall to the default class.

Everything is the governor's own: the IFB device ``drfgovN`` (N the interface's index), the
filter at priority :data:`FILTER_PRIO`, and an ingress qdisc that is installed only where there
was none (an admin's ingress qdisc is never touched). :meth:`IngressRedirect.remove` deletes
exactly these. Kernel modules: ifb, sch_ingress, cls_u32, act_connmark, act_mirred, cls_fw.
"""

from __future__ import annotations

import socket

from governor.shaping.htb import HtbTree, open_link
from governor.shaping.model import HANDLE_MAJOR, ShapingError

__all__ = ["FILTER_PRIO", "INGRESS_HANDLE", "IngressRedirect", "ifb_name"]

INGRESS_HANDLE = 0xFFFF0000
TC_H_INGRESS = 0xFFFFFFF1  # the parent of an ingress (or clsact) qdisc
FILTER_PRIO = 0xD7F0
ETH_P_ALL = 0x0003


def ifb_name(ifindex: int) -> str:
    """The IFB device shaping interface ``ifindex``'s ingress (≤ 15 characters, IFNAMSIZ)."""
    return f"drfgov{ifindex}"


class IngressRedirect:
    """The redirect of ``ifname``'s arriving traffic to its IFB device, in network namespace
    ``netns`` (None: this one), and the HTB tree on that device (:attr:`tree`, after install).

    Raises :class:`ShapingError` for anything the kernel refuses, naming the interface.
    """

    def __init__(self, ifname: str, netns: str | None = None):
        self.ifname, self.netns = ifname, netns
        self.ipr, self.index = open_link(ifname, netns)
        self.ifb = ifb_name(self.index)
        self.tree: HtbTree | None = None

    def close(self) -> None:
        if self.tree is not None:
            self.tree.close()
        self.ipr.close()

    def _call(self, what: str, fn, *args, **kwargs):
        from pyroute2 import NetlinkError

        try:
            return fn(*args, **kwargs)
        except NetlinkError as exc:
            raise ShapingError(f"{self.ifname}: {what}: {exc}") from None

    def _ingress_qdisc(self) -> bool:
        """Whether an ingress or clsact qdisc is attached (there can be only one)."""
        return any(q["parent"] == TC_H_INGRESS for q in self.ipr.get_qdiscs(self.index))

    def _our_filter(self) -> bool:
        return any(f["info"] >> 16 == FILTER_PRIO for f in self.ipr.get_filters(self.index, parent=INGRESS_HANDLE))

    def installed(self) -> bool:
        return bool(self.ipr.link_lookup(ifname=self.ifb)) and self._ingress_qdisc() and self._our_filter()

    def install(self, link_bits_per_s: int) -> HtbTree:
        """Create the IFB device, its HTB tree and mark classifier, and the redirect (idempotent).

        Raises:
            ShapingError: an ingress qdisc that is not the governor's is configured, or a
                kernel piece is missing (the message names the module).
        """
        if not self.installed() and self._ingress_qdisc():
            raise ShapingError(f"{self.ifname}: an ingress qdisc is configured already; the governor "
                               "shapes arriving traffic only on interfaces without one")
        if not self.ipr.link_lookup(ifname=self.ifb):
            self._call("create IFB device (module ifb)", self.ipr.link, "add", ifname=self.ifb, kind="ifb")
        ifb_index = self.ipr.link_lookup(ifname=self.ifb)[0]
        self._call("bring up IFB device", self.ipr.link, "set", index=ifb_index, state="up")
        tree = self.tree or HtbTree(self.ifb, self.netns)
        self.tree = tree
        fresh = not tree.installed()
        tree.install(link_bits_per_s)
        if fresh:
            self._classify_by_mark(tree)
        if not self._ingress_qdisc():
            self._call("add ingress qdisc (module sch_ingress)", self.ipr.tc, "add", "ingress", self.index,
                       INGRESS_HANDLE)
        if not self._our_filter():
            self._call("redirect filter (modules cls_u32, act_connmark, act_mirred)", self.ipr.tc,
                       "add-filter", "u32", self.index, parent=INGRESS_HANDLE, prio=FILTER_PRIO,
                       protocol=ETH_P_ALL, target=0, keys=["0x0/0x0+0"],
                       action=[{"kind": "connmark"},
                               {"kind": "mirred", "direction": "egress", "action": "redirect", "ifindex": ifb_index}])
        return tree

    def _classify_by_mark(self, tree: HtbTree) -> None:
        """One cls_fw filter with no handle and no options on the IFB's HTB root (the "old method")."""
        from pyroute2.netlink import NLM_F_CREATE, NLM_F_EXCL
        from pyroute2.netlink.rtnl import RTM_NEWTFILTER

        self._filter_request("mark classifier on the IFB device (module cls_fw)", RTM_NEWTFILTER,
                             NLM_F_CREATE | NLM_F_EXCL, tree.index, HANDLE_MAJOR << 16, 1, "fw")

    def _filter_request(self, what: str, kind: int, flags: int, index: int, parent: int, prio: int,
                        classifier: str | None = None) -> None:
        """An rtnetlink filter request carrying no options (pyroute2's ``tc()`` always adds some)."""
        from pyroute2.netlink import NLM_F_ACK, NLM_F_REQUEST
        from pyroute2.netlink.rtnl.tcmsg import tcmsg

        msg = tcmsg()
        msg["index"], msg["handle"], msg["parent"] = index, 0, parent
        msg["info"] = (prio << 16) | socket.htons(ETH_P_ALL)
        msg["attrs"] = [("TCA_KIND", classifier)] if classifier else []
        msg["header"]["type"] = kind
        msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK | flags
        self._call(what, self.ipr.nlm_request_batch, [msg])

    def remove(self) -> bool:
        """Delete the redirect filter, the ingress qdisc when nothing else uses it, and the IFB
        device with its tree. Returns whether anything was there."""
        found = False
        if self._our_filter():
            found = True
            from pyroute2.netlink.rtnl import RTM_DELTFILTER

            self._filter_request("delete redirect filter", RTM_DELTFILTER, 0, self.index, INGRESS_HANDLE, FILTER_PRIO)
            if not self.ipr.get_filters(self.index, parent=INGRESS_HANDLE):
                self._call("delete ingress qdisc", self.ipr.tc, "del", "ingress", self.index, INGRESS_HANDLE)
        if self.tree is not None:
            self.tree.close()
            self.tree = None
        ifb = self.ipr.link_lookup(ifname=self.ifb)
        if ifb:
            found = True
            self._call("delete IFB device", self.ipr.link, "del", index=ifb[0])
        return found
