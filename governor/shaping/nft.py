"""Egress classification by socket owner, in the governor's own nftables table (``nft -j``).

One table, ``inet drfgov``: a map ``uid_class`` (uid → HTB class id) and one output-hook rule
``meta priority set meta skuid map @uid_class`` — a packet sent by a governed user's socket
carries her class id as its priority, which HTB honours (:mod:`governor.shaping.htb`). Other
packets miss the map and go to HTB's default class.

With ingress shaping (:mod:`governor.shaping.ingress`) a second map ``uid_mark`` (uid → the
same class id as a 32-bit mark) labels her connections, so their arriving packets can be
classified. Two rules, at every packet a socket sends:

* ``ct mark { 0, d7f00000-d7f0ffff } ct mark set meta skuid map @uid_mark``: an unmarked
  connection of a governed user takes her mark, and one marked in the governor's range takes
  her mark *now* (the kernel writes it only when it differs: ``nft_ct_set_eval``,
  net/netfilter/nft_ct.c). A connection keeps its mark after the table is gone, so a mark
  set once and never again outlived the class ids it named: after a restart or a reload that
  hands class ids out again, a long-lived download arrived in whichever user's class now has
  its old id (the shaping audit's "stale ingress marks", carried in the closing notes from
  2026-11-26);
* ``ct mark & 0xffff0000 == 0xd7f00000 meta skuid != @uid_marked ct mark set 0``: a mark of
  the governor's on a connection whose owner is governed no more is taken off (the default
  class), so her old id, given to someone else, does not bring her traffic with it. The set
  ``uid_marked`` holds the map's uids, changed in the same batch: the kernel refuses a map
  as the set of a lookup (``nft_lookup_init``; Debian 12's Linux 6.1 answers EINVAL, newer
  ones take it).

One more rule counts the packets of governed users' connections that conntrack holds INVALID
(``ct state invalid meta skuid @uid_marked counter``, comment ``invalid``): such a packet has
no connection attached, so the rules above cannot mark it, and what arrives on the connection
keeps the class its old mark names. A download running while nothing tracked — across a
restart, where no other ruleset uses conntrack — was out of conntrack's TCP window for good
on Linux 6.1 (the restart tests of tier 2): before an install that finds no table of the
governor's marking connections, the shaper has the connections carrying its marks tracked
liberally (:mod:`governor.shaping.conntrack`);
:meth:`NftClassifier.invalid_packets` reads the count of what is left, and the shaper says
when it rises.

All the rules leave what goes out through a loopback device alone (``meta oiftype != loopback``):
a connection between two local users is sent by both of them, and re-marked at every packet
her mark and his would take turns (a conntrack mark event each), for nothing — loopback is
never shaped. A connection someone else marked (any other mark) keeps its mark and arrives in
the default class. A packet with no socket (forwarded, a reset the kernel sends alone) has no ``skuid``:
both rules stop there and change nothing. Updates add and delete map elements in one atomic
batch; :func:`remove` deletes the table and nothing else. nftables' JSON interface is driven
through the ``nft`` command (libnftables-json(5)), not hand-built netlink.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping

from governor.shaping.model import HANDLE_MAJOR, ShapingError

__all__ = ["OURS_MARK", "OURS_MASK", "TABLE", "NftClassifier"]

TABLE = {"family": "inet", "name": "drfgov"}
MAP, MARK_MAP, MARKED_SET = "uid_class", "uid_mark", "uid_marked"
CHAIN = "egress"
_CT_MARK = {"ct": {"key": "mark"}}
_SKUID = {"meta": {"key": "skuid"}}
_RULE = [{"mangle": {"key": {"meta": {"key": "priority"}}, "value": {"map": {"key": _SKUID, "data": f"@{MAP}"}}}}]
#: A connection mark ``m`` is one of the governor's class ids when ``m & OURS_MASK == OURS_MARK``.
OURS_MARK, OURS_MASK = HANDLE_MAJOR << 16, 0xFFFF0000
_NOT_LOOPBACK = {"match": {"op": "!=", "left": {"meta": {"key": "oiftype"}}, "right": "loopback"}}
_MARK_RULE = [_NOT_LOOPBACK,
              {"match": {"op": "==", "left": _CT_MARK,
                         "right": {"set": [0, {"range": [OURS_MARK, OURS_MARK | ~OURS_MASK & 0xFFFFFFFF]}]}}},
              {"mangle": {"key": _CT_MARK, "value": {"map": {"key": _SKUID, "data": f"@{MARK_MAP}"}}}}]
_INVALID_COMMENT = "invalid"
_INVALID_RULE = [_NOT_LOOPBACK,
                 {"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": "invalid"}},
                 {"match": {"op": "==", "left": _SKUID, "right": f"@{MARKED_SET}"}},
                 {"counter": None}]
_FORGET_RULE = [_NOT_LOOPBACK,
                {"match": {"op": "==", "left": {"&": [_CT_MARK, OURS_MASK]}, "right": OURS_MARK}},
                {"match": {"op": "!=", "left": _SKUID, "right": f"@{MARKED_SET}"}},
                {"mangle": {"key": _CT_MARK, "value": 0}}]


def classid(minor: int) -> str:
    return f"{HANDLE_MAJOR:x}:{minor:x}"


def mark(minor: int) -> int:
    """The class id ``d7f0:minor`` as the 32-bit mark cls_fw reads back (see :mod:`governor.shaping.ingress`)."""
    return OURS_MARK | minor


class NftClassifier:
    """The table in network namespace ``netns`` (None: this one); ``ingress``: also mark connections."""

    def __init__(self, netns: str | None = None, ingress: bool = False):
        self.ingress = ingress
        nft = shutil.which("nft") or "/usr/sbin/nft"
        self.argv = (["ip", "netns", "exec", netns] if netns else []) + [nft, "-j"]

    def _run(self, *args: str, commands: list | None = None) -> dict:
        text = None if commands is None else json.dumps({"nftables": commands})
        try:
            out = subprocess.run([*self.argv, *args], input=text, capture_output=True, text=True, timeout=30)
        except OSError as exc:
            raise ShapingError(f"nft: {exc} (install nftables)") from None
        except subprocess.TimeoutExpired:
            raise ShapingError(f"nft {' '.join(args)}: no answer in 30 s") from None
        if out.returncode != 0:
            raise ShapingError(f"nft {' '.join(args)}: {out.stderr.strip()}")
        try:
            return json.loads(out.stdout) if out.stdout.strip() else {}
        except ValueError as exc:
            raise ShapingError(f"nft {' '.join(args)}: output not JSON: {exc}") from None

    def installed(self) -> bool:
        tables = self._run("list", "tables").get("nftables", [])
        return any(t.get("table", {}).get("name") == TABLE["name"] and t["table"]["family"] == TABLE["family"]
                   for t in tables)

    def install(self) -> None:
        """Create the table, its maps, set, chain and rules, empty; a table of the name that is
        there already (a previous run's) is deleted in the same batch — one nftables
        transaction, so the old rules hold until the new ones are in.

        One transaction matters with ingress marks: the rules' ``ct`` expressions are what keeps
        the network namespace's connection tracking on (``nf_ct_netns_get``, taken when a rule
        is made and let go when it is destroyed, after the transaction that deleted it). A
        table deleted by one call and made by the next left a moment with none where no other
        ruleset uses conntrack; a download that ran on through it came back beyond conntrack's
        TCP window — on Debian 12's Linux 6.1 its packets were then INVALID for good (no
        connection attached, so never re-marked) and arrived, by their stale mark, in the
        class of the user who now held her old id (tier 2: 5 restarts in 60)."""
        maps = [{"add": {"map": {**_in_table(), "name": MAP, "type": "uid", "map": "classid"}}}]
        rules = [_RULE]
        if self.ingress:
            maps += [{"add": {"map": {**_in_table(), "name": MARK_MAP, "type": "uid", "map": "mark"}}},
                     {"add": {"set": {**_in_table(), "name": MARKED_SET, "type": "uid"}}}]
            rules += [_MARK_RULE, _FORGET_RULE, _INVALID_RULE]
        commands = [
            {"add": {"table": TABLE}},  # so that the delete below finds one
            {"delete": {"table": TABLE}},
            {"add": {"table": TABLE}},
            *maps,
            {"add": {"chain": {**_in_table(), "name": CHAIN, "type": "filter", "hook": "output", "prio": 0,
                               "policy": "accept"}}},
            *({"add": {"rule": {**_in_table(), "chain": CHAIN, "expr": rule,
                                **({"comment": _INVALID_COMMENT} if rule is _INVALID_RULE else {})}}}
              for rule in rules),
        ]
        self._run("-f", "-", commands=commands)

    def apply(self, wanted: Mapping[int, int], current: Mapping[int, int]) -> int:
        """Make the maps equal ``wanted`` (uid → minor), and the set of marked uids its keys, in
        one batch; returns map elements changed."""
        gone = [uid for uid in current if current[uid] != wanted.get(uid)]
        new = [(uid, minor) for uid, minor in wanted.items() if current.get(uid) != minor]
        commands = []
        for name, value in ((MAP, classid), (MARK_MAP, mark))[: 2 if self.ingress else 1]:
            if gone:
                commands.append({"delete": {"element": {**_in_table(), "name": name, "elem": gone}}})
            if new:
                commands.append({"add": {"element": {**_in_table(), "name": name,
                                                     "elem": [[uid, value(minor)] for uid, minor in new]}}})
        if self.ingress:
            left, joined = sorted(current.keys() - wanted.keys()), sorted(wanted.keys() - current.keys())
            for verb, uids in (("delete", left), ("add", joined)):
                if uids:
                    commands.append({verb: {"element": {**_in_table(), "name": MARKED_SET, "elem": uids}}})
        if commands:
            self._run("-f", "-", commands=commands)
        return len(gone) + len(new)

    def invalid_packets(self) -> int | None:
        """Packets of governed users' connections conntrack has held INVALID since the table
        was made (the fourth rule's counter; 0 without ingress marks), or None when the table
        (or its chain) is gone. One ``nft -j list chain``: the chain alone, not the maps' thousands of elements.

        Raises:
            ShapingError: nft failed, the table being there.
        """
        rules = self._rules()
        if rules is None:
            return None
        for rule in rules:
            if rule.get("comment") == _INVALID_COMMENT:
                return next((e["counter"]["packets"] for e in rule["expr"] if "counter" in e), 0)
        return 0

    def marks_connections(self) -> bool:
        """Whether a table of the governor's that marks connections (ingress: its ``ct`` rules,
        which keep connection tracking on) is there now — not when there is none, or one of
        egress alone; told by the INVALID counter's rule, made with those rules and only with
        them (a table of a release before that rule reads as not marking: its install then
        tells connections that did not need it, harmlessly). Raises as :meth:`invalid_packets`."""
        rules = self._rules()
        return rules is not None and any(rule.get("comment") == _INVALID_COMMENT for rule in rules)

    def _rules(self) -> list[dict] | None:
        """The chain's rules as ``nft -j`` lists them, or None when the table is gone — or its
        chain (a table of the name edited by hand, or someone else's): nothing of the
        governor's is classifying, and an install replaces it."""
        try:
            listed = self._run("list", "chain", TABLE["family"], TABLE["name"], CHAIN)
        except ShapingError as exc:
            if not self.installed() or "No such file or directory" in str(exc):
                return None
            raise
        return [entry["rule"] for entry in listed.get("nftables", []) if "rule" in entry]

    def remove(self) -> bool:
        """Delete the governor's table (and only it). Returns whether there was one."""
        if not self.installed():
            return False
        self._run("-f", "-", commands=[{"delete": {"table": TABLE}}])
        return True


def _in_table() -> dict:
    return {"family": TABLE["family"], "table": TABLE["name"]}
