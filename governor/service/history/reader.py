"""Reading: :class:`HistoryReader` gives ``drfgov history`` each user's :class:`UserSeries`.

Read-only and never in the daemon's way: WAL readers do not take the writers' lock. A point is
a sample or an aggregated hour; a range that spans both (mid-maintenance an hour may be in both
tables) counts the hour's aggregate only.
"""

from __future__ import annotations

import functools
import math
import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import numpy as np

from governor.service.history.codec import _decode_limits
from governor.service.history.schema import HOUR_S, SCHEMA_VERSION

__all__ = ["HistoryError", "HistoryReader", "UserSeries"]


class HistoryError(Exception):
    """The history database cannot be read (missing, not readable, not a drfgov history, damaged)."""


_DAMAGED = (sqlite3.Error, ValueError, IndexError, TypeError)  # SQLite's own, and rows that do not decode


def _reading(method):
    """A read of :class:`HistoryReader`: what a damaged file raises becomes a HistoryError
    naming the file (the one place SQLite's errors are translated)."""
    @functools.wraps(method)
    def read(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except _DAMAGED as exc:
            raise HistoryError(f"{self.path}: cannot read the history: {exc}") from None
    return read


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

    A history whose directory cannot be written (a read-only filesystem, a read-only copy) is
    read as it is (``immutable=1``, :attr:`immutable` True): a WAL reader needs a ``-shm`` file
    that SQLite cannot make there. A writer at the same time is not seen (what it has not yet
    checkpointed into the file is missed; a daemon stopped cleanly has checkpointed all).

    Raises:
        HistoryError: from the constructor: no such file, not readable, not a drfgov history,
            damaged (the database is closed then); from every read: damaged.
    """

    def __init__(self, path: str | Path):
        self.path = path = Path(path)
        denied = HistoryError(f"{path}: permission denied: the history is root's alone (sudo drfgov history)")
        try:
            mode = path.stat().st_mode
        except FileNotFoundError:
            raise HistoryError(f"{path}: no such file: drfgov run has not recorded history here yet "
                               "(history.path in the policy; --db PATH for another file)") from None
        except PermissionError:
            raise denied from None
        except OSError as exc:
            raise HistoryError(f"{path}: {exc.strerror}") from None
        if not stat.S_ISREG(mode):  # a FIFO would hang the open
            raise HistoryError(f"{path}: not a regular file: not a drfgov history")
        if not os.access(path, os.R_OK):
            raise denied
        #: read as it is (``immutable=1``): its directory cannot be written (a read-only
        #: filesystem, a copy), so SQLite could not make the ``-shm`` a WAL reader needs
        self.immutable = False
        old_umask = os.umask(0o077)  # its first read may create -wal/-shm when the daemon is not running
        try:
            try:
                self._open(immutable=False)
            except HistoryError:
                if os.access(path.parent, os.W_OK) and not self._cannot_open:
                    raise
                self._open(immutable=True)  # raises as the first did, but for a cause of its own
                self.immutable = True
        finally:
            os.umask(old_umask)

    def _open(self, immutable: bool) -> None:
        """Connect read-only (``immutable``: read the file as it is, no ``-wal``/``-shm`` made or
        read, no lock taken) and check the format.

        Raises:
            HistoryError: it cannot be opened or read, or is not a drfgov history (closed then).
        """
        self._cannot_open = False
        # the path quoted: a '#' or '?' in it would end it in the URI, and name another file
        uri = f"file:{quote(str(self.path.absolute()))}?mode=ro" + ("&immutable=1" if immutable else "")
        try:
            self.db = sqlite3.connect(uri, uri=True, timeout=1.0, isolation_level=None)
        except sqlite3.Error as exc:
            self._cannot_open = "unable to open database file" in str(exc)
            raise HistoryError(f"{self.path}: cannot read the history: {exc}") from None
        try:
            self._check_format()
        except HistoryError as exc:
            self.db.close()
            self._cannot_open = "unable to open database file" in str(exc)  # SQLITE_CANTOPEN: no -shm to be made
            raise
        except BaseException:
            self.db.close()
            raise

    @_reading
    def _check_format(self) -> None:
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            first = self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'shares'").fetchone()
            hint = " (of the first format: the daemon moves it aside at its next start)" if first else ""
            raise HistoryError(f"{self.path}: not a drfgov history of format {SCHEMA_VERSION}{hint}")
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

    @_reading
    def names(self) -> dict[int, str]:
        """Every user the history knows, uid → login name."""
        return dict(self.db.execute("SELECT uid, name FROM users ORDER BY uid"))

    @_reading
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

    @_reading
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

    @_reading
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

    @_reading
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
