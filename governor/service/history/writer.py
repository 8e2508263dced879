"""Recording: :class:`History` appends each tick's state document to the database.

**Off the tick.** :meth:`History.record` only appends, in one transaction (a few ms per
1,000 users). Aggregation, pruning, checkpoints and ``PRAGMA incremental_vacuum`` run in a
background thread with its own connection (:mod:`.maintenance`), at most once an hour of the
documents' clock (checkpoints: every ``CHECKPOINT_EVERY_S`` of wall time or
``CHECKPOINT_EVERY_RECORDS`` records), in short transactions; the two share a lock that
``record`` waits on at most ``BUSY_TIMEOUT_MS`` (if it cannot have it, the rows wait in memory
for the next tick, at most ``MAX_PENDING`` records).

**It is root's alone**: the database and its ``-wal``/``-shm`` files 0600, in a directory
nobody else may write (created 0700; an existing one writable by others is refused). SQLite
coordinates through byte-range locks on those files, so a user who could open them could hold a
lock and stall every write (five failed ticks stopped the daemon); and a write waits at most
``BUSY_TIMEOUT_MS`` for a lock, never seconds inside a tick. ``record`` raises nothing but
``sqlite3.Error`` and ``OSError`` (a document it cannot read at all: ``sqlite3.DataError``;
one malformed user entry is skipped and counted in :attr:`History.skipped_users`).

**The file at the path is the one written.** An admin may remove the file (and its ``-wal`` and
``-shm``) to free the space, or move it away, while the daemon runs: an open connection would
go on writing into the unlinked inode, never seen, never freed. So each record first compares
the path's (st_dev, st_ino), by ``lstat(2)`` (one a record, a link not followed), with the file
opened; when they differ the old connection is checkpointed and closed (its rows complete in
the old file, wherever it is; SQLite itself, seeing the file moved, removes nothing) — a file
moved, not removed, whose checkpoint a reader holds back is written on until it completes — its own
``-wal``/``-shm`` still at the path are removed (a new file there would take in the old WAL's
pages), and the history is opened at the path as at start: a new, empty one where nothing is
left, a planted symlink, FIFO or directory refused with the start's error (raised by every due
record, recording off, until the path holds a drfgov history or nothing). Maintenance's own
connections make no file (SQLite ``mode=rw``) and none to another file at the path.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from governor.config.source import InputError, check_trusted_directory
from governor.service.atomic import file_identity
from governor.service.history.codec import NAN, _bitmap, _encode_limits, _floats, _number
from governor.service.history.maintenance import Maintenance
from governor.service.history.schema import (BUSY_TIMEOUT_MS, FULL_RESOLUTION_S, HOUR_S, SCHEMA, SCHEMA_VERSION,
                                             TABLES)

__all__ = ["History", "check_history_directory"]

log = logging.getLogger("drfgov")

CHECKPOINT_EVERY_S = 30.0        # background WAL checkpoint: after this many wall-clock seconds
CHECKPOINT_EVERY_RECORDS = 20    # or this many records, whichever comes first
WAL_AUTOCHECKPOINT_PAGES = 8192  # backstop (32 MiB), inside record(), if the background one cannot run
MAX_PENDING = 16                 # record batches kept in memory while maintenance holds the lock


def check_history_directory(directory: str | Path) -> None:
    """Refuse a directory for the history's files that someone other than root (or the daemon's
    own user) owns or may write: she could plant, replace or lock them
    (:func:`~governor.config.source.check_trusted_directory`). :class:`History` asks it of
    the directory it opens in, ``drfgov doctor`` of the nearest existing one.

    Raises:
        PermissionError: naming the directory at fault and the fix.
    """
    try:
        check_trusted_directory(directory, {0, os.geteuid()})
    except InputError as exc:
        raise PermissionError(f"history.path: {exc} (or point history.path elsewhere)") from None


#: How many names :func:`_free_aside_name` tries (``.v1``, then ``.v1.1`` … ``.v1.99``).
MAX_ASIDE_NAMES = 100


def _free_aside_name(path: Path) -> Path:
    """Where a first-format history at ``path`` is moved: the first of ``PATH.v1``, ``PATH.v1.1``,
    ``PATH.v1.2``, … (:data:`MAX_ASIDE_NAMES` in all) such that neither it nor its ``-wal`` or
    ``-shm`` exists (not even as a dangling symlink): a copy moved aside earlier is kept, never
    replaced. The directory is root's alone (:func:`check_history_directory`), so the name stays
    free until the move.

    Raises:
        FileExistsError: every one of those names is taken (naming the first and the fix).
    """
    first = path.with_name(path.name + ".v1")
    for n in range(MAX_ASIDE_NAMES):
        aside = first if n == 0 else first.with_name(f"{first.name}.{n}")
        if not any(os.path.lexists(aside.with_name(aside.name + suffix)) for suffix in ("", "-wal", "-shm")):
            return aside
    raise FileExistsError(f"{path} is of the first format and must be moved aside, but {first} "
                          f"and {first.name}.1 … .{MAX_ASIDE_NAMES - 1} all exist: delete the old copies you no "
                          "longer need, or point history.path elsewhere")


@dataclass
class _Batch:
    """One record's rows, written in one transaction (perhaps a tick later)."""

    t: int
    resources: list = field(default_factory=list)
    layouts: list = field(default_factory=list)
    users: list = field(default_factory=list)
    weights: list = field(default_factory=list)
    limits: list = field(default_factory=list)
    tick: tuple | None = None
    samples: list = field(default_factory=list)


class History(Maintenance):
    """Appends state documents' users to the database at ``path`` (created with its directory).

    ``History(path, retention_days, every_s).record(state)`` each tick; ``close()`` at the end.
    ``full_resolution_s`` (default a day) is how long samples stay as recorded; ``background``
    False runs the hourly maintenance inside ``record`` (tests; the daemon keeps the default).
    ``maintain()`` and ``settle()`` come from :class:`~governor.service.history.maintenance.Maintenance`.

    Raises:
        sqlite3.Error / OSError: from the constructor when the database cannot be opened
            (PermissionError: its directory, or one above it, is owned or writable by another user
            (:func:`check_history_directory`); :class:`~governor.service.ownfiles.ForeignFile`: the
            file there is not a drfgov history, and is left untouched; sqlite3.DatabaseError:
            the file is some other database).
    """

    def __init__(self, path: str | Path, retention_days: float, every_s: float = 60.0, *,
                 full_resolution_s: float = FULL_RESOLUTION_S, background: bool = True):
        self.path = Path(path)
        self._ident: tuple[int, int] | None = None       # (st_dev, st_ino) of the file self.db has open
        self._sidecars: dict[str, tuple[int, int]] = {}  # of its -wal and -shm, as opened
        self.db = self._open_at_path()
        self.retention_s = retention_days * 86400.0
        self.every_s = every_s
        self.full_resolution_s = full_resolution_s
        self.background = background
        self.skipped_users = 0       # malformed user entries not recorded
        self.dropped_batches = 0     # records lost: the lock busy (more than MAX_PENDING), or their file removed
        self._lock = threading.Lock()  # one writer at a time: record() or maintenance
        self._pending: list[_Batch] = []
        self._last_record = float("-inf")
        self._last_t: int | None = None
        self._next_maintenance = float("-inf")
        self._last_checkpoint = time.monotonic()
        self._records_since_checkpoint = 0
        self._stop = threading.Event()
        self._jobs = threading.Condition()   # guards the three below
        self._due_hour: int | None = None    # maintenance asked for, as of this time
        self._due_checkpoint = False
        self._busy = False
        self._worker_db: sqlite3.Connection | None = None
        self._abandon = False         # the worker's run is being stopped: the file it works on has gone
        self._held_back = False       # a file that left the path is written on until its checkpoint completes
        self._forget = False          # set by maintenance when it deleted users: rewrite the caches
        self._ids_lock = threading.Lock()  # resource and layout ids: record() and maintenance
        self._reset_caches()
        self._thread: threading.Thread | None = None
        if background:  # started here, not in a tick: Thread.start() waits for the thread to run
            self._thread = threading.Thread(target=self._worker_loop, name="drfgov-history", daemon=True)
            self._thread.start()

    # -- opening ----------------------------------------------------------------------------------

    def _open_at_path(self) -> sqlite3.Connection:
        """The start's way, and a reopen's: the directory made and judged, the file judged and
        opened (:meth:`_open`), and what was opened noted (the database, its -wal and -shm)."""
        path = self.path
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        check_history_directory(path.parent)  # nobody else may plant, replace or lock the history's files there
        db = self._open()
        # (taken just after the open: the directory is root's alone, nobody else swaps the file meanwhile)
        self._ident = file_identity(path)
        self._close_held()
        try:  # held to tell, when it leaves the path, a file moved (its rows matter) from one removed
            self._held = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            self._held = None
        self._sidecars = {suffix: ident for suffix in ("-wal", "-shm")
                          if (ident := file_identity(path.with_name(path.name + suffix))) is not None}
        return db

    def _open(self) -> sqlite3.Connection:
        """Connect, after judging what is at ``path`` (:func:`~governor.service.ownfiles.check_ours`:
        a file that is not a drfgov history is refused before anything touches it — its mode
        was set 0600 before SQLite said "file is not a database", the audit of 2026-11-27); then
        the database and its ``-wal``/``-shm`` are made 0600. A new database's tables and its
        ``user_version`` are made in one transaction (SQLite rolls the pragma back with the
        tables): a disk that fills meanwhile leaves a file without tables, taken at the next
        attempt. A file an older drfgov left half-made (some of our tables, all empty, format 0)
        is completed. A database of the first format is moved aside, to the first free name of
        ``history.db.v1``, ``history.db.v1.1``, ``history.db.v1.2``, … (:func:`_free_aside_name`:
        an earlier copy there is never replaced), with its ``-wal`` and ``-shm``, and a new one
        started; the warning logged names where it went.

        Raises:
            ForeignFile (an OSError): the file is not a drfgov history; sqlite3.Error: as the class says;
            FileExistsError (an OSError): a first-format database to move aside, and no free name for it.
        """
        from governor.service.ownfiles import check_ours

        path = self.path
        check_ours("history", path)
        old_umask = os.umask(0o077)  # SQLite creates -wal and -shm with the database's mode
        try:
            if path.exists():  # a history of ours (judged above): its -wal and -shm are too
                for existing in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                    if existing.is_file() and not existing.is_symlink():
                        os.chmod(existing, 0o600)
            db = self._connect()
            if self._is_first_format(db):
                db.close()
                aside = _free_aside_name(path)
                os.replace(path, aside)
                for suffix in ("-wal", "-shm"):
                    leftover = path.with_name(path.name + suffix)
                    if leftover.exists():
                        os.replace(leftover, aside.with_name(aside.name + suffix))
                log.warning("history: %s was of the first format (JSON rows, unbounded): moved to %s (a free name: "
                            "no file there was replaced); a compact one starts now (delete the old file when you "
                            "no longer need it)", path, aside)
                db = self._connect()
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if not tables:
                    db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only before the first table
                elif not tables <= set(TABLES) or any(
                        db.execute(f"SELECT 1 FROM {name} LIMIT 1").fetchone() for name in tables):
                    db.close()  # (an unfinished creation of ours has some of our tables, all empty)
                    raise sqlite3.DatabaseError(f"{path}: some other database, not a drfgov history: "
                                                "move it away or point history.path elsewhere")
            elif version != SCHEMA_VERSION:
                db.close()
                raise sqlite3.DatabaseError(f"{path}: a drfgov history of format {version}, this drfgov writes "
                                            f"format {SCHEMA_VERSION}: move it away or point history.path elsewhere")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints; a crash loses seconds, not the file
            db.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            db.execute(f"PRAGMA journal_size_limit = {4 * 2**20}")
            try:  # tables and format in one transaction: a failure midway (disk full) leaves no half-made file
                db.executescript(f"BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            except sqlite3.Error:
                if db.in_transaction:
                    db.rollback()
                db.close()
                raise
        finally:
            os.umask(old_umask)
        return db

    def _connect(self) -> sqlite3.Connection:
        """:meth:`_open`'s connection (it creates the file), after the file was judged."""
        return sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)

    def _connect_existing(self) -> sqlite3.Connection:
        """A connection of its own (maintenance, :meth:`maintain`) to the file being written:
        never to what took its place at ``path``, and never creating one (SQLite ``mode=rw``).

        Raises:
            FileNotFoundError: the file at ``path`` is no longer the one being written; sqlite3.Error.
        """
        if self._moved():
            raise FileNotFoundError(f"{self.path} is no longer the history being written (removed or replaced)")
        uri = f"file:{quote(str(self.path.absolute()))}?mode=rw"  # quoted: '#' or '?' would end the name
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)

    def _moved(self) -> bool:
        """Whether the file at ``path`` is not the one being written (removed, replaced, or none
        open): one ``lstat(2)``, a link not followed."""
        try:
            st = os.lstat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            return True
        except OSError:  # not told (EIO, …): the file open goes on, its sidecars untouched
            return self._ident is None
        return self._ident is None or (st.st_dev, st.st_ino) != self._ident

    def _reopen(self) -> None:
        """The file at ``path`` is not the one open: close that one, open what is there now as at
        start. Rows waiting for the lock go (their ids are the old file's).

        Raises:
            as the constructor: recording stays off (every record tries again) until it opens.
        """
        was_open, path = self.db is not None, self.path
        if was_open and not self._release():
            return  # its last rows are not all in the file yet: it goes on being written, and is tried again
        self.dropped_batches += len(self._pending)
        self._pending.clear()
        created = not os.path.lexists(path)
        try:
            self.db = self._open_at_path()
        except BaseException:
            if was_open:
                log.warning("history: %s was removed or replaced while being written: closed; not recording until "
                            "the path holds a drfgov history or nothing (the reason follows)", path)
            raise
        self._reset_caches()  # the new file's ids (the worker's run on the old one has ended)
        self._forget = False
        self._next_maintenance = float("-inf")
        found = "a new, empty history there" if created else "the drfgov history found there"
        if was_open:
            log.warning("history: %s was removed or replaced while being written: recording to %s now", path, found)
        else:
            log.warning("history: recording to %s again (%s)", path, found)

    def _release(self) -> bool:
        """Close the file that left ``path``: the worker's run on it stopped first (it fills the
        ids' caches), its rows checkpointed into it, then its own -wal and -shm removed from the
        path, so that no file opened there later takes the old pages in. Whether it was closed:
        not while the checkpoint cannot complete — a reader's snapshot (``drfgov history``, a
        backup) holds it back, or the disk refuses it — for the rows in its -wal (still at the
        path when the file was moved) would be lost with it, and the moved file left torn; it is
        then written on, and released at a later record (said once, :attr:`_held_back`)."""
        with self._jobs:
            self._due_hour, self._due_checkpoint, self._abandon = None, False, True
            try:
                while self._busy and self._thread is not None and self._thread.is_alive():
                    worker = self._worker_db
                    if worker is not None:
                        try:
                            worker.interrupt()  # (lost between two statements: asked again)
                        except sqlite3.Error:  # closed meanwhile: its run is ending
                            pass
                    self._jobs.wait(0.05)
            finally:
                self._abandon = False
        try:
            busy, frames, done = self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            complete = not busy and done == frames
        except sqlite3.Error:
            complete = False
        if not complete and self._linked():
            if not self._held_back:
                self._held_back = True
                log.warning("history: %s was removed or replaced while being written, but its last rows cannot be "
                            "put into it yet (a reader holds it, or the disk refuses): written on, and closed "
                            "once they can be", self.path)
            return False
        self._held_back = False
        db, self.db, self._ident = self.db, None, None
        self._close_held()
        try:
            db.close()
        except sqlite3.Error:
            pass
        for suffix, ident in self._sidecars.items():
            sidecar = self.path.with_name(self.path.name + suffix)
            if file_identity(sidecar) == ident:  # the old file's own, still linked there
                try:
                    os.unlink(sidecar)
                except FileNotFoundError:
                    pass
        self._sidecars = {}
        return True

    def _linked(self) -> bool:
        """Whether the file being written is still linked somewhere (moved, not removed): its
        rows are worth keeping. Not told (nothing held): taken as linked."""
        try:
            return self._held is None or os.fstat(self._held).st_nlink > 0
        except OSError:
            return True

    def _close_held(self) -> None:
        held, self._held = getattr(self, "_held", None), None
        if held is not None:
            os.close(held)

    @staticmethod
    def _is_first_format(db: sqlite3.Connection) -> bool:
        return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'shares'").fetchone() is not None

    def _reset_caches(self) -> None:
        """What the database already holds, so that record() writes only what is new."""
        with self._ids_lock:
            self._resources = {name: rid for rid, name in self.db.execute("SELECT id, name FROM resources")}
            self._layouts = {tuple(int(i) for i in text.split(",") if i): lid
                             for lid, text in self.db.execute("SELECT id, resources FROM layouts")}
            self._layouts_by_names: dict[tuple, int] = {}  # resource names → layout id, filled as met
        self._names: dict[int, str] = {}
        self._weights: dict[int, object] = {}
        self._limits: dict[int, object] = {}
        self._seen_hour: int | None = None

    # -- recording --------------------------------------------------------------------------------

    def wants(self, now_s: float) -> bool:
        """Whether :meth:`record` of a document of wall-clock time ``now_s`` would store
        anything (the daemon builds the document only then)."""
        return (bool(self._pending) or now_s < self._last_record
                or (now_s - self._last_record >= self.every_s and int(now_s) != self._last_t))

    def record(self, state: dict) -> bool:
        """Store ``state``'s users (a list, or an iterator of entries read once: see
        :func:`governor.service.state.state_document`) if ``every_s`` has passed since the last
        record (at most once a second). Returns whether it recorded (rows that wait for the
        lock count as recorded).

        The file at ``path`` removed or replaced since it was opened: it is opened again there
        first, as at start (a new one where nothing is left).

        Raises:
            sqlite3.Error / OSError: the database refused the write (the rows are dropped); what
                took the file's place is refused, as at start (recording off until it is not).
        """
        try:
            now = float(state["time_unix_s"])
            users = state.get("users") or []
            if not 0 <= now < 2**40 or not isinstance(users, (list, Iterator)):
                raise ValueError("time_unix_s or users out of range")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise sqlite3.DataError(f"not a state document: {exc}") from None
        if now < self._last_record:  # the wall clock went back: start again from here
            self._last_record = float("-inf")
            self._next_maintenance = float("-inf")
        t = int(now)
        due = now - self._last_record >= self.every_s and t != self._last_t
        if not due and not self._pending:
            return False
        if self._moved():  # one lstat(2) a record: the file at path is no longer the one open
            if due:  # tried: the next attempt when the next record is due, as after a failed write
                self._last_record, self._last_t = now, t
            self._reopen()
        if due:
            if self._forget:
                self._forget = False
                self._names.clear()
                self._weights.clear()
                self._limits.clear()
            self._pending.append(self._batch(t, state, users))
            if len(self._pending) > MAX_PENDING:  # the oldest samples go; what later rows refer to stays
                dropped, kept = self._pending.pop(0), self._pending[0]
                for name in ("resources", "layouts", "users", "weights", "limits"):
                    getattr(kept, name)[:0] = getattr(dropped, name)
                self.dropped_batches += 1
            self._last_record, self._last_t = now, t
        if not self._lock.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
            return due  # maintenance holds it: the rows go with the next tick's call
        try:
            self._write(self._pending)
        except sqlite3.Error:
            self._pending.clear()
            self._reset_caches()
            raise
        finally:
            self._lock.release()
        self._pending.clear()
        if due:
            self._after_write(t)
        return due

    def _batch(self, t: int, state: dict, users: Iterable[dict]) -> _Batch:
        batch = _Batch(t)
        hour = t // HOUR_S
        refresh_seen = hour != self._seen_hour  # every user's seen_t, once an hour
        self._seen_hour = hour
        flat: list = []     # every user's floats, packed at once
        pending = []        # (sample row without its blob, float offset, float count, held bitmap)
        for u in users:
            try:
                row = self._add_user(batch, t, u, refresh_seen, flat)
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
                self.skipped_users += 1
            else:
                if row is not None:
                    pending.append(row)
        try:
            packed = _floats(flat)
        except TypeError:  # None or text where a number belongs
            packed = _floats([_number(v) for v in flat])
        batch.samples = [(*row, packed[4 * start:4 * (start + count)] + held) for row, start, count, held in pending]
        try:
            capacity = state.get("capacity") or {}
            names = tuple(capacity)
            saturated = [names.index(r) for r in state.get("saturated") or () if r in capacity]
            layout = self._layout_id(batch, names)
            batch.tick = (t, layout, _floats([_number(v) for v in capacity.values()]) + _bitmap(saturated, len(names)))
        except (TypeError, ValueError, AttributeError):
            batch.tick = None
        return batch

    def _add_user(self, batch: _Batch, t: int, u: dict, refresh_seen: bool, flat: list) -> tuple | None:
        """Her sample row (less its blob) and the place of her floats in ``flat``; her name,
        weight and limits into ``batch`` when new. Raises before it changes anything.

        None, and nothing recorded of her, when she was not measured this tick (her ``usage``
        empty: her first sight, with no interval yet, or a failed read): her shares of 0 then say
        nothing, and would pull her means down. Her limits, when they changed, go with her next
        measured tick."""
        uid = u["uid"]
        if type(uid) is not int or not 0 <= uid < 2**32:
            uid = int(uid)
            if type(u["uid"]) is bool or not 0 <= uid < 2**32:
                raise ValueError(f"uid {uid}")
        usage, demand, allocation = u.get("usage") or {}, u.get("demand") or {}, u.get("allocation") or {}
        if not usage:
            return None
        held = u.get("held") or ()
        if not isinstance(held, (list, tuple)):
            raise TypeError("held")
        names = tuple(usage)
        if tuple(demand) == names and tuple(allocation) == names and all(r in usage for r in held):
            values = [*usage.values(), *demand.values(), *allocation.values()]
        else:
            names = tuple(dict.fromkeys([*usage, *demand, *allocation, *held]))
            values = [*(usage.get(r, NAN) for r in names), *(demand.get(r, NAN) for r in names),
                      *(allocation.get(r, NAN) for r in names)]
        n = len(names)
        bitmap = _bitmap([names.index(r) for r in held], n) if held else bytes((n + 7) // 8)
        dominant_share, weighted_share = u.get("dominant_share"), u.get("weighted_share")
        if type(dominant_share) is not float:
            dominant_share = _number(dominant_share)
        if type(weighted_share) is not float:
            weighted_share = _number(weighted_share)
        name = u.get("name", uid)
        if type(name) is not str:
            name = str(name)
        weight, limits = u.get("weight"), u.get("limits")
        new_weight = uid not in self._weights or self._weights[uid] != weight
        new_limits = uid not in self._limits or self._limits[uid] != limits
        weight_text = json.dumps(weight, separators=(",", ":"), sort_keys=True) if new_weight else None
        limits_text = _encode_limits(limits) if new_limits else None
        dominant = u.get("dominant_resource")
        if type(dominant) is not str:
            dominant = None
        layout = self._layouts_by_names.get(names) or self._layout_id(batch, names)  # TypeError: a name not text
        # everything read: from here on nothing raises, so a skipped user leaves no trace
        dominant_id = None if dominant is None else (self._resources.get(dominant) or self._resource_id(batch, dominant))
        start = len(flat)
        flat += values
        if refresh_seen or self._names.get(uid) != name:
            batch.users.append((uid, name, t))
            self._names[uid] = name
        if new_weight:
            batch.weights.append((t, uid, weight_text))
            self._weights[uid] = weight
        if new_limits:
            batch.limits.append((t, uid, limits_text))
            self._limits[uid] = limits
        return (t, uid, layout, dominant_id, dominant_share, weighted_share), start, 3 * n, bitmap

    def _resource_id(self, batch: _Batch, name: str) -> int:
        rid = self._resources.get(name)
        if rid is None:
            rid = self._resources[name] = len(self._resources) + 1
            batch.resources.append((rid, name))
        return rid

    def _layout_id(self, batch: _Batch, names: tuple) -> int:
        """The id of the layout of resources ``names`` (new ones written with ``batch``).

        Raises:
            TypeError: a name that is not text (before anything changes).
        """
        if not all(type(r) is str for r in names):
            raise TypeError("resource names must be text")
        lid, new = self._allocate_layout(tuple(self._resource_id(batch, r) for r in names))
        if new:
            batch.layouts.append((lid, ",".join(map(str, new))))
        self._layouts_by_names[names] = lid
        return lid

    def _allocate_layout(self, key: tuple) -> tuple[int, tuple | None]:
        """The id of a layout, and the key when it is new (its row is then the caller's to
        write). Shared by record() and the maintenance's union layouts."""
        with self._ids_lock:
            lid = self._layouts.get(key)
            if lid is not None:
                return lid, None
            lid = self._layouts[key] = max(self._layouts.values(), default=0) + 1
            return lid, key

    def _write(self, batches: list[_Batch]) -> None:
        with self.db:
            for b in batches:
                if b.resources:
                    self.db.executemany("INSERT INTO resources VALUES (?, ?)", b.resources)
                if b.layouts:
                    self.db.executemany("INSERT INTO layouts VALUES (?, ?)", b.layouts)
                if b.users:
                    self.db.executemany("INSERT INTO users VALUES (?, ?, ?) ON CONFLICT (uid) DO UPDATE "
                                        "SET name = excluded.name, seen_t = max(seen_t, excluded.seen_t)", b.users)
                if b.weights:
                    self.db.executemany("INSERT OR REPLACE INTO weights VALUES (?, ?, ?)", b.weights)
                if b.limits:
                    self.db.executemany("INSERT OR REPLACE INTO limits VALUES (?, ?, ?)", b.limits)
                if b.tick is not None:
                    self.db.execute("INSERT OR REPLACE INTO ticks VALUES (?, ?, ?)", b.tick)
                self.db.executemany("INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?, ?, ?, ?)", b.samples)

    def _after_write(self, t: int) -> None:
        """Ask the worker for the hourly maintenance and a checkpoint when due (never waits)."""
        if self._held_back:  # written on after it left the path: no maintenance (released at a later record)
            return
        hourly = t >= self._next_maintenance
        self._records_since_checkpoint += 1
        checkpoint = (time.monotonic() - self._last_checkpoint >= CHECKPOINT_EVERY_S
                      or self._records_since_checkpoint >= CHECKPOINT_EVERY_RECORDS)
        if not (hourly or checkpoint):
            return
        if not self.background:
            if hourly:
                self._next_maintenance = (t // HOUR_S + 1) * HOUR_S
                self.maintain(t)
            return
        with self._jobs:  # the worker takes it when free; requests made meanwhile coalesce
            if hourly:
                self._due_hour = t
                self._next_maintenance = (t // HOUR_S + 1) * HOUR_S
            self._due_checkpoint = True
            self._jobs.notify()
        self._last_checkpoint = time.monotonic()
        self._records_since_checkpoint = 0

    # -- closing ----------------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the maintenance (within a second or two), write what waits, close."""
        self._stop.set()
        with self._jobs:
            self._jobs.notify_all()
        worker = self._worker_db
        if worker is not None:
            try:
                worker.interrupt()
            except sqlite3.Error:
                pass
        if self._thread is not None:
            self._thread.join(2.0)
        if self._pending and self._lock.acquire(timeout=BUSY_TIMEOUT_MS / 1000):
            try:
                self._write(self._pending)
            except sqlite3.Error:
                pass
            finally:
                self._lock.release()
        self._pending.clear()
        if self.db is not None and self._moved():  # moved away since the last record: its last rows put into it
            self._release()
        if self.db is not None:
            self.db.close()
        self._close_held()
