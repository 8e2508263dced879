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
import os
import re
import stat
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
    """The snapshot file exists but is not a snapshot; the message names it, the line or field,
    and what was expected."""


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


#: The largest snapshot read (~300 bytes a slice: a million slices fit).
MAX_SNAPSHOT_BYTES = 256 << 20
_EXPECTED = "expected a drfgov snapshot of original limits (JSON, version 1)"
_INT = re.compile(r"[0-9]+")


def load_snapshot(path: Path) -> Snapshot | None:
    """The snapshot at ``path``, or None when there is none (a clean stop removed it).

    Raises:
        SnapshotError: the file is there but is not a snapshot, in one line naming the file,
            the line (of JSON that does not parse) or the field (``slices.1001.limits.cpu.max``),
            and what was expected — never Python's own words. Whose input it is, and so the
            exit status, is the caller's to say (``drfgov restore``: a ``--snapshot`` named is
            input, exit 2; the daemon's own, exit 1).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot be read ({exc.strerror or exc}): {_EXPECTED}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SNAPSHOT_BYTES:  # before a byte is read: a FIFO would
        os.close(fd)  # hang, a device fill memory
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file" if not stat.S_ISREG(st.st_mode)
                else f"{st.st_size} bytes, over {MAX_SNAPSHOT_BYTES}")
        raise SnapshotError(f"{path}: {kind}: {_EXPECTED}")
    with open(fd, "rb", buffering=0) as f:
        try:
            data = f.read(MAX_SNAPSHOT_BYTES + 1)
        except OSError as exc:
            raise SnapshotError(f"{path}: cannot be read ({exc.strerror or exc}): {_EXPECTED}") from None
    if not data.strip():
        raise SnapshotError(f"{path}: empty: {_EXPECTED}")
    try:
        doc = json.loads(data.decode())
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{path}: not UTF-8 text (byte {exc.start}): {_EXPECTED}") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{path}:{exc.lineno}: not JSON (column {exc.colno}: {exc.msg}): {_EXPECTED}") from None
    except (ValueError, RecursionError):  # int()'s digit limit; nesting past the recursion limit
        raise SnapshotError(f"{path}: not JSON drfgov could have written (a number of over 4,300 digits, or "
                            f"nested too deep): {_EXPECTED}") from None
    try:
        return _snapshot(doc)
    except _Bad as exc:
        field, message = exc.args
        raise SnapshotError(f"{path}: {field}: {message}" if field else f"{path}: {message}") from None


class _Bad(Exception):
    """(field, what was expected and found) of a snapshot document."""


def _snapshot(doc) -> Snapshot:
    """The :class:`Snapshot` of a parsed document, or :class:`_Bad` naming the first field at fault."""
    if not isinstance(doc, dict):
        raise _Bad("", f"expected a JSON object with version, backend and slices, got {_kind(doc)}")
    if doc.get("version") != VERSION or isinstance(doc.get("version"), bool):
        raise _Bad("version", f"expected {VERSION}, got {_shown(doc['version']) if 'version' in doc else 'nothing'}")
    backend = doc.get("backend")
    if not isinstance(backend, str) or not backend:
        raise _Bad("backend", f"expected the name of the backend that wrote the limits (text), got "
                   f"{_shown(backend) if 'backend' in doc else 'nothing'}")
    slices = doc.get("slices")
    if not isinstance(slices, dict):
        raise _Bad("slices", "expected an object of uid → slice, got "
                   f"{_shown(slices) if 'slices' in doc else 'nothing'}")
    originals = {}
    for key, entry in slices.items():
        field = f"slices.{key}"
        if not _INT.fullmatch(key) or int(key) >= 2**32:
            raise _Bad(field, "expected a uid (a whole number below 2^32) as the key")
        uid = int(key)
        if not isinstance(entry, dict):
            raise _Bad(field, f"expected an object with cgroup and limits, got {_kind(entry)}")
        cgroup = entry.get("cgroup")
        if not isinstance(cgroup, str):
            raise _Bad(f"{field}.cgroup", f"expected the slice's path (text), got "
                       f"{_shown(cgroup) if 'cgroup' in entry else 'nothing'}")
        try:
            target = Target(uid, Cgroup(_slice_path(uid, cgroup)))
        except ValueError as exc:
            raise _Bad(f"{field}.cgroup", str(exc).removeprefix(f"slice {uid}: ")) from None
        originals[uid] = (target, _limits(f"{field}.limits", entry.get("limits")))
    return Snapshot(backend, originals)


def _limits(field: str, value) -> LimitSet:
    """The limits at ``field``: each knob's shape checked here (the kernel files' text, as
    :meth:`LimitSet.to_json` writes it), its range by :meth:`LimitSet.from_json`."""
    if not isinstance(value, dict):
        raise _Bad(field, f"expected an object of the slice's limits, got {_kind(value)}")
    for knob in ("cpu.max", "cpu.weight", "memory.low", "memory.high", "memory.max", "io.max"):
        if knob not in value:
            raise _Bad(f"{field}.{knob}", "missing")
    cpu_max = value["cpu.max"]
    if not (isinstance(cpu_max, str) and len(cpu_max.split()) == 2 and _quota(cpu_max.split()[0])
            and _INT.fullmatch(cpu_max.split()[1])):
        raise _Bad(f"{field}.cpu.max", f"expected 'QUOTA PERIOD' such as 'max 100000', got {_shown(cpu_max)}")
    for knob, nullable in (("cpu.weight", False), ("memory.low", False), ("memory.high", True), ("memory.max", True)):
        v = value[knob]
        if not (type(v) is int or (nullable and v is None)):
            raise _Bad(f"{field}.{knob}", f"expected a whole number{' or null (max)' if nullable else ''}, "
                       f"got {_shown(v)}")
    io_max = value["io.max"]
    if not isinstance(io_max, dict):
        raise _Bad(f"{field}.io.max", f"expected an object of MAJ:MIN → 'rbps=N wbps=N riops=N wiops=N', "
                   f"got {_kind(io_max)}")
    for device, line in io_max.items():
        parts = line.split() if isinstance(line, str) else None
        if not parts or not all(p.partition("=")[0] in ("rbps", "wbps", "riops", "wiops")
                                and _quota(p.partition("=")[2]) for p in parts):
            raise _Bad(f"{field}.io.max.{device}", f"expected 'rbps=N wbps=N riops=N wiops=N' (N a whole number "
                       f"or max), got {_shown(line)}")
    try:
        return LimitSet.from_json(value)
    except ValueError as exc:  # a value out of the kernel's range: InvalidLimit's words name the knob
        raise _Bad(field, str(exc)) from None


def _quota(text: str) -> bool:
    return text == "max" or _INT.fullmatch(text) is not None


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


def _shown(value) -> str:
    """A JSON value in a message: a scalar as written (its first 40 characters), else its kind."""
    if isinstance(value, (dict, list)):
        return _kind(value)
    return json.dumps(value[:40] if isinstance(value, str) else value)[:40]


def _slice_path(uid: int, path: str) -> str:
    """``path`` if it is uid's own slice, ``…/user.slice/user-UID.slice`` (absolute, no ``..``):
    restore writes limits there as root, so a snapshot must not send it anywhere else.

    Raises:
        ValueError: any other path.
    """
    p = PurePosixPath(str(path))
    if not p.is_absolute() or ".." in p.parts or p.name != f"user-{uid}.slice" or p.parent.name != "user.slice":
        raise ValueError(f"slice {uid}: {path!r:.80} is not user.slice/user-{uid}.slice (expected an absolute path "
                         f"…/user.slice/user-{uid}.slice, without '..')")
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
