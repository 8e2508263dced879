"""Egress classification by socket owner, in the governor's own nftables table (``nft -j``).

One table, ``inet drfgov``: a map ``uid_class`` (uid → HTB class id) and one output-hook rule
``meta priority set meta skuid map @uid_class`` — a packet sent by a governed user's socket
carries her class id as its priority, which HTB honours (:mod:`governor.shaping.htb`). Other
packets miss the map and go to HTB's default class. Updates add and delete map elements in one
atomic batch; :func:`remove` deletes the table and nothing else. nftables' JSON interface is
driven through the ``nft`` command (libnftables-json(5)), not hand-built netlink.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping

from governor.shaping.htb import HANDLE_MAJOR, ShapingError

__all__ = ["TABLE", "NftClassifier"]

TABLE = {"family": "inet", "name": "drfgov"}
MAP = "uid_class"
CHAIN = "egress"
_RULE = [{"mangle": {"key": {"meta": {"key": "priority"}},
                     "value": {"map": {"key": {"meta": {"key": "skuid"}}, "data": f"@{MAP}"}}}}]


def classid(minor: int) -> str:
    return f"{HANDLE_MAJOR:x}:{minor:x}"


class NftClassifier:
    """The table in network namespace ``netns`` (None: this one)."""

    def __init__(self, netns: str | None = None):
        nft = shutil.which("nft") or "/usr/sbin/nft"
        self.argv = (["ip", "netns", "exec", netns] if netns else []) + [nft, "-j"]

    def _run(self, *args: str, commands: list | None = None) -> dict:
        text = None if commands is None else json.dumps({"nftables": commands})
        try:
            out = subprocess.run([*self.argv, *args], input=text, capture_output=True, text=True, timeout=30)
        except OSError as exc:
            raise ShapingError(f"nft: {exc} (install nftables)") from None
        if out.returncode != 0:
            raise ShapingError(f"nft {' '.join(args)}: {out.stderr.strip()}")
        return json.loads(out.stdout) if out.stdout.strip() else {}

    def installed(self) -> bool:
        tables = self._run("list", "tables").get("nftables", [])
        return any(t.get("table", {}).get("name") == TABLE["name"] and t["table"]["family"] == TABLE["family"]
                   for t in tables)

    def install(self) -> None:
        """Create the table, map, chain and rule (idempotent: an existing table is kept)."""
        if self.installed():
            return
        self._run("-f", "-", commands=[
            {"add": {"table": TABLE}},
            {"add": {"map": {**_in_table(), "name": MAP, "type": "uid", "map": "classid"}}},
            {"add": {"chain": {**_in_table(), "name": CHAIN, "type": "filter", "hook": "output", "prio": 0,
                               "policy": "accept"}}},
            {"add": {"rule": {**_in_table(), "chain": CHAIN, "expr": _RULE}}},
        ])

    def mapping(self) -> dict[int, int]:
        """The uid → class minor map as the kernel has it."""
        listed = self._run("list", "map", TABLE["family"], TABLE["name"], MAP).get("nftables", [])
        for entry in listed:
            if "map" in entry:
                return {int(uid): int(cls.split(":")[1], 16) for uid, cls in entry["map"].get("elem", [])}
        return {}

    def apply(self, wanted: Mapping[int, int], current: Mapping[int, int]) -> int:
        """Make the map equal ``wanted`` (uid → minor) in one batch; returns elements changed."""
        gone = [uid for uid in current if current[uid] != wanted.get(uid)]
        new = [(uid, minor) for uid, minor in wanted.items() if current.get(uid) != minor]
        commands = []
        if gone:
            commands.append({"delete": {"element": {**_in_table(), "name": MAP, "elem": gone}}})
        if new:
            commands.append({"add": {"element": {**_in_table(), "name": MAP,
                                                 "elem": [[uid, classid(minor)] for uid, minor in new]}}})
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
