"""The history's upkeep, off the tick: pruning, hourly aggregation, checkpoints, incremental vacuum.

At most once an hour of the documents' clock (asked for by :meth:`History.record
<governor.service.history.writer.History.record>`), a background thread with its own connection
deletes what is past retention, turns hours older than the full-resolution window into one
``hourly`` row per user (:mod:`.aggregate`), and gives free pages beyond a tenth of the file back
to the file system (``auto_vacuum=INCREMENTAL``); the rest is what the next hour's rows reuse, so
a steady file neither grows nor churns. Checkpoints run on the same thread. Every step is a short
transaction under the writers' lock (``DELETE_CHUNK_ROWS`` rows, ``VACUUM_CHUNK_PAGES`` pages),
so the tick's ``record`` waits a few ms at most.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from itertools import groupby

from governor.service.history.aggregate import _aggregate
from governor.service.history.schema import HOUR_S

log = logging.getLogger("drfgov")

DELETE_CHUNK_ROWS = 5000         # rows per maintenance transaction (a few ms: the tick may wait that long)
VACUUM_CHUNK_PAGES = 256
FREE_SLACK = 0.10                # free pages up to this share of the file stay for reuse


class Maintenance:
    """The maintenance half of :class:`~governor.service.history.writer.History` (a mixin: it
    runs on History's own state).

    It uses, from History: ``retention_s``, ``full_resolution_s``, ``every_s``, ``_last_t``;
    ``_lock`` (the writers' lock, shared with ``record``), ``_jobs`` with ``_due_hour``,
    ``_due_checkpoint`` and ``_busy`` (the requests), ``_stop``, ``_abandon``, ``_thread``,
    ``_worker_db``; ``_connect_existing()`` (never another file at the path, never a new one),
    ``_moved()`` and ``_allocate_layout()``. It sets ``_forget`` when it deleted users, so that
    ``record`` rewrites its caches.
    """

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
            db = self._worker_db = self._connect_existing()
            try:
                if now is not None:
                    self._maintain(db, now)
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                self._worker_db = None
                db.close()
        except (sqlite3.Error, OSError) as exc:
            # (not when stopped, nor when its file has gone: record() says so, and opens the new one)
            if not (self._stop.is_set() or self._abandon or self._moved()):
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
        db = self._connect_existing()
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
