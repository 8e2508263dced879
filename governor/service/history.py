"""Share history in SQLite (stdlib ``sqlite3``): compact rows, hourly aggregates, bounded size.

What is kept (defaults: ``every_s`` 60, ``retention_days`` 14):

* **The last day at full resolution**: one ``samples`` row per user every ``every_s`` seconds
  (1,440 a day per user), about 110 bytes each with six resources.
* **Beyond a day, one ``hourly`` row per user and hour**: mean dominant and weighted share,
  maximum dominant share, per resource mean usage and allocation, maximum demand, and the
  share of the hour's samples in which the kernel held her back.
* **Weights and limits only when they change** (beyond a day: the last change of each hour).
* Everything older than ``retention_days`` is deleted.

Measured (benchmarks/bench_history.py, six resources, a fifth of the users contended): about
200 MiB per 1,000 users per 14 days, steady, whatever the age of the file (README, "History").

**Off the tick.** :meth:`History.record` only appends, in one transaction (a few ms per
1,000 users). Aggregation, pruning, checkpoints and ``PRAGMA incremental_vacuum`` run in a
background thread with its own connection, at most once an hour of the documents' clock
(checkpoints: every ``CHECKPOINT_EVERY_S`` of wall time or ``CHECKPOINT_EVERY_RECORDS`` records), in short transactions; the
two share a lock that ``record`` waits on at most ``BUSY_TIMEOUT_MS`` (if it cannot have it,
the rows wait in memory for the next tick). Free pages beyond a tenth of the file are given
back to the file system (``auto_vacuum=INCREMENTAL``); the rest is what the next hour's rows
reuse, so a steady file neither grows nor churns.

**It is root's alone**: the database and its ``-wal``/``-shm`` files 0600, in a directory
nobody else may write (created 0700; an existing one writable by others is refused). SQLite
coordinates through byte-range locks on those files, so a user who could open them could hold a
lock and stall every write (five failed ticks stopped the daemon); and a write waits at most
``BUSY_TIMEOUT_MS`` for a lock, never seconds inside a tick. ``record`` raises nothing but
``sqlite3.Error`` and ``OSError`` (a document it cannot read at all: ``sqlite3.DataError``;
one malformed user entry is skipped and counted in :attr:`History.skipped_users`).

Schema (``PRAGMA user_version = 2``; ``t`` is integer Unix seconds, UTC)::

    resources (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)
        -- "cpu", "memory", "disk:8:0", "net:eth0:tx": the state document's resource ids
    layouts   (id INTEGER PRIMARY KEY, resources TEXT NOT NULL UNIQUE)
        -- comma-separated resource ids: which resources a row's BLOB holds, in order (n of them)
    users     (uid INTEGER PRIMARY KEY, name TEXT NOT NULL, seen_t INTEGER NOT NULL)
    ticks     (t INTEGER PRIMARY KEY, layout INTEGER NOT NULL, capacity BLOB NOT NULL)
        -- capacity: float32[n], then the saturated resources as a bitmap of ceil(n/8) bytes;
        -- beyond a day, the first tick of each hour
    samples   (t, uid, layout, dominant_resource INTEGER /* resources.id, NULL */,
               dominant_share REAL, weighted_share REAL,
               vectors BLOB /* float32 usage[n], demand[n], allocation[n]; held bitmap */,
               PRIMARY KEY (t, uid)) WITHOUT ROWID
    hourly    (t /* the hour's start */, uid, samples INTEGER, layout,
               dominant_resource /* the hour's most frequent */, dominant_share /* mean */,
               dominant_share_max REAL, weighted_share /* mean */, held REAL /* share of samples held back */,
               vectors BLOB /* float32 mean usage[n], mean allocation[n], max demand[n], held share[n] */,
               PRIMARY KEY (t, uid)) WITHOUT ROWID
    weights   (t, uid, weight TEXT /* JSON, as state.json */, PRIMARY KEY (t, uid)) WITHOUT ROWID
    limits    (t, uid, limits TEXT, PRIMARY KEY (t, uid)) WITHOUT ROWID
        -- the limits in force (state.json's kernel-file form) as a JSON array of the values of
        -- LIMIT_KEYS in that order (["200000 100000",200,268435456,null,null,{}]); the JSON
        -- object itself when its keys differ; "null": none

Floats are little-endian float32 (7 significant digits: 16 KiB in 256 GiB); NaN where a user's
entry lacks that resource; bitmaps are little-endian (bit i = the i-th resource of the layout).
Units are state.json's (cores, bytes, fraction of the disk's time, bits/s). ``samples`` has no
uid index on purpose: rows are appended in key order (a handful of pages per record), and a
uid's rows are read by a range scan. A database of the first format (one ``shares`` table of
JSON rows) is renamed ``history.db.v1`` and a new one started.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import sys
import threading
import time
from array import array
from collections import Counter
from dataclasses import dataclass, field
from itertools import groupby
from pathlib import Path

import numpy as np

__all__ = ["History", "HistoryError", "HistoryReader", "UserSeries"]

log = logging.getLogger("drfgov")

SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS resources (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS layouts (id INTEGER PRIMARY KEY, resources TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS users (uid INTEGER PRIMARY KEY, name TEXT NOT NULL, seen_t INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ticks (t INTEGER PRIMARY KEY, layout INTEGER NOT NULL, capacity BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS samples (
    t INTEGER NOT NULL, uid INTEGER NOT NULL, layout INTEGER NOT NULL, dominant_resource INTEGER,
    dominant_share REAL, weighted_share REAL, vectors BLOB NOT NULL,
    PRIMARY KEY (t, uid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS hourly (
    t INTEGER NOT NULL, uid INTEGER NOT NULL, samples INTEGER NOT NULL, layout INTEGER NOT NULL,
    dominant_resource INTEGER, dominant_share REAL, dominant_share_max REAL,
    weighted_share REAL, held REAL NOT NULL, vectors BLOB NOT NULL,
    PRIMARY KEY (t, uid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS weights (t INTEGER NOT NULL, uid INTEGER NOT NULL, weight TEXT NOT NULL,
    PRIMARY KEY (t, uid)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS limits (t INTEGER NOT NULL, uid INTEGER NOT NULL, limits TEXT NOT NULL,
    PRIMARY KEY (t, uid)) WITHOUT ROWID;
"""
BUSY_TIMEOUT_MS = 50
#: state.json's limits (LimitSet.to_json), stored as their values in this order when so keyed
LIMIT_KEYS = ("cpu.max", "cpu.weight", "memory.low", "memory.high", "memory.max", "io.max")
HOUR_S = 3600
FULL_RESOLUTION_S = 86400        # samples younger than this stay as recorded
CHECKPOINT_EVERY_S = 30.0        # background WAL checkpoint: after this many wall-clock seconds
CHECKPOINT_EVERY_RECORDS = 20    # or this many records, whichever comes first
WAL_AUTOCHECKPOINT_PAGES = 8192  # backstop (32 MiB), inside record(), if the background one cannot run
MAX_PENDING = 16                 # record batches kept in memory while maintenance holds the lock
DELETE_CHUNK_ROWS = 5000         # rows per maintenance transaction (a few ms: the tick may wait that long)
VACUUM_CHUNK_PAGES = 256
FREE_SLACK = 0.10                # free pages up to this share of the file stay for reuse
NAN = float("nan")
_BIG_ENDIAN = sys.byteorder == "big"


class HistoryError(Exception):
    """The history database cannot be read (missing, not readable, not a drfgov history)."""


def _floats(values: list) -> bytes:
    packed = array("f", values)
    if _BIG_ENDIAN:
        packed.byteswap()
    return packed.tobytes()


def _number(x) -> float:
    """A float for any value a document may hold there; NaN for what is not a number."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return NAN
    return float(x)


def _encode_limits(limits) -> str:
    if isinstance(limits, dict) and tuple(limits) == LIMIT_KEYS:
        return json.dumps(list(limits.values()), separators=(",", ":"))
    return json.dumps(limits, separators=(",", ":"), sort_keys=True)


def _decode_limits(text: str):
    value = json.loads(text)
    return dict(zip(LIMIT_KEYS, value)) if isinstance(value, list) and len(value) == len(LIMIT_KEYS) else value


def _bitmap(positions, n: int) -> bytes:
    mask = 0
    for i in positions:
        mask |= 1 << i
    return mask.to_bytes((n + 7) // 8, "little")


def _unbits(blob: bytes, offset: int, n: int) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(blob, dtype=np.uint8, offset=offset), bitorder="little")
    return bits[:n].astype(bool)


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


class History:
    """Appends state documents' users to the database at ``path`` (created with its directory).

    ``History(path, retention_days, every_s).record(state)`` each tick; ``close()`` at the end.
    ``full_resolution_s`` (default a day) is how long samples stay as recorded; ``background``
    False runs the hourly maintenance inside ``record`` (tests; the daemon keeps the default).

    Raises:
        sqlite3.Error / OSError: from the constructor when the database cannot be opened
            (PermissionError: its directory is writable by other users; sqlite3.DatabaseError:
            the file is some other database).
    """

    def __init__(self, path: str | Path, retention_days: float, every_s: float = 60.0, *,
                 full_resolution_s: float = FULL_RESOLUTION_S, background: bool = True):
        self.path = path = Path(path)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.parent.stat().st_mode & 0o022:
            raise PermissionError(f"{path.parent} is writable by other users: anyone could plant or lock the "
                                  "history's files there (chmod go-w, or point history.path elsewhere)")
        self.retention_s = retention_days * 86400.0
        self.every_s = every_s
        self.full_resolution_s = full_resolution_s
        self.background = background
        self.skipped_users = 0       # malformed user entries not recorded
        self.dropped_batches = 0     # records lost while the lock stayed busy (more than MAX_PENDING)
        self.db = self._open()
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
        self._forget = False          # set by maintenance when it deleted users: rewrite the caches
        self._ids_lock = threading.Lock()  # resource and layout ids: record() and maintenance
        self._reset_caches()
        self._thread: threading.Thread | None = None
        if background:  # started here, not in a tick: Thread.start() waits for the thread to run
            self._thread = threading.Thread(target=self._worker_loop, name="drfgov-history", daemon=True)
            self._thread.start()

    # -- opening ----------------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        path = self.path
        old_umask = os.umask(0o077)  # SQLite creates -wal and -shm with the database's mode
        try:
            for existing in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                if existing.exists():
                    os.chmod(existing, 0o600)
            db = self._connect()
            if self._is_first_format(db):
                db.close()
                aside = path.with_name(path.name + ".v1")
                os.replace(path, aside)
                for suffix in ("-wal", "-shm"):
                    leftover = path.with_name(path.name + suffix)
                    if leftover.exists():
                        os.replace(leftover, aside.with_name(aside.name + suffix))
                log.warning("history: %s was of the first format (JSON rows, unbounded): moved to %s; "
                            "a compact one starts now (delete the old file when you no longer need it)", path, aside)
                db = self._connect()
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    db.close()
                    raise sqlite3.DatabaseError(f"{path}: some other database, not a drfgov history: "
                                                "move it away or point history.path elsewhere")
                db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only before the first table
            elif version != SCHEMA_VERSION:
                db.close()
                raise sqlite3.DatabaseError(f"{path}: a drfgov history of format {version}, this drfgov writes "
                                            f"format {SCHEMA_VERSION}: move it away or point history.path elsewhere")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at checkpoints; a crash loses seconds, not the file
            db.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            db.execute(f"PRAGMA journal_size_limit = {4 * 2**20}")
            db.executescript(SCHEMA)
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.commit()
        finally:
            os.umask(old_umask)
        return db

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)

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

    def record(self, state: dict) -> bool:
        """Store ``state``'s users if ``every_s`` has passed since the last record (at most once
        a second). Returns whether it recorded (rows that wait for the lock count as recorded).

        Raises:
            sqlite3.Error / OSError: the database refused the write (the rows are dropped).
        """
        try:
            now = float(state["time_unix_s"])
            users = state.get("users") or []
            if not 0 <= now < 2**40 or not isinstance(users, list):
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

    def _batch(self, t: int, state: dict, users: list) -> _Batch:
        batch = _Batch(t)
        hour = t // HOUR_S
        refresh_seen = hour != self._seen_hour  # every user's seen_t, once an hour
        self._seen_hour = hour
        flat: list = []     # every user's floats, packed at once
        pending = []        # (sample row without its blob, float offset, float count, held bitmap)
        for u in users:
            try:
                pending.append(self._add_user(batch, t, u, refresh_seen, flat))
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
                self.skipped_users += 1
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

    def _add_user(self, batch: _Batch, t: int, u: dict, refresh_seen: bool, flat: list) -> tuple:
        """Her sample row (less its blob) and the place of her floats in ``flat``; her name,
        weight and limits into ``batch`` when new. Raises before it changes anything."""
        uid = u["uid"]
        if type(uid) is not int or not 0 <= uid < 2**32:
            uid = int(uid)
            if type(u["uid"]) is bool or not 0 <= uid < 2**32:
                raise ValueError(f"uid {uid}")
        usage, demand, allocation = u.get("usage") or {}, u.get("demand") or {}, u.get("allocation") or {}
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

    # -- maintenance (off the tick) -----------------------------------------------------------------

    def _worker_loop(self) -> None:
        while True:
            with self._jobs:
                while self._due_hour is None and not self._due_checkpoint and not self._stop.is_set():
                    self._jobs.wait()
                if self._stop.is_set():
                    return
                now, self._due_hour, self._due_checkpoint, self._busy = self._due_hour, None, False, True
            try:
                self._background_run(now)
            finally:
                with self._jobs:
                    self._busy = False
                    self._jobs.notify_all()

    def _background_run(self, now: int | None) -> None:
        try:
            db = self._worker_db = self._connect()
            try:
                if now is not None:
                    self._maintain(db, now)
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                self._worker_db = None
                db.close()
        except (sqlite3.Error, OSError) as exc:
            if not self._stop.is_set():
                log.warning("history maintenance failed (retried within the hour): %s", exc)
        except Exception:  # never let the thread die loudly; the tick is not affected either way
            log.exception("history maintenance failed (retried within the hour)")

    def maintain(self, now: float | None = None) -> None:
        """Prune, aggregate and vacuum now, in the calling thread (tests and benchmarks; the
        daemon's records start it in the background by themselves).

        Raises:
            sqlite3.Error / OSError: the database refused.
        """
        self.settle()
        if now is None:
            now = self._last_t if self._last_t is not None else time.time()
        db = self._connect()
        try:
            self._maintain(db, int(now))
        finally:
            db.close()

    def settle(self, timeout_s: float | None = None) -> None:
        """Wait for the background maintenance, if any is asked for or running, to finish."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._jobs:
            while ((self._busy or self._due_hour is not None or self._due_checkpoint)
                   and self._thread is not None and self._thread.is_alive()):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return
                self._jobs.wait(remaining)

    def _tx(self, db: sqlite3.Connection, statements) -> None:
        """One short write transaction under the writers' lock."""
        with self._lock, db:
            for sql, args in statements:
                db.execute(sql, args)

    def _maintain(self, db: sqlite3.Connection, now: int) -> None:
        retention_cutoff = int(now - self.retention_s)
        full_cutoff = int(now - self.full_resolution_s)
        # 1. what is past retention goes
        self._delete_chunked(db, "samples", None, retention_cutoff)
        self._delete_chunked(db, "hourly", None, retention_cutoff)
        self._tx(db, [("DELETE FROM ticks WHERE t < ?", (retention_cutoff,))])
        for table in ("weights", "limits"):  # except each user's last before the cutoff: in force then
            self._tx(db, [(f"DELETE FROM {table} WHERE t < ? AND (t, uid) NOT IN "
                           f"(SELECT max(t), uid FROM {table} WHERE t < ? GROUP BY uid)",
                           (retention_cutoff, retention_cutoff))])
        gone = db.execute("SELECT count(*) FROM users WHERE seen_t < ?", (retention_cutoff - HOUR_S,)).fetchone()[0]
        if gone:
            self._tx(db, [("DELETE FROM users WHERE seen_t < ?", (retention_cutoff - HOUR_S,)),
                          ("DELETE FROM weights WHERE uid NOT IN (SELECT uid FROM users)", ()),
                          ("DELETE FROM limits WHERE uid NOT IN (SELECT uid FROM users)", ())])
            self._forget = True
        # 2. hours older than the full-resolution window become one row per user
        while not self._stop.is_set():
            oldest = db.execute("SELECT min(t) FROM samples").fetchone()[0]
            if oldest is None:
                break
            hour = oldest // HOUR_S * HOUR_S
            if hour + HOUR_S > full_cutoff:
                break
            self._aggregate_hour(db, hour)
        # 3. free pages beyond the slack go back to the file system
        if db.execute("PRAGMA auto_vacuum").fetchone()[0] != 2:  # INCREMENTAL (set when the file was made)
            return
        before = None
        while not self._stop.is_set():
            free = db.execute("PRAGMA freelist_count").fetchone()[0]
            pages = db.execute("PRAGMA page_count").fetchone()[0]
            excess = free - int(pages * FREE_SLACK)
            if excess <= 0 or free == before:
                break
            before = free
            with self._lock:
                db.execute(f"PRAGMA incremental_vacuum({min(excess, VACUUM_CHUNK_PAGES)})").fetchall()

    def _delete_chunked(self, db: sqlite3.Connection, table: str, start: int | None, end: int) -> None:
        """Delete ``table``'s rows with start ≤ t < end, a few thousand rows per transaction."""
        while not self._stop.is_set():
            lo = db.execute(f"SELECT min(t) FROM {table} WHERE t < ?" + ("" if start is None else " AND t >= ?"),
                            (end,) if start is None else (end, start)).fetchone()[0]
            if lo is None:
                return
            users = db.execute(f"SELECT count(*) FROM {table} WHERE t = ?", (lo,)).fetchone()[0]
            step = max(1, DELETE_CHUNK_ROWS // max(users, 1))
            # whole seconds per chunk: ~DELETE_CHUNK_ROWS rows when a record every second
            hi = min(end, lo + step * max(1, int(self.every_s)))
            self._tx(db, [(f"DELETE FROM {table} WHERE t >= ? AND t < ?", (lo, hi))])

    def _aggregate_hour(self, db: sqlite3.Connection, hour: int) -> None:
        end = hour + HOUR_S
        if db.execute("SELECT 1 FROM hourly WHERE t = ? LIMIT 1", (hour,)).fetchone() is None:
            layouts = {lid: [int(i) for i in text.split(",") if i] for lid, text in db.execute("SELECT id, resources FROM layouts")}
            rows = db.execute("SELECT uid, t, layout, dominant_resource, dominant_share, weighted_share, vectors "
                              "FROM samples WHERE t >= ? AND t < ? ORDER BY uid, t", (hour, end)).fetchall()
            layout_id = self._layout_for(db, layouts)
            aggregates = [_aggregate(hour, uid, list(group), layouts, layout_id)
                          for uid, group in groupby(rows, key=lambda r: r[0])]
            with self._lock, db:
                db.executemany("INSERT OR REPLACE INTO hourly VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", aggregates)
        # the hour's aggregates are in: its raw rows go (a crash in between is finished next time)
        self._delete_chunked(db, "samples", hour, end)
        self._tx(db, [
            ("DELETE FROM ticks WHERE t >= ? AND t < ? AND t > (SELECT min(t) FROM ticks WHERE t >= ? AND t < ?)",
             (hour, end, hour, end)),
            *((f"DELETE FROM {table} WHERE t >= ? AND t < ? AND (t, uid) NOT IN "
               f"(SELECT max(t), uid FROM {table} WHERE t >= ? AND t < ? GROUP BY uid)", (hour, end, hour, end))
              for table in ("weights", "limits"))])

    def _layout_for(self, db: sqlite3.Connection, layouts: dict):
        """A function giving the layout id of a list of resource ids, writing it if new."""
        def layout_id(key: list[int]) -> int:
            lid, new = self._allocate_layout(tuple(key))
            if new:
                with self._lock, db:
                    db.execute("INSERT OR IGNORE INTO layouts VALUES (?, ?)", (lid, ",".join(map(str, new))))
                layouts[lid] = list(new)
            return lid
        return layout_id

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
        self.db.close()


def _aggregate(hour: int, uid: int, rows: list[tuple], layouts: dict[int, list[int]], layout_id) -> tuple:
    """One ``hourly`` row from a user's ``samples`` rows of that hour."""
    k = len(rows)
    layout_ids = {r[2] for r in rows}
    if len(layout_ids) == 1:
        key = layouts[rows[0][2]]
        n = len(key)
        raw = np.frombuffer(b"".join(r[6] for r in rows), dtype=np.uint8).reshape(k, -1)
        floats = np.ascontiguousarray(raw[:, :12 * n]).view("<f4").reshape(k, 3, n).astype(np.float64)
        held = np.unpackbits(raw[:, 12 * n:], axis=1, bitorder="little")[:, :n].astype(bool)
        lid = rows[0][2]
    else:  # her resources changed within the hour: every row onto the union
        key = list(dict.fromkeys(i for lid in sorted(layout_ids) for i in layouts[lid]))
        n = len(key)
        floats = np.full((k, 3, n), np.nan)
        held = np.zeros((k, n), dtype=bool)
        for j, r in enumerate(rows):
            own = layouts[r[2]]
            m = len(own)
            cols = [key.index(i) for i in own]
            floats[j][:, cols] = np.frombuffer(r[6], dtype="<f4", count=3 * m).reshape(3, m)
            held[j, cols] = _unbits(r[6], 12 * m, m)
        lid = layout_id(key)
    usage, demand, allocation = floats[:, 0], floats[:, 1], floats[:, 2]
    vectors = np.concatenate([_nanmean(usage), _nanmean(allocation), _nanmax(demand), held.mean(axis=0)])
    dominant = Counter(r[3] for r in rows if r[3] is not None).most_common(1)
    dominant_shares = np.array([r[4] for r in rows], dtype=float)
    return (hour, uid, k, lid, dominant[0][0] if dominant else None, float(_nanmean(dominant_shares[:, None])[0]),
            float(_nanmax(dominant_shares[:, None])[0]), float(_nanmean(np.array([[r[5]] for r in rows], dtype=float))[0]),
            float(held.any(axis=1).mean()), vectors.astype("<f4").tobytes())


def _nanmean(x: np.ndarray) -> np.ndarray:
    """Column means over the rows that have a value (NaN where none has); no warnings (threads)."""
    valid = ~np.isnan(x)
    counts = valid.sum(axis=0)
    sums = np.where(valid, x, 0.0).sum(axis=0)
    return np.divide(sums, counts, out=np.full(x.shape[1], np.nan), where=counts > 0)


def _nanmax(x: np.ndarray) -> np.ndarray:
    valid = ~np.isnan(x)
    top = np.where(valid, x, -np.inf).max(axis=0)
    return np.where(valid.any(axis=0), top, np.nan)


# -- reading -------------------------------------------------------------------------------------


@dataclass
class UserSeries:
    """One user's history in a time range, oldest first: a point per sample (``samples`` 1) or
    per aggregated hour (``samples`` k, ``t`` the hour's start; shares are means,
    ``dominant_share_max`` the hour's maximum, ``demand`` its maximum, ``held`` shares of it).

    Per resource arrays are NaN where she had no entry. Units are state.json's.
    """

    uid: int
    name: str
    t: np.ndarray                    # int64 Unix seconds
    samples: np.ndarray              # int64
    dominant_share: np.ndarray
    dominant_share_max: np.ndarray
    weighted_share: np.ndarray
    held: np.ndarray                 # share of the point's samples held back on some resource
    dominant_resource: np.ndarray    # object: resource id or None
    usage: dict[str, np.ndarray]
    demand: dict[str, np.ndarray]
    allocation: dict[str, np.ndarray]
    held_by: dict[str, np.ndarray]   # share of the point's samples held back on that resource

    def summary(self) -> dict:
        """Sample-weighted means over the range: what ``drfgov history`` prints."""
        w = self.samples.astype(float)
        total = w.sum()

        def mean(x):
            ok = ~np.isnan(x)
            return float(np.sum(x[ok] * w[ok]) / np.sum(w[ok])) if ok.any() else None

        def top(x):
            ok = ~np.isnan(x)
            return float(x[ok].max()) if ok.any() else None

        known = np.array([r is not None for r in self.dominant_resource], dtype=bool)
        dominant = None
        if known.any():
            names, inverse = np.unique(self.dominant_resource[known].astype(str), return_inverse=True)
            dominant = str(names[np.argmax(np.bincount(inverse, weights=w[known]))])
        return {
            "uid": self.uid, "name": self.name, "samples": int(total),
            "first_unix_s": int(self.t[0]), "last_unix_s": int(self.t[-1]),
            "dominant_resource": dominant,
            "dominant_share_mean": mean(self.dominant_share), "dominant_share_max": top(self.dominant_share_max),
            "weighted_share_mean": mean(self.weighted_share), "held_ratio": mean(self.held),
            "resources": {r: {"usage_mean": mean(self.usage[r]), "allocation_mean": mean(self.allocation[r]),
                              "demand_max": top(self.demand[r]), "held_ratio": mean(self.held_by[r])}
                          for r in self.usage},
        }


class HistoryReader:
    """Read-only access to a history database (``drfgov history``); never blocks the daemon
    (WAL readers do not take its lock) and never writes.

    Raises:
        HistoryError: from the constructor: no such file, not readable, not a drfgov history.
    """

    def __init__(self, path: str | Path):
        self.path = path = Path(path)
        denied = HistoryError(f"{path}: permission denied: the history is root's alone (sudo drfgov history)")
        try:
            path.stat()
        except FileNotFoundError:
            raise HistoryError(f"{path}: no such file: drfgov run has not recorded history here yet "
                               "(history.path in the policy; --db PATH for another file)") from None
        except PermissionError:
            raise denied from None
        except OSError as exc:
            raise HistoryError(f"{path}: {exc.strerror}") from None
        if not os.access(path, os.R_OK):
            raise denied
        old_umask = os.umask(0o077)  # a reader may create -wal/-shm when the daemon is not running
        try:
            self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0, isolation_level=None)
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
            first = self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'shares'").fetchone()
        except sqlite3.Error as exc:
            raise HistoryError(f"{path}: cannot read the history: {exc}") from None
        finally:
            os.umask(old_umask)
        if version != SCHEMA_VERSION:
            self.db.close()
            hint = " (of the first format: the daemon moves it aside at its next start)" if first else ""
            raise HistoryError(f"{path}: not a drfgov history of format {SCHEMA_VERSION}{hint}")
        self._load_ids()

    def _load_ids(self) -> None:
        self._resources = {rid: name for rid, name in self.db.execute("SELECT id, name FROM resources")}
        self._layouts = {lid: [self._resources.get(int(i), f"resource {i}") for i in text.split(",") if i]
                         for lid, text in self.db.execute("SELECT id, resources FROM layouts")}

    def _layout(self, lid: int) -> list[str]:
        """The resource names of a layout (re-read when the daemon added one since we opened)."""
        if lid not in self._layouts:
            self._load_ids()
        return self._layouts.get(lid, [])

    def names(self) -> dict[int, str]:
        """Every user the history knows, uid → login name."""
        return dict(self.db.execute("SELECT uid, name FROM users ORDER BY uid"))

    def span(self) -> tuple[int, int] | None:
        """The first and last time recorded, or None when empty."""
        lo, hi = self.db.execute("SELECT min(t), max(t) FROM (SELECT t FROM samples UNION ALL "
                                 "SELECT t FROM hourly)").fetchone()
        return None if lo is None else (int(lo), int(hi))

    def find_user(self, text: str) -> int:
        """The uid of a login name or uid the history knows.

        Raises:
            KeyError: with a message naming who is known.
        """
        names = self.names()
        if text.isdigit() and int(text) in names:
            return int(text)
        for uid, name in names.items():
            if name == text:
                return uid
        known = ", ".join(sorted(names.values())[:10]) + (" …" if len(names) > 10 else "")
        raise KeyError(f"{text}: no such user in the history (known: {known or 'nobody yet'})")

    def series(self, since: float, until: float, uid: int | None = None) -> dict[int, UserSeries]:
        """Every user's (or ``uid``'s) points with since ≤ t ≤ until, by uid."""
        lo, hi = int(math.floor(since)), int(math.ceil(until))
        cond, args = "t >= ? AND t <= ?", [lo, hi]
        if uid is not None:
            cond, args = cond + " AND uid = ?", args + [uid]
        self.db.execute("BEGIN")  # one snapshot: maintenance may move an hour from samples to hourly meanwhile
        try:
            hourly = self.db.execute("SELECT uid, t, samples, layout, dominant_resource, dominant_share, "
                                     f"dominant_share_max, weighted_share, held, vectors FROM hourly WHERE {cond}",
                                     args).fetchall()
            raw = self.db.execute("SELECT uid, t, 1, layout, dominant_resource, dominant_share, dominant_share, "
                                  f"weighted_share, NULL, vectors FROM samples WHERE {cond}", args).fetchall()
            names = self.names()
        finally:
            self.db.execute("COMMIT")
        if hourly and raw:  # mid-maintenance, an hour may be in both: its aggregate counts
            aggregated = {r[1] for r in hourly}
            raw = [r for r in raw if r[1] // HOUR_S * HOUR_S not in aggregated]
        m = len(hourly) + len(raw)
        if not m:
            return {}
        cols = list(zip(*hourly, *raw))
        uids = np.array(cols[0], dtype=np.int64)
        times = np.array(cols[1], dtype=np.int64)
        layouts = np.array(cols[3], dtype=np.int64)
        is_hour = np.zeros(m, dtype=bool)
        is_hour[:len(hourly)] = True
        resources = list(dict.fromkeys(r for lid in np.unique(layouts) for r in self._layout(int(lid))))
        col = {r: i for i, r in enumerate(resources)}
        usage, demand, allocation, held_by = (np.full((m, len(resources)), np.nan) for _ in range(4))
        held = np.array(cols[8], dtype=float)  # NULL (a sample's) → NaN, filled below
        blobs = cols[9]
        for lid in np.unique(layouts):
            own = self._layout(int(lid))
            c = len(own)
            if not c:
                continue
            where = [col[r] for r in own]
            for hour_rows in (True, False):
                idx = np.flatnonzero((layouts == lid) & (is_hour == hour_rows))
                if not len(idx):
                    continue
                data = np.frombuffer(b"".join(blobs[i] for i in idx), dtype=np.uint8).reshape(len(idx), -1)
                floats = np.ascontiguousarray(data[:, :(16 if hour_rows else 12) * c]).view("<f4")
                floats = floats.reshape(len(idx), -1, c).astype(float)
                grid = np.ix_(idx, where)
                if hour_rows:
                    usage[grid], allocation[grid], demand[grid], held_by[grid] = (floats[:, i] for i in range(4))
                else:
                    usage[grid], demand[grid], allocation[grid] = (floats[:, i] for i in range(3))
                    bits = np.unpackbits(data[:, 12 * c:], axis=1, bitorder="little")[:, :c].astype(float)
                    held_by[grid] = bits
                    held[idx] = bits.max(axis=1)
        dominant_names = np.array([None, *(self._resources.get(i) for i in range(1, max(self._resources, default=0) + 1))],
                                  dtype=object)
        dominant_ids = np.nan_to_num(np.array(cols[4], dtype=float), nan=0.0).astype(np.int64)
        dominant_ids[(dominant_ids < 0) | (dominant_ids >= len(dominant_names))] = 0
        dominant = dominant_names[dominant_ids]
        shares = np.array(cols[5:8], dtype=float)  # None (NULL) → NaN
        counts = np.array(cols[2], dtype=np.int64)
        order = np.lexsort((times, uids))
        bounds = np.flatnonzero(np.diff(uids[order])) + 1
        out = {}
        for part in np.split(order, bounds):
            u = int(uids[part[0]])
            have = list(dict.fromkeys(r for lid in np.unique(layouts[part]) for r in self._layout(int(lid))))
            out[u] = UserSeries(
                uid=u, name=names.get(u, str(u)), t=times[part], samples=counts[part],
                dominant_share=shares[0, part], dominant_share_max=shares[1, part], weighted_share=shares[2, part],
                held=np.nan_to_num(held[part]), dominant_resource=dominant[part],
                usage={r: usage[part, col[r]] for r in have}, demand={r: demand[part, col[r]] for r in have},
                allocation={r: allocation[part, col[r]] for r in have},
                held_by={r: np.nan_to_num(held_by[part, col[r]]) for r in have})
        return out

    def capacity(self, since: float, until: float) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Tick times and each resource's capacity then (what the users shared)."""
        rows = self.db.execute("SELECT t, layout, capacity FROM ticks WHERE t >= ? AND t <= ? ORDER BY t",
                               (int(math.floor(since)), int(math.ceil(until)))).fetchall()
        resources = list(dict.fromkeys(r for _, lid, _ in rows for r in self._layout(lid)))
        out = {r: np.full(len(rows), np.nan) for r in resources}
        for j, (_, lid, blob) in enumerate(rows):
            own = self._layout(lid)
            for r, v in zip(own, np.frombuffer(blob, dtype="<f4", count=len(own))):
                out[r][j] = v
        return np.array([r[0] for r in rows], dtype=np.int64), out

    def limits(self, since: float, until: float, uid: int | None = None) -> list[tuple[int, int, object]]:
        """Limit changes (t, uid, limits as state.json has them), oldest first, led by each
        user's limits in force at ``since``."""
        lo, hi = int(math.floor(since)), int(math.ceil(until))
        only, args = ("", []) if uid is None else (" AND uid = ?", [uid])
        rows = self.db.execute(
            f"SELECT t, uid, limits FROM limits WHERE (t >= ? AND t <= ?{only}) OR (t, uid) IN "
            f"(SELECT max(t), uid FROM limits WHERE t < ?{only} GROUP BY uid) ORDER BY t, uid",
            [lo, hi, *args, lo, *args]).fetchall()
        return [(t, u, _decode_limits(text)) for t, u, text in rows]

    def close(self) -> None:
        self.db.close()
