"""The persisted snapshot of each slice's original limits, for restore after any exit.

Before the governor first writes to a slice it reads the slice's limits (:class:`LimitSet`)
and this file is rewritten — atomically, before the write — so whichever way the daemon ends
(SIGTERM, a crash, SIGKILL), ``drfgov restore`` (the unit's ExecStopPost) or the next start
can put them back. It lives beside state.json in /run: the limits it protects are runtime
settings too (systemd's ``runtime=true`` properties, cgroup files), gone after a reboot.

Format (JSON, version 1)::

    {"version": 1, "backend": "systemd",
     "slices": {"1001": {"cgroup": "/sys/fs/cgroup/user.slice/user-1001.slice",
                         "limits": {"cpu.max": "max 100000", "cpu.weight": 100, "memory.low": 0,
                                    "memory.high": null, "memory.max": null,
                                    "io.max": {"8:0": "rbps=max wbps=max riops=max wiops=max"}}}}}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cgroups import Cgroup
from governor.enforce.apply import restore_originals
from governor.enforce.model import Backend, LimitSet, Target
from governor.service.atomic import write_atomic

__all__ = ["SnapshotError", "load_snapshot", "remove_snapshot", "restore_snapshot", "save_snapshot"]

VERSION = 1


class SnapshotError(Exception):
    """The snapshot file exists but cannot be read; the message names it and why."""


@dataclass(frozen=True)
class Snapshot:
    backend: str
    originals: dict[int, tuple[Target, LimitSet]]


def save_snapshot(path: Path, backend: str, originals: Mapping[int, tuple[Target, LimitSet]]) -> None:
    """Write the snapshot atomically (mode 0600: it is the daemon's, not the users')."""
    doc = {"version": VERSION, "backend": backend,
           "slices": {str(uid): {"cgroup": str(target.cgroup.path), "limits": limits.to_json()}
                      for uid, (target, limits) in sorted(originals.items())}}
    write_atomic(path, json.dumps(doc, indent=1) + "\n", mode=0o600)


def load_snapshot(path: Path) -> Snapshot | None:
    """The snapshot at ``path``, or None when there is none (a clean stop removed it)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"{path}: unreadable snapshot of original limits: {exc}") from None
    try:
        if doc.get("version") != VERSION:
            raise ValueError(f"version {doc.get('version')!r}, expected {VERSION}")
        originals = {int(uid): (Target(int(uid), Cgroup(_slice_path(int(uid), entry["cgroup"]))),
                                LimitSet.from_json(entry["limits"]))
                     for uid, entry in doc["slices"].items()}
        return Snapshot(str(doc["backend"]), originals)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise SnapshotError(f"{path}: malformed snapshot of original limits: {exc}") from None


def _slice_path(uid: int, path: str) -> str:
    """``path`` if it is uid's own slice, ``…/user.slice/user-UID.slice`` (absolute, no ``..``):
    restore writes limits there as root, so a snapshot must not send it anywhere else.

    Raises:
        ValueError: any other path.
    """
    p = PurePosixPath(str(path))
    if not p.is_absolute() or ".." in p.parts or p.name != f"user-{uid}.slice" or p.parent.name != "user.slice":
        raise ValueError(f"slice {uid}: {path!r} is not user.slice/user-{uid}.slice")
    return str(p)


def restore_snapshot(snapshot: Snapshot, backend: Backend, margin_bytes: int = 0,
                     notes: list[str] | None = None) -> tuple[list[str], dict[int, str]]:
    """Apply every original (:func:`governor.enforce.apply.restore_originals`: an original
    memory.max below what she holds goes to memory.high, memory.max to her use + ``margin_bytes``;
    what it did instead goes to ``notes``). Returns the units restored and, per uid that failed,
    the error. A slice that is gone needs nothing."""
    return restore_originals(backend, snapshot.originals, margin_bytes, notes)


def remove_snapshot(path: Path) -> None:
    path.unlink(missing_ok=True)
