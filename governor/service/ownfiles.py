"""Whether the file at a path the daemon writes is drfgov's own, judged before it is touched.

``state_path``, ``history.path`` and ``metrics.textfile`` name files the daemon replaces
(state.json and the textfile are renamed over), writes into and chmods (the history: SQLite, mode
0600) or removes (the textfile, at a clean stop). Aimed at an existing file of something else —
the policy file itself, an admin's document — that file was destroyed, even by a dry run (the
audit of 2026-11-27: ``state_path`` set to the policy file replaced it with state JSON; a text
file as ``history.path`` was chmod-ed 0600 before SQLite said "file is not a database"). So
each is judged by what it holds before anything touches it, reading only — nothing made, no
lock taken, not even SQLite's ``-wal``/``-shm`` — and refused unless it is:

* state.json: a drfgov state document: JSON whose first keys are ``"version"`` (a number) and
  ``"time_unix_s"``, as every drfgov has written it (its first :data:`HEAD_BYTES` are read: the
  check runs before every write, ~20 µs);
* the history: an SQLite database of drfgov's history (``user_version`` 2 with its ``samples``
  table, or the first format's ``shares`` table alone, which the writer moves aside), or one
  with no tables at all, or only some of drfgov's, all empty, at ``user_version`` 0 (a creation
  an older drfgov left unfinished when the disk filled: the writer completes it);
* the textfile: a text file whose first line is the ``# HELP``, ``# TYPE`` or a sample of a
  ``drfgov_`` metric (:class:`~governor.service.metrics.Metrics` writes a ``# HELP`` first).

An empty file (0 bytes) is anyone's — nothing in it to lose — and nothing there is fine. A
directory, a symlink, a FIFO or a device is refused (a symlink would be replaced, or followed
out of the trusted directory). A file this process may not read (a non-root ``check-config``
of root's 0600 history) is not judged: the daemon, as root, judges it at its start.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from urllib.parse import quote

__all__ = ["ForeignFile", "HEAD_BYTES", "check_ours", "foreign_file"]

#: How much of a file is read to tell what it is.
HEAD_BYTES = 256
SQLITE_MAGIC = b"SQLite format 3\x00"
_JSON_HEAD = re.compile(rb'\A\s*\{\s*"version"\s*:\s*-?\d+\s*,\s*"(\w+)"\s*:')
_TEXTFILE_HEAD = re.compile(rb"\A(# (HELP|TYPE) )?drfgov_[a-zA-Z0-9_]*[ {]")

#: The kinds of file the daemon writes: the setting that names it, what it must be, and what
#: found there counts as that (see :func:`_look`'s kinds).
KINDS = {
    "state": ("state_path", "a drfgov state document", {"empty", "state"}),
    "history": ("history.path", "a drfgov history database", {"empty", "sqlite-empty", "history"}),
    "textfile": ("metrics.textfile", "drfgov's metrics textfile", {"empty", "textfile"}),
}


class ForeignFile(OSError):
    """The file at a path the daemon writes is not drfgov's: the message names the setting, the
    file, what was found and the fix. An OSError, so that a writer's caller that logs a failed
    write (state.json, the textfile) logs this one the same way, and goes on."""


def foreign_file(kind: str, path: str | os.PathLike[str], policy_file: str | None = None) -> str | None:
    """Why the daemon must not touch the file at ``path`` as its ``kind`` (``"state"``,
    ``"history"``, ``"textfile"``): ``"/x/b.yaml exists and is not a drfgov state document (it
    is the policy file): point state_path elsewhere"`` — or None when nothing is there, it is
    drfgov's own of that kind, or it cannot be read here. ``policy_file``: the policy's own file,
    named as such when found."""
    field, wanted, ours = KINDS[kind]
    seen = _look(Path(path), policy_file)
    if seen is None or seen[0] in ours:
        return None
    found, said = seen
    fix = f"point {field} elsewhere" if found in ("policy", "snapshot") else \
        f"point {field} elsewhere or move the file away"
    return f"{path} exists and is not {wanted} (it is {said}): {fix}"


def check_ours(kind: str, path: str | os.PathLike[str], policy_file: str | None = None) -> None:
    """Raise :class:`ForeignFile` (``"FIELD: …"``, :func:`foreign_file`'s reason) unless the
    file at ``path`` may be written as drfgov's ``kind``."""
    why = foreign_file(kind, path, policy_file)
    if why is not None:
        raise ForeignFile(f"{KINDS[kind][0]}: {why}")


def _look(path: Path, policy_file: str | None) -> tuple[str, str] | None:
    """(kind, how it is said) of what is at ``path``; None: nothing there, or not readable here.

    Kinds: ``empty``, ``state``, ``snapshot``, ``history``, ``history-format``, ``sqlite-empty``, ``sqlite``,
    ``textfile``, ``policy``, ``json``, ``yaml``, ``text``, ``binary``, ``not-a-file``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return "not-a-file", f"a path that cannot be examined ({exc.strerror or exc})"
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        return "not-a-file", f"a symlink to {target}"
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device")
        return "not-a-file", kind
    if policy_file and _same_file(path, policy_file):
        return "policy", "the policy file"
    if st.st_size == 0:
        return "empty", "an empty file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except PermissionError:
        return None  # not judged here: the daemon (root) judges it at its start
    except OSError as exc:
        return "not-a-file", f"a file that cannot be read ({exc.strerror or exc})"
    try:
        head = os.read(fd, HEAD_BYTES)
    except OSError as exc:
        return "not-a-file", f"a file that cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)
    if head.startswith(SQLITE_MAGIC):
        return _sqlite(path)
    json_head = _JSON_HEAD.match(head)
    if json_head and json_head.group(1) == b"time_unix_s":
        return "state", "a drfgov state document"
    if json_head and json_head.group(1) == b"backend":
        return "snapshot", "drfgov's snapshot of original limits"
    if _TEXTFILE_HEAD.match(head):
        return "textfile", "drfgov's metrics textfile"
    if head.lstrip()[:1] in (b"{", b"["):
        return "json", "a JSON document of another kind"
    if b"\0" in head:
        return "binary", f"binary data, {st.st_size} bytes"
    if path.suffix in (".yaml", ".yml"):
        return "yaml", f"a YAML file, {st.st_size} bytes"
    return "text", f"a text file, {st.st_size} bytes"


def _same_file(path: Path, other: str) -> bool:
    try:
        return os.path.samefile(path, other)
    except (OSError, ValueError):
        return False


def _sqlite(path: Path) -> tuple[str, str]:
    """What an SQLite database at ``path`` is, read without making or locking anything: through
    its WAL when a writer has one open (``-wal`` and ``-shm`` there: a read-only connection then
    makes nothing), else as an immutable file (a read-only connection would make both)."""
    import sqlite3

    from governor.service.history.schema import SCHEMA_VERSION, TABLES

    live = os.path.exists(f"{path}-wal") and os.path.exists(f"{path}-shm")
    uri = f"file:{quote(str(path.absolute()))}?mode=ro" + ("" if live else "&immutable=1")
    try:
        db = sqlite3.connect(uri, uri=True, timeout=0.05)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
            unfinished = version == 0 and tables and set(tables) <= set(TABLES)
            rows = unfinished and any(db.execute(f"SELECT 1 FROM {name} LIMIT 1").fetchone() for name in tables)
        finally:
            db.close()
    except sqlite3.Error as exc:
        return "sqlite", f"an SQLite database that cannot be read: {exc}"
    if version == SCHEMA_VERSION and "samples" in tables:
        return "history", "a drfgov history database"
    if version == 0 and tables == ["shares"]:
        return "history", "a drfgov history database of the first format"
    if version == 0 and not tables:
        return "sqlite-empty", "an SQLite database without tables"
    if unfinished and not rows:
        return "history", "a drfgov history whose creation was interrupted (some tables, no rows, format 0)"
    if unfinished:
        return "history-format", ("a drfgov history whose creation was interrupted (format 0) yet holding rows: "
                                  "not written by drfgov")
    if "samples" in tables:
        return "history-format", f"a drfgov history of format {version}, this drfgov writes format {SCHEMA_VERSION}"
    shown = ", ".join(tables[:3]) + (", …" if len(tables) > 3 else "")
    return "sqlite", f"an SQLite database of something else (tables: {shown or 'none'})"
