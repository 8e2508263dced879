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
from governor.shaping.conntrack import BUDGET_S, track_liberally
from governor.shaping.htb import ROOT_MINOR, HtbTree
from governor.shaping.model import ClassRate, ClassStats, InterfaceGone, Link, NetSample, ShapingError
from governor.shaping.ingress import IngressRedirect
from governor.shaping.nft import OURS_MARK, OURS_MASK, NftClassifier

log = logging.getLogger("drfgov")

__all__ = ["INVALID_WARN_S", "NFT_CHECK_S", "Shaper", "remove_all"]

#: How often (seconds) the nftables table is checked to be there still: a firewall reload
#: (``nft flush ruleset``, the first line of the stock /etc/nftables.conf) removes it, and with
#: it every user's classification, without a word to the daemon.
NFT_CHECK_S = 10.0

#: How often at most (seconds) the shaper warns that packets of governed users' connections
#: are INVALID for conntrack (:meth:`NftClassifier.invalid_packets`): once an hour while it lasts.
INVALID_WARN_S = 3600.0


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
        #: links not installed (resource → why): :meth:`sample` tries them again each tick
        self.missing: dict[Resource, str] = {}
        self._away: set[Resource] = set()  # of those, the ones whose interface is not there
        self._nft_checked_s = float("-inf")
        self._invalid_packets, self._invalid_warned_s = 0, float("-inf")  # the table's count; last warning

    @property
    def ingress(self) -> bool:
        return any(link.direction == "rx" for link in self.links.values())

    def install(self, every_link: bool = False) -> None:
        """Remove anything a previous run left (and this object's own pieces), then replace the
        nftables table (one transaction: :meth:`NftClassifier.install`) and install each link's
        tree (:meth:`_install_link`). A link that cannot be installed — its interface gone (a
        VPN down, a USB adapter out), an admin's qdisc on it — is left out, said in
        :attr:`missing`, and tried again at every :meth:`sample`;
        the others are shaped meanwhile (it used to be all or nothing: one interface gone left
        every link unshaped). With ``every_link`` (a start or a reload: the policy is being
        checked) a link that cannot be installed for another reason than its interface being
        away (:class:`InterfaceGone`: a VPN down at boot) fails the install: an admin's qdisc
        in the way, a kernel module missing.

        Raises:
            ShapingError: the table cannot be installed, or a link is refused (not merely
                away) and no link is installed — or, with ``every_link``, any is refused —
                each named. Nothing is then on record as installed, nor left in the kernel
                by this install. Links that are all away install nothing but the table: each
                :meth:`sample` tries them and says so.
        """
        self._forget()
        remove_all(self.netns, keep_table=True)  # the table is replaced in one transaction
        nft = NftClassifier(self.netns, ingress=self.ingress)
        if self.ingress and not nft.marks_connections():
            # nothing of ours kept connection tracking on: told before the install turns it on
            self._track_survivors()
        nft.install()
        self.nft, self._invalid_packets = nft, 0  # a new table counts from 0
        for resource in self.links:
            self._install_link(resource)
        refused = set(self.missing) - self._away  # not for an interface away: the kernel or an admin said no
        if refused and (every_link or not self.trees):
            problems = "; ".join(self.missing.values())
            self.remove()
            raise ShapingError(problems)
        self._nft_checked_s = self.clock()

    def _track_survivors(self) -> None:
        """Before an install that finds no table of the governor's marking connections (a start
        after a stop's restore, a firewall's flush, a reload that had turned ingress off):
        governed users' connections marked before it — nothing of the governor's kept them
        tracked since — tracked liberally from now on
        (:func:`governor.shaping.conntrack.track_liberally`). A failure is said, not raised:
        what it spares is what :meth:`_note_invalid` warns of."""
        try:
            done = track_liberally(OURS_MARK, OURS_MASK, self.netns)
        except ShapingError as exc:
            log.warning("shaping: connections marked before this install keep conntrack's strict TCP window: %s", exc)
            return
        if done.changed or done.failed or done.out_of_time:
            log.info("shaping: %d connections marked before this install are tracked liberally (their TCP window may "
                     "have moved while nothing tracked them)%s%s", done.changed,
                     f"; {done.failed} could not be told (gone, or refused)" if done.failed else "",
                     f"; the rest were left as they are after {BUDGET_S:g} s" if done.out_of_time else "")

    def _install_link(self, resource: Resource) -> bool:
        """Install ``resource``'s tree (and its redirect for ``rx``), its classes none yet (the
        next :meth:`apply` writes them all); a failure is kept in :attr:`missing`, not raised.
        Returns whether it is installed."""
        link = self.links[resource]
        try:
            if link.direction == "tx":
                tree = HtbTree(link.ifname, self.netns)
                redirect = None
                try:
                    tree.install(int(link.capacity_bits_per_s))
                except BaseException:
                    tree.close()
                    raise
            else:
                _remove_orphan_ifbs(self.netns)  # an IFB of this interface's last index
                redirect = IngressRedirect(link.ifname, self.netns)
                try:
                    tree = redirect.install(int(link.capacity_bits_per_s))
                except BaseException:
                    redirect.close()
                    raise
        except ShapingError as exc:
            self.missing[resource] = str(exc)
            if isinstance(exc, InterfaceGone):
                self._away.add(resource)
            else:
                self._away.discard(resource)
            return False
        self.trees[resource] = tree
        if redirect is not None:
            self.redirects[resource] = redirect
        self.missing.pop(resource, None)
        self._away.discard(resource)
        self.in_force[resource], self._written_minors[resource] = {}, {}
        return True

    def _drop_link(self, resource: Resource, why: str) -> None:
        """Remove what is left of ``resource``'s pieces (as far as the kernel lets: its interface
        may be gone), close them, and keep nothing of it as in force: it is in :attr:`missing`
        for ``why`` until installed again. An ingress redirect left behind to a deleted IFB
        device dropped every packet arriving on the interface, and its qdisc barred the
        reinstall (the review of the per-link install)."""
        tree, redirect = self.trees.pop(resource, None), self.redirects.pop(resource, None)
        part = redirect if redirect is not None else tree  # a redirect removes and closes its tree too
        if part is not None:
            try:
                part.remove()
            except ShapingError:
                pass  # the interface, or the piece, is gone already
            finally:
                part.close()
        self.in_force[resource], self._written_minors[resource] = {}, {}
        self.missing[resource] = why

    def sample(self, uids: Collection[int]) -> NetSample:
        """Give ``uids`` their class ids (new users join the nftables maps), then read every
        installed tree's classes. Pieces someone removed are installed again first, and their
        classes written again after (the shaping audit of 2026-11-26: it went on unshaped, and
        uncounted, for the daemon's lifetime): the table (checked every :data:`NFT_CHECK_S`;
        everything is installed again), a tree's root class or interface (checked every tick;
        that link alone). A link in :attr:`missing` is tried again; meanwhile it has no
        counters, and :meth:`apply` says why.

        Raises:
            ShapingError: the table cannot be installed again, or no link is installed.
        """
        if self.nft is None:
            self.install()
        for resource in [r for r in self.links if r in self.missing]:
            if self._install_link(resource):
                log.warning("shaping: %s: installed again", resource)
        stats, lost = self._stats()
        if lost:
            log.warning("shaping: %s: installing it again", lost)
            self.install()
            stats, lost = self._stats()
            if lost:
                raise ShapingError(lost)
        if not self.trees:
            raise ShapingError("; ".join(self.missing.values()))
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
        """Every installed tree's class counters (one dump each), and whether the table is gone,
        in a few words (then no counters; checked every :data:`NFT_CHECK_S`). A tree whose
        dump fails or whose root class is gone (a qdisc deleted, the interface made again or
        gone) is installed again alone; when that fails it is dropped into :attr:`missing`."""
        now = self.clock()
        checked = now - self._nft_checked_s >= NFT_CHECK_S or now < self._nft_checked_s
        if checked:
            self._nft_checked_s = now
            invalid = self.nft.invalid_packets()
            if invalid is None:
                return {}, "the nftables table was removed (a firewall reload?)"
            self._note_invalid(invalid, now)
        stats = {}
        for resource in list(self.trees):
            found, lost = self._tree_stats(resource, checked)
            if lost is not None:
                log.warning("shaping: %s: %s: installing it again", resource, lost)
                self._drop_link(resource, lost)
                if not self._install_link(resource):
                    continue
                found, lost = self._tree_stats(resource, True)
                if lost is not None:
                    self._drop_link(resource, lost)
                    continue
            stats[resource] = found
        return stats, None

    def _note_invalid(self, count: int, now: float) -> None:
        """Warn (at most every :data:`INVALID_WARN_S`) when the table's count of governed users'
        packets conntrack held INVALID rose: those connections cannot be marked, and what
        arrives on them is counted in whichever class their old mark names."""
        rose, self._invalid_packets = count - self._invalid_packets, count
        if rose > 0 and now - self._invalid_warned_s >= INVALID_WARN_S:
            self._invalid_warned_s = now
            log.warning("shaping: %d packets of governed users' connections were INVALID for conntrack since the "
                        "last check (out of its TCP window after a restart, or tracking lost): they cannot be marked, "
                        "and what arrives on those connections is counted in the class their old mark names, until "
                        "they end; sysctl net.netfilter.nf_conntrack_tcp_be_liberal=1 keeps them tracked (said again "
                        "in %.0f s if it lasts)", rose, INVALID_WARN_S)

    def _tree_stats(self, resource: Resource, redirect_checked: bool = False
                    ) -> tuple[dict[int, ClassStats], str | None]:
        """``resource``'s class counters, or what is wrong with its tree. An ingress tree lives on
        its IFB device, which outlives the interface: that the interface is still the one
        redirected is checked every tick (one lookup), and with ``redirect_checked`` that the
        redirect is still in place (its queue and filter)."""
        redirect = self.redirects.get(resource)
        if redirect is not None:
            ifname = self.links[resource].ifname
            try:
                found = redirect.ipr.link_lookup(ifname=ifname)
            except Exception as exc:  # noqa: BLE001 - pyroute2's NetlinkError: the link is not to be trusted
                return {}, f"{ifname}: {exc}"
            if found != [redirect.index]:
                return {}, f"{ifname}: the interface is gone" if not found else f"{ifname}: the interface was made again"
            if redirect_checked and not redirect.installed():
                return {}, f"{ifname}: the ingress redirect was removed"
        tree = self.trees[resource]
        try:
            found = tree.class_stats()
        except ShapingError as exc:
            return {}, str(exc)
        if ROOT_MINOR not in found:
            return {}, f"the HTB tree on {tree.ifname} was removed"
        return found, None

    def apply(self, wanted: Mapping[Resource, Mapping[int, ClassRate]]) -> list[str]:
        """Make each resource's classes equal ``wanted`` (resource → uid → rates): changed ones are
        written and classes of users not listed are deleted, one batch per tree. Returns errors:
        a tree that refused (it keeps its previous classes on record), and each link in
        :attr:`missing` (not shaped, and why)."""
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
        errors.extend(f"{resource}: not shaped: {why}" for resource, why in self.missing.items())
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
        self.missing, self._away = {}, set()
        self.in_force = {r: {} for r in self.links}
        self._written_minors = {r: {} for r in self.links}

    def remove(self, keep_table: bool = False) -> list[str]:
        """Close and delete everything (see :func:`remove_all`; ``keep_table``: the nftables
        table stays for an install to replace); returns errors."""
        self._forget()
        return remove_all(self.netns, keep_table=keep_table)


def remove_all(netns: str | None = None, keep_table: bool = False) -> list[str]:
    """Delete every HTB root ``d7f0:``, every redirect to a ``drfgovN`` IFB device and the
    device (one whose interface N is gone too), and the ``inet drfgov`` table, on every
    interface of ``netns``. Returns errors (it tries everything); nothing without the
    governor's handles or names is touched.

    ``keep_table``: leave the table, for :meth:`NftClassifier.install` to replace in one
    transaction (an install after this: its ``ct`` rules keep connection tracking on
    throughout; see there)."""
    errors, links = _remove_orphan_ifbs(netns)
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
    # no nft: no table of ours can exist
    if not keep_table and (shutil.which("nft") or os.path.exists("/usr/sbin/nft")):
        try:
            NftClassifier(netns).remove()
        except ShapingError as exc:
            errors.append(str(exc))
    return errors


def _remove_orphan_ifbs(netns: str | None) -> tuple[list[str], dict[int, tuple[str, str | None]]]:
    """Delete our IFB devices whose interface is gone (:func:`_orphan_ifbs`): no redirect is
    left for them to go with. Returns the errors and the links as found (index → (name, kind))."""
    from pyroute2 import IPRoute, NetNS

    errors = []
    with (NetNS(netns) if netns else IPRoute()) as ipr:
        links = {link["index"]: (link.get_attr("IFLA_IFNAME"), _kind(link)) for link in ipr.get_links()}
        for index in _orphan_ifbs(links):
            try:
                ipr.link("del", index=index)
            except Exception as exc:  # noqa: BLE001 - pyroute2's NetlinkError: said, the rest goes on
                errors.append(f"{links[index][0]}: delete IFB device: {exc}")
    return errors, links


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
