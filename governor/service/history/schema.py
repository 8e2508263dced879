"""The history database's tables and format version, and the timing both sides share.

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

The BLOBs' byte forms (float32, bitmaps) and the limits' JSON are :mod:`.codec`'s. ``samples``
has no uid index on purpose: rows are appended in key order (a handful of pages per record),
and a uid's rows are read by a range scan. A database of the first format (one ``shares``
table of JSON rows) is renamed ``history.db.v1`` (or ``history.db.v1.1``, ``.v1.2``, …: the first
name free, an earlier copy is never replaced) and a new one started.
"""

from __future__ import annotations

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
#: drfgov's tables, as SCHEMA creates them (a file holding only some of them, all empty, with
#: ``user_version`` 0 is a creation an older drfgov left unfinished: it is completed)
TABLES = ("resources", "layouts", "users", "ticks", "samples", "hourly", "weights", "limits")
#: the longest a write (or the tick's record()) waits for SQLite's lock, never seconds inside a tick
BUSY_TIMEOUT_MS = 50
HOUR_S = 3600
FULL_RESOLUTION_S = 86400        # samples younger than this stay as recorded
