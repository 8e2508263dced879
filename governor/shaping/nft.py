"""Egress classification by socket owner, in the governor's own nftables table (``nft -j``).

One table, ``inet drfgov``: a map ``uid_class`` (uid → HTB class id) and one output-hook rule
``meta priority set meta skuid map @uid_class`` — a packet sent by a governed user's socket
carries her class id as its priority, which HTB honours (:mod:`governor.shaping.htb`). Other
packets miss the map and go to HTB's default class.

With ingress shaping (:mod:`governor.shaping.ingress`) a second map ``uid_mark`` (uid → the
same class id as a 32-bit mark) and rule ``ct mark 0 ct mark set meta skuid map @uid_mark``
label her connections, so their arriving packets can be classified. A connection someone else
already marked keeps its mark (and arrives in the default class). Updates add and delete map elements in one
atomic batch; :func:`remove` deletes the table and nothing else. nftables' JSON interface is
driven through the ``nft`` command (libnftables-json(5)), not hand-built netlink.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping

from governor.shaping.model import HANDLE_MAJOR, ShapingError

__all__ = ["TABLE", "NftClassifier"]

TABLE = {"family": "inet", "name": "drfgov"}
MAP, MARK_MAP = "uid_class", "uid_mark"
CHAIN = "egress"
_RULE = [{"mangle": {"key": {"meta": {"key": "priority"}},
                     "value": {"map": {"key": {"meta": {"key": "skuid"}}, "data": f"@{MAP}"}}}}]
_MARK_RULE = [{"match": {"op": "==", "left": {"ct": {"key": "mark"}}, "right": 0}},
              {"mangle": {"key": {"ct": {"key": "mark"}},
                          "value": {"map": {"key": {"meta": {"key": "skuid"}}, "data": f"@{MARK_MAP}"}}}}]


def classid(minor: int) -> str:
    return f"{HANDLE_MAJOR:x}:{minor:x}"


def mark(minor: int) -> int:
    """The class id ``d7f0:minor`` as the 32-bit mark cls_fw reads back (see :mod:`governor.shaping.ingress`)."""
    return HANDLE_MAJOR << 16 | minor


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
        """Create the table, map, chain and rule (idempotent: an existing table is kept)."""
        if self.installed():
            return
        commands = [
            {"add": {"table": TABLE}},
            {"add": {"map": {**_in_table(), "name": MAP, "type": "uid", "map": "classid"}}},
            {"add": {"chain": {**_in_table(), "name": CHAIN, "type": "filter", "hook": "output", "prio": 0,
                               "policy": "accept"}}},
            {"add": {"rule": {**_in_table(), "chain": CHAIN, "expr": _RULE}}},
        ]
        if self.ingress:
            commands[2:2] = [{"add": {"map": {**_in_table(), "name": MARK_MAP, "type": "uid", "map": "mark"}}}]
            commands.append({"add": {"rule": {**_in_table(), "chain": CHAIN, "expr": _MARK_RULE}}})
        self._run("-f", "-", commands=commands)

    def apply(self, wanted: Mapping[int, int], current: Mapping[int, int]) -> int:
        """Make the map equal ``wanted`` (uid → minor) in one batch; returns elements changed."""
        gone = [uid for uid in current if current[uid] != wanted.get(uid)]
        new = [(uid, minor) for uid, minor in wanted.items() if current.get(uid) != minor]
        commands = []
        for name, value in ((MAP, classid), (MARK_MAP, mark))[: 2 if self.ingress else 1]:
            if gone:
                commands.append({"delete": {"element": {**_in_table(), "name": name, "elem": gone}}})
            if new:
                commands.append({"add": {"element": {**_in_table(), "name": name,
                                                     "elem": [[uid, value(minor)] for uid, minor in new]}}})
        if commands:
            self._run("-f", "-", commands=commands)
        return len(gone) + len(new)

    def remove(self) -> bool:
        """Delete the governor's table (and only it). Returns whether there was one."""
        if not self.installed():
            return False
        self._run("-f", "-", commands=[{"delete": {"table": TABLE}}])
        return True


def _in_table() -> dict:
    return {"family": TABLE["family"], "table": TABLE["name"]}
