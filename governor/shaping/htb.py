"""The governor's HTB tree on one interface, through pyroute2 (rtnetlink; tc-htb(8)).

Layout, all under the governor's own qdisc handle ``d7f0:`` (so nothing else is touched)::

    d7f0:      root qdisc, htb, default class d7f0:ffff
    d7f0:1     the link: rate = ceil = link capacity
    d7f0:ffff  everyone not governed: rate 1% of the link, ceil the link
    d7f0:N     one class per governed user (N from :func:`governor.shaping.classes.class_minor`):
               rate = her guaranteed weighted share of the link, ceil = her DRF allocation

Packets reach a user's class by their ``skb->priority`` (HTB classifies a packet whose
priority is one of its class ids directly; nftables sets it from the socket's owner — see
:mod:`governor.shaping.nft`). The tree is installed only over the kernel's default root qdisc;
:meth:`HtbTree.remove` deletes exactly ``d7f0:`` and the interface is back to its default.
"""

from __future__ import annotations

from collections.abc import Mapping

from governor.shaping.classbatch import ClassBatch, ClassChange
from governor.shaping.model import HANDLE_MAJOR, ClassRate, ClassStats, InterfaceGone, ShapingError

__all__ = ["HtbTree", "open_link"]

ROOT_MINOR, DEFAULT_MINOR = 0x1, 0xFFFF
DEFAULT_QDISCS = ("noqueue", "pfifo_fast", "fq_codel", "mq", "fq", "pfifo")  # what a link starts with
BURST_S = 0.01  # a class may send this long at line speed after a pause: covers timer and softirq
MIN_BURST_BYTES = 2 * 1514  # latency (HTB only tops tokens up when it runs), so rates hold under load


def open_link(ifname: str, netns: str | None = None):
    """A pyroute2 rtnetlink handle in ``netns`` (None: this one) and ``ifname``'s index.

    Raises:
        InterfaceGone: there is no such interface.
    """
    from pyroute2 import IPRoute, NetNS

    ipr = NetNS(netns) if netns else IPRoute()
    found = ipr.link_lookup(ifname=ifname)
    if not found:
        ipr.close()
        raise InterfaceGone(f"{ifname}: no such interface")
    return ipr, found[0]


def handle(minor: int) -> int:
    return (HANDLE_MAJOR << 16) | minor


def _burst_bytes(bits_per_s: int) -> int:
    return max(MIN_BURST_BYTES, int(bits_per_s / 8 * BURST_S))


class HtbTree:
    """The tree on ``ifname`` in the network namespace ``netns`` (None: this one).

    Raises :class:`ShapingError` for anything the kernel refuses.
    """

    def __init__(self, ifname: str, netns: str | None = None):
        self.ifname = ifname
        self.ipr, self.index = open_link(ifname, netns)
        self.batch = ClassBatch(netns)

    def close(self) -> None:
        self.ipr.close()
        self.batch.close()

    def _tc(self, command: str, kind: str, h: int, **kwargs) -> None:
        from pyroute2 import NetlinkError

        try:
            self.ipr.tc(command, kind, self.index, h, **kwargs)
        except NetlinkError as exc:
            raise ShapingError(f"{self.ifname}: tc {command} {kind} {h >> 16:x}:{h & 0xFFFF:x}: {exc}") from None

    def root_qdisc(self) -> tuple[str, int] | None:
        """(kind, handle) of the interface's root qdisc, or None."""
        for q in self.ipr.get_qdiscs(self.index):
            if q["parent"] == 0xFFFFFFFF:
                return q.get_attr("TCA_KIND"), q["handle"]
        return None

    def installed(self) -> bool:
        root = self.root_qdisc()
        return root is not None and root[0] == "htb" and root[1] >> 16 == HANDLE_MAJOR

    def install(self, link_bits_per_s: int) -> None:
        """Put the root qdisc, the link class and the default class in place (idempotent).

        Raises:
            ShapingError: another root qdisc (not the kernel's default) is configured: the
                governor will not replace an admin's shaping.
        """
        if self.installed():
            self.set_link(link_bits_per_s)
            return
        root = self.root_qdisc()
        if root is not None and root[0] not in DEFAULT_QDISCS:
            raise ShapingError(f"{self.ifname}: a {root[0]} root qdisc is configured already; "
                               "the governor shapes only interfaces with the default qdisc")
        self._tc("add", "htb", handle(0), default=DEFAULT_MINOR)
        self.set_link(link_bits_per_s)

    def set_link(self, link_bits_per_s: int) -> None:
        """The link class (rate = ceil = the link) and the default class (1% guaranteed, may borrow all)."""
        self._send([self._change(ROOT_MINOR, ClassRate(link_bits_per_s, link_bits_per_s), parent=handle(0)),
                    self._change(DEFAULT_MINOR, ClassRate(max(8000, link_bits_per_s // 100), link_bits_per_s))])

    def _change(self, minor: int, rate: ClassRate | None, parent: int | None = None) -> ClassChange:
        parent = parent or handle(ROOT_MINOR)
        if rate is None:
            return ClassChange(self.index, handle(minor), parent)
        return ClassChange(self.index, handle(minor), parent, rate.rate_bits_per_s, rate.ceil_bits_per_s,
                           _burst_bytes(rate.rate_bits_per_s), _burst_bytes(rate.ceil_bits_per_s))

    def _send(self, changes: list[ClassChange]) -> None:
        try:
            refused = self.batch.send(changes)
        except OSError as exc:
            raise ShapingError(f"{self.ifname}: rtnetlink: {exc}") from None
        if refused:
            first = ", ".join(f"{c.handle >> 16:x}:{c.handle & 0xFFFF:x}: {why}" for c, why in list(refused.items())[:3])
            raise ShapingError(f"{self.ifname}: the kernel refused {len(refused)} of {len(changes)} class changes ({first})")

    def apply(self, classes: Mapping[int, ClassRate], previous: Mapping[int, ClassRate]) -> list[int]:
        """Make the user classes equal ``classes`` (minor → rates), touching only those that
        differ from ``previous``, in one batch (:mod:`governor.shaping.classbatch`). Returns the
        minors written or removed.

        Raises:
            ShapingError: the kernel refused a change (the others in the batch still apply).
        """
        changed = [m for m, rate in classes.items() if previous.get(m) != rate]
        gone = sorted(previous.keys() - classes.keys())
        self._send([self._change(m, classes[m]) for m in changed] + [self._change(m, None) for m in gone])
        return changed + gone

    def class_stats(self) -> dict[int, ClassStats]:
        """Counters of each of the governor's classes (minor → :class:`ClassStats`), from one dump
        (:meth:`governor.shaping.classbatch.ClassBatch.counters`).

        Raises:
            ShapingError: the dump failed (the interface went away).
        """
        try:
            return {m: ClassStats(*c) for m, c in self.batch.counters(self.index, HANDLE_MAJOR).items()}
        except OSError as exc:
            raise ShapingError(f"{self.ifname}: class counters: {exc}") from None

    def remove(self) -> bool:
        """Delete the governor's root qdisc (and with it every class). Returns whether there was one."""
        if not self.installed():
            return False
        self._tc("del", "htb", handle(0), parent=0xFFFFFFFF)
        return True
