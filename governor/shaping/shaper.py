"""All of the governor's network shaping on one host, as the control loop sees it.

Per governed interface ``IF`` there are one or two DRF resources, in bits/s:

* ``net:IF:tx`` — what leaves: the HTB tree on ``IF`` (:mod:`governor.shaping.htb`), classified
  by the sending socket's owner (:mod:`governor.shaping.nft`);
* ``net:IF:rx`` — what arrives, when ingress shaping is on: the HTB tree on the interface's IFB
  device (:mod:`governor.shaping.ingress`), classified by the connection's mark.

Each governed user has one class id (``d7f0:N``) used on every tree. :meth:`Shaper.sample` reads
every class's counters (one dump per tree) and :meth:`Shaper.apply` writes the classes that
changed (one batch per tree). Nothing is installed until the first :meth:`Shaper.install`;
:func:`remove_all` deletes everything with the governor's handles — what ``drfgov restore``
and a stopping daemon do — and nothing else.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Collection, Mapping

from governor.control.resources import Resource
from governor.shaping.classes import MinorAllocator
from governor.shaping.htb import ROOT_MINOR, HtbTree
from governor.shaping.model import ClassRate, ClassStats, Link, NetSample, ShapingError
from governor.shaping.ingress import IngressRedirect
from governor.shaping.nft import NftClassifier

log = logging.getLogger("drfgov")

__all__ = ["NFT_CHECK_S", "Shaper", "remove_all"]

#: How often (seconds) the nftables table is checked to be there still: a firewall reload
#: (``nft flush ruleset``, the first line of the stock /etc/nftables.conf) removes it, and with
#: it every user's classification, without a word to the daemon.
NFT_CHECK_S = 10.0


class Shaper:
    """The trees, redirects and nftables table for ``links``, in network namespace ``netns``."""

    def __init__(self, links: Mapping[Resource, Link], clock: Callable[[], float], netns: str | None = None):
        self.links, self.clock, self.netns = dict(links), clock, netns
        self.minors = MinorAllocator()
        self.in_force: dict[Resource, dict[int, ClassRate]] = {r: {} for r in self.links}
        self._written_minors: dict[Resource, dict[int, int]] = {r: {} for r in self.links}  # uid → class minor
        self.trees: dict[Resource, HtbTree] = {}
        self.redirects: dict[Resource, IngressRedirect] = {}
        self.nft: NftClassifier | None = None
        self.mapped: dict[int, int] = {}
        self._nft_checked_s = float("-inf")

    @property
    def ingress(self) -> bool:
        return any(link.direction == "rx" for link in self.links.values())

    def install(self) -> None:
        """Remove anything a previous run left (and this object's own pieces), then build every
        tree and the table. All or nothing: an install that fails leaves nothing installed on
        record, so the next :meth:`sample` tries again (and fails visibly) rather than going on
        with some trees and empty maps (the review of the reinstall: an interface gone at
        runtime left every link unshaped, silently).

        Raises:
            ShapingError: a kernel piece is missing or an admin's qdisc is in the way (named).
        """
        self._forget()
        remove_all(self.netns)
        nft = NftClassifier(self.netns, ingress=self.ingress)
        nft.install()
        trees: dict[Resource, HtbTree] = {}
        redirects: dict[Resource, IngressRedirect] = {}
        try:
            for resource, link in self.links.items():
                if link.direction == "tx":
                    tree = trees[resource] = HtbTree(link.ifname, self.netns)
                    tree.install(int(link.capacity_bits_per_s))
                else:
                    redirect = redirects[resource] = IngressRedirect(link.ifname, self.netns)
                    trees[resource] = redirect.install(int(link.capacity_bits_per_s))
        except BaseException:
            for part in (*trees.values(), *redirects.values()):
                part.close()
            raise
        self.nft, self.trees, self.redirects = nft, trees, redirects
        self._nft_checked_s = self.clock()

    def sample(self, uids: Collection[int]) -> NetSample:
        """Give ``uids`` their class ids (new users join the nftables maps), then read every class.
        Pieces someone removed — the table (checked every :data:`NFT_CHECK_S`), a tree's root
        class (a qdisc deleted, the interface made again) — are installed again first, and every
        class written again after (the shaping audit of 2026-11-26: it went on unshaped, and
        uncounted, for the daemon's lifetime)."""
        if self.nft is None:
            self.install()
        stats, lost = self._stats()
        if lost:
            log.warning("shaping: %s: installing it again", lost)
            self.install()
            stats, lost = self._stats()
            if lost:
                raise ShapingError(lost)
        by_uid = self.minors.assign(uids)
        if by_uid != self.mapped:
            try:
                self.nft.apply(by_uid, self.mapped)
            except ShapingError:
                if self.nft.installed():
                    raise
                log.warning("shaping: the nftables table was removed (a firewall reload?): installing it again")
                self.install()
                self.nft.apply(by_uid, {})
            self.mapped = by_uid
        uid_of = {minor: uid for uid, minor in by_uid.items()}
        sent = {r: {uid_of[m]: c.bytes for m, c in st.items() if m in uid_of} for r, st in stats.items()}
        held = {r: {uid_of[m]: c.overlimits for m, c in st.items() if m in uid_of} for r, st in stats.items()}
        return NetSample(self.clock(), sent, held)

    def _stats(self) -> tuple[dict[Resource, dict[int, ClassStats]], str | None]:
        """Every tree's class counters (one dump each), and what of the shaping is gone, said in a
        few words (then no counters): the table (checked every :data:`NFT_CHECK_S`), a tree's
        root class, a tree's interface."""
        now = self.clock()
        if now - self._nft_checked_s >= NFT_CHECK_S or now < self._nft_checked_s:
            self._nft_checked_s = now
            if not self.nft.installed():
                return {}, "the nftables table was removed (a firewall reload?)"
        stats = {}
        for resource, tree in self.trees.items():
            try:
                stats[resource] = tree.class_stats()
            except ShapingError as exc:
                return {}, f"{resource}: {exc}"
            if ROOT_MINOR not in stats[resource]:
                return {}, f"{resource}: the HTB tree on {tree.ifname} was removed"
        return stats, None

    def apply(self, wanted: Mapping[Resource, Mapping[int, ClassRate]]) -> list[str]:
        """Make each resource's classes equal ``wanted`` (resource → uid → rates): changed ones are
        written and classes of users not listed are deleted, one batch per tree. Returns errors
        (a tree that refused keeps its previous classes on record)."""
        errors = []
        for resource, tree in self.trees.items():
            target = {uid: rate for uid, rate in wanted.get(resource, {}).items() if uid in self.mapped}
            before, minors = self.in_force[resource], self._written_minors[resource]
            try:
                # the classes in force by the minors they were written under: a user who left
                # is no longer mapped, and her class is deleted (or rewritten for the minor's new owner)
                touched = tree.apply({self.mapped[u]: r for u, r in target.items()},
                                     {minors[u]: r for u, r in before.items() if u in minors})
                if touched:
                    log.debug("%s (%s, index %d): classes %s written or removed", resource, tree.ifname, tree.index,
                              ", ".join(f"{m:x}" for m in touched))
            except ShapingError as exc:
                errors.append(f"{resource}: {exc}")
                continue
            self.in_force[resource] = dict(target)
            self._written_minors[resource] = {u: self.mapped[u] for u in target}
        return errors

    def close(self) -> None:
        for tree in self.trees.values():
            tree.close()
        for redirect in self.redirects.values():
            redirect.close()
        self.trees, self.redirects = {}, {}

    def _forget(self) -> None:
        """Close what is open and keep nothing on record as installed or in force."""
        self.close()
        self.nft, self.mapped = None, {}
        self.in_force = {r: {} for r in self.links}
        self._written_minors = {r: {} for r in self.links}

    def remove(self) -> list[str]:
        """Close and delete everything (see :func:`remove_all`); returns errors."""
        self._forget()
        return remove_all(self.netns)


def remove_all(netns: str | None = None) -> list[str]:
    """Delete every HTB root ``d7f0:``, every redirect to a ``drfgovN`` IFB device and the
    device (one whose interface N is gone too), and the ``inet drfgov`` table, on every
    interface of ``netns``. Returns errors (it tries everything); nothing without the
    governor's handles or names is touched."""
    from pyroute2 import IPRoute, NetNS

    errors = []
    with (NetNS(netns) if netns else IPRoute()) as ipr:
        links = {link["index"]: (link.get_attr("IFLA_IFNAME"), _kind(link)) for link in ipr.get_links()}
        for index in _orphan_ifbs(links):  # no redirect is left for it to go with: it goes alone
            try:
                ipr.link("del", index=index)
            except Exception as exc:  # noqa: BLE001 - pyroute2's NetlinkError: said, the rest goes on
                errors.append(f"{links[index][0]}: delete IFB device: {exc}")
    names = [name for name, _ in links.values()]
    for name in names:
        if name.startswith("drfgov"):
            continue  # an IFB device goes with its interface's redirect
        for remover in (lambda: IngressRedirect(name, netns), lambda: HtbTree(name, netns)):
            try:
                part = remover()
            except ShapingError:
                continue  # the interface went away meanwhile
            try:
                part.remove()
            except ShapingError as exc:
                errors.append(str(exc))
            finally:
                part.close()
    if shutil.which("nft") or os.path.exists("/usr/sbin/nft"):  # without nft no table of ours can exist
        try:
            NftClassifier(netns).remove()
        except ShapingError as exc:
            errors.append(str(exc))
    return errors


def _kind(link) -> str | None:
    """A link's kind (``ifb``, ``veth``, …) from its IFLA_LINKINFO, or None."""
    info = link.get_attr("IFLA_LINKINFO")
    return info.get_attr("IFLA_INFO_KIND") if info is not None else None


def _orphan_ifbs(links: Mapping[int, tuple[str, str | None]]) -> list[int]:
    """Indexes of our IFB devices (``drfgovN``: :func:`governor.shaping.ingress.ifb_name`)
    whose interface N is gone — a VLAN or VPN deleted, a start that failed half-way — among
    ``links`` (index → (name, kind))."""
    return [index for index, (name, kind) in links.items()
            if kind == "ifb" and name.startswith("drfgov") and name[6:].isdigit() and int(name[6:]) not in links]
