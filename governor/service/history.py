"""Share history in SQLite (stdlib ``sqlite3``), with bounded retention.

One row per user per recorded tick. Ticks are recorded at most every ``every_s`` seconds
(default 60: a day of 1,000 users is 1.44 M rows) and rows older than ``retention_days`` are
deleted once an hour, so the file stays bounded. WAL journal: readers never block the daemon.

It is root's alone: the database and its ``-wal``/``-shm`` files 0600, in a directory nobody
else may write (created 0700; an existing one writable by others is refused).
SQLite coordinates through byte-range locks on those files, so a user who could open them
could hold a lock and stall every write (five failed ticks stopped the daemon); and a write
waits at most ``BUSY_TIMEOUT_MS`` for a lock, never seconds inside a tick.

Table ``shares``: ``time_unix_s`` (REAL), ``uid``, ``name``, ``dominant_resource``,
``dominant_share``, ``weighted_share``, and ``vectors`` — JSON ``{"weight", "usage", "demand",
"allocation", "limits"}`` in the units of state.json.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

__all__ = ["History"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS shares (
    time_unix_s REAL NOT NULL, uid INTEGER NOT NULL, name TEXT NOT NULL,
    dominant_resource TEXT, dominant_share REAL NOT NULL, weighted_share REAL NOT NULL,
    vectors TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS shares_time ON shares (time_unix_s);
CREATE INDEX IF NOT EXISTS shares_uid_time ON shares (uid, time_unix_s);
"""
PRUNE_EVERY_S = 3600.0
BUSY_TIMEOUT_MS = 50


class History:
    """Appends state documents' users to the database at ``path`` (created with its directory).

    Raises:
        sqlite3.Error / OSError: from the constructor when the database cannot be opened
            (PermissionError: its directory is writable by other users).
    """

    def __init__(self, path: str | Path, retention_days: float, every_s: float = 60.0):
        path = Path(path)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if path.parent.stat().st_mode & 0o022:
            raise PermissionError(f"{path.parent} is writable by other users: anyone could plant or lock the "
                                  "history's files there (chmod go-w, or point history.path elsewhere)")
        old_umask = os.umask(0o077)  # SQLite creates -wal and -shm with the database's mode
        try:
            for existing in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                if existing.exists():
                    os.chmod(existing, 0o600)
            self.db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(SCHEMA)
        finally:
            os.umask(old_umask)
        self.retention_s = retention_days * 86400.0
        self.every_s = every_s
        self._last_record = float("-inf")
        self._last_prune = float("-inf")

    def record(self, state: dict) -> bool:
        """Store ``state``'s users if ``every_s`` has passed since the last record; prune hourly.
        Returns whether it recorded."""
        now = float(state["time_unix_s"])
        if now - self._last_record < self.every_s:
            return False
        rows = [(now, u["uid"], u["name"], u["dominant_resource"], u["dominant_share"], u["weighted_share"],
                 json.dumps({k: u[k] for k in ("weight", "usage", "demand", "allocation", "limits")}))
                for u in state["users"]]
        with self.db:
            self.db.executemany("INSERT INTO shares VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            if now - self._last_prune >= PRUNE_EVERY_S:
                self.db.execute("DELETE FROM shares WHERE time_unix_s < ?", (now - self.retention_s,))
                self._last_prune = now
        self._last_record = now
        return True

    def rows(self, uid: int | None = None) -> list[tuple]:
        """(time_unix_s, uid, name, dominant_resource, dominant_share, weighted_share), oldest first."""
        query = "SELECT time_unix_s, uid, name, dominant_resource, dominant_share, weighted_share FROM shares"
        args: tuple = ()
        if uid is not None:
            query, args = query + " WHERE uid = ?", (uid,)
        return self.db.execute(query + " ORDER BY time_unix_s, uid", args).fetchall()

    def close(self) -> None:
        self.db.close()
