"""The history database: what record() writes reads back, hours aggregate to hand-computed
means, retention prunes, the files stay root's, and nothing but sqlite3.Error/OSError escapes."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import stat
import time

import numpy as np
import pytest

from governor.service.history import HOUR_S, History, HistoryError, HistoryReader
from governor.service.ownfiles import ForeignFile

T0 = 1_790_000_000 // HOUR_S * HOUR_S  # an hour's start
DAY = 86400


def user(uid=1000, *, usage=None, demand=None, allocation=None, held=(), limits=None, weight=None,
         dominant="cpu", dominant_share=0.25, weighted_share=0.125, name=None):
    usage = {"cpu": 1.0, "memory": 2.0**30} if usage is None else usage
    return {"uid": uid, "name": name or f"u{uid}", "weight": weight or {"cpu": 2.0, "memory": 1.0},
            "dominant_resource": dominant, "dominant_share": dominant_share, "weighted_share": weighted_share,
            "usage": usage, "demand": dict(usage) if demand is None else demand,
            "allocation": dict(usage) if allocation is None else allocation, "held": list(held),
            "limits": limits if limits is not None else {"cpu.max": "max 100000", "cpu.weight": 200}}


def doc(t, *users, capacity=None, saturated=()):
    return {"version": 1, "time_unix_s": float(t), "capacity": capacity or {"cpu": 8.0, "memory": 2.0**34},
            "saturated": list(saturated), "users": list(users)}


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "lib" / "history.db"


def open_history(path, retention_days=14, every_s=60, **kw):
    return History(path, retention_days, every_s, background=False, **kw)


@pytest.mark.parametrize("users_once", [False, True], ids=["list", "iterator"])
def test_a_sample_reads_back_as_recorded(db_path, users_once):
    h = open_history(db_path)
    usage = {"cpu": 1.5, "memory": 3 * 2.0**30, "disk:8:0": 0.25, "net:eth0:tx": 1e8}
    demand = {r: 2 * v for r, v in usage.items()}
    allocation = {r: 0.75 * v for r, v in usage.items()}
    state = doc(T0 + 5.7, user(1000, usage=usage, demand=demand, allocation=allocation, held=["cpu", "net:eth0:tx"],
                               dominant="memory", dominant_share=0.1875, weighted_share=0.09375, name="alice"),
                user(1001, name="bob"), saturated=["cpu"])
    if users_once:  # as the daemon hands it over: each entry built as it is read
        state["users"] = iter(state["users"])
    assert h.record(state)
    h.close()
    r = HistoryReader(db_path)
    got = r.series(T0, T0 + 60)
    assert sorted(got) == [1000, 1001] and r.names() == {1000: "alice", 1001: "bob"}
    a = got[1000]
    assert list(a.t) == [T0 + 5] and list(a.samples) == [1]  # integer seconds
    assert a.dominant_share[0] == 0.1875 and a.weighted_share[0] == 0.09375 and a.dominant_resource[0] == "memory"
    assert list(a.usage) == list(usage)
    for res in usage:  # float32: 7 significant digits
        assert a.usage[res][0] == pytest.approx(usage[res], rel=1e-7)
        assert a.demand[res][0] == pytest.approx(demand[res], rel=1e-7)
        assert a.allocation[res][0] == pytest.approx(allocation[res], rel=1e-7)
    assert {res: a.held_by[res][0] for res in usage} == {"cpu": 1, "memory": 0, "disk:8:0": 0, "net:eth0:tx": 1}
    assert a.held[0] == 1.0 and got[1001].held[0] == 0.0
    t, cap = r.capacity(T0, T0 + 60)
    assert list(t) == [T0 + 5] and cap["memory"][0] == 2.0**34
    assert r.limits(T0, T0 + 60, 1000) == [(T0 + 5, 1000, {"cpu.max": "max 100000", "cpu.weight": 200})]
    assert r.find_user("alice") == 1000 and r.find_user("1001") == 1001
    with pytest.raises(KeyError, match="carol: no such user"):
        r.find_user("carol")
    r.close()


def test_a_row_is_compact_and_limits_and_weights_are_stored_only_when_they_change(db_path):
    h = open_history(db_path)
    for k in range(4):
        limits = {"cpu.max": f"{100000 if k < 2 else 50000} 100000", "cpu.weight": 200}
        h.record(doc(T0 + 60 * k, user(1000, limits=limits, usage={f"r{i}": 1.0 for i in range(6)})))
    counts = {t: h.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("samples", "limits", "weights")}
    assert counts == {"samples": 4, "limits": 2, "weights": 1}
    blob = h.db.execute("SELECT vectors FROM samples LIMIT 1").fetchone()[0]
    assert len(blob) == 6 * 3 * 4 + 1  # six resources × usage, demand, allocation × float32, one byte of held bits
    kernel_form = {"cpu.max": "200000 100000", "cpu.weight": 200, "memory.low": 2**28, "memory.high": None,
                   "memory.max": None, "io.max": {"8:0": "rbps=1000000 wbps=max riops=max wiops=max"}}
    h.record(doc(T0 + 600, user(1000, limits=kernel_form)))
    text = h.db.execute("SELECT limits FROM limits ORDER BY t DESC LIMIT 1").fetchone()[0]
    assert text == '["200000 100000",200,268435456,null,null,{"8:0":"rbps=1000000 wbps=max riops=max wiops=max"}]'
    h.close()
    assert HistoryReader(db_path).limits(T0 + 600, T0 + 600, 1000)[-1] == (T0 + 600, 1000, kernel_form)


def test_an_hour_beyond_the_full_resolution_window_becomes_hand_computed_means(db_path):
    h = open_history(db_path, full_resolution_s=HOUR_S)
    # three samples in the first hour; her disk appears only in the third
    h.record(doc(T0 + 0, user(usage={"cpu": 1.0, "memory": 100.0}, demand={"cpu": 2.0, "memory": 100.0},
                              allocation={"cpu": 1.0, "memory": 50.0}, held=["cpu"], dominant_share=0.1, weighted_share=0.05)))
    h.record(doc(T0 + 60, user(usage={"cpu": 2.0, "memory": 200.0}, demand={"cpu": 8.0, "memory": 200.0},
                               allocation={"cpu": 2.0, "memory": 50.0}, dominant_share=0.4, weighted_share=0.2)))
    h.record(doc(T0 + 120, user(usage={"cpu": 6.0, "memory": 300.0, "disk:8:0": 0.5},
                                demand={"cpu": 5.0, "memory": 300.0, "disk:8:0": 0.5},
                                allocation={"cpu": 3.0, "memory": 80.0, "disk:8:0": 0.25}, held=["cpu", "memory"],
                                dominant="memory", dominant_share=0.7, weighted_share=0.35)))
    h.record(doc(T0 + 2 * HOUR_S + 1, user()))  # an hour later than full resolution: the first hour aggregates
    rows = h.db.execute("SELECT t, samples, dominant_resource, dominant_share, dominant_share_max, weighted_share, held "
                        "FROM hourly").fetchall()
    assert len(rows) == 1
    t, k, dominant, mean_share, max_share, mean_weighted, held = rows[0]
    assert (t, k) == (T0, 3)
    assert mean_share == pytest.approx((0.1 + 0.4 + 0.7) / 3) and max_share == pytest.approx(0.7)
    assert mean_weighted == pytest.approx((0.05 + 0.2 + 0.35) / 3) and held == pytest.approx(2 / 3)
    assert h.db.execute("SELECT name FROM resources WHERE id = ?", (dominant,)).fetchone()[0] == "cpu"  # 2 of 3
    assert h.db.execute("SELECT count(*) FROM samples WHERE t < ?", (T0 + HOUR_S,)).fetchone()[0] == 0  # raw rows gone
    h.close()
    r = HistoryReader(db_path)
    s = r.series(T0, T0 + HOUR_S - 1)[1000]
    assert list(s.t) == [T0] and list(s.samples) == [3]
    assert s.usage["cpu"][0] == pytest.approx(3.0) and s.usage["memory"][0] == pytest.approx(200.0)
    assert s.usage["disk:8:0"][0] == pytest.approx(0.5)  # the mean over the samples that had it
    assert s.allocation["cpu"][0] == pytest.approx(2.0) and s.allocation["memory"][0] == pytest.approx(60.0)
    assert s.demand["cpu"][0] == pytest.approx(8.0)  # the hour's maximum
    assert s.held_by["cpu"][0] == pytest.approx(2 / 3) and s.held_by["memory"][0] == pytest.approx(1 / 3)
    assert s.held_by["disk:8:0"][0] == 0
    # an hour and two raw samples weigh by their samples: (3 × 0.4 + 0.25 + 0.25) / 5
    both = r.series(T0, T0 + 3 * HOUR_S)[1000].summary()
    assert both["samples"] == 4 and both["dominant_share_mean"] == pytest.approx((3 * 0.4 + 0.25) / 4)
    assert both["dominant_share_max"] == pytest.approx(0.7)
    assert both["resources"]["cpu"]["usage_mean"] == pytest.approx((3 * 3.0 + 1.0) / 4)
    assert both["held_ratio"] == pytest.approx(2 / 4)
    r.close()


def test_retention_prunes_everything_older_but_the_limits_in_force_then(db_path):
    h = open_history(db_path, retention_days=2)
    for hour in range(4 * 24):  # four days, a sample an hour: user 1001 leaves after the first day
        users = [user(1000, limits={"cpu.max": f"{100000 + hour} 100000"})] + ([user(1001)] if hour < 24 else [])
        h.record(doc(T0 + hour * HOUR_S, *users))
    now = T0 + (4 * 24 - 1) * HOUR_S
    h.maintain(now)
    oldest = min(h.db.execute("SELECT min(t) FROM hourly").fetchone()[0], h.db.execute("SELECT min(t) FROM samples").fetchone()[0])
    assert oldest >= now - 2 * DAY
    assert h.db.execute("SELECT count(*) FROM hourly").fetchone()[0] + h.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 2 * 24 + 1
    assert h.db.execute("SELECT uid FROM users").fetchall() == [(1000,)]  # 1001 not seen for longer than retention
    assert h.db.execute("SELECT count(*) FROM limits WHERE uid = 1001").fetchone()[0] == 0
    cutoff = now - 2 * DAY  # before it, only the limits in force then: her last change before it
    assert h.db.execute("SELECT t FROM limits WHERE t < ?", (cutoff,)).fetchall() == [(cutoff - HOUR_S,)]
    h.close()
    r = HistoryReader(db_path)
    changes = r.limits(cutoff + 10, cutoff + 2 * HOUR_S, 1000)
    assert [t for t, _, _ in changes] == [cutoff, cutoff + HOUR_S, cutoff + 2 * HOUR_S]
    assert changes[0][2] == {"cpu.max": f"{100000 + 47} 100000"}  # set at T0 + 47 h
    r.close()


def test_the_newest_limits_outlive_retention_while_the_user_is_there(db_path):
    h = open_history(db_path, retention_days=1)
    for hour in range(3 * 24):  # limits never change: one row, three days old
        h.record(doc(T0 + hour * HOUR_S, user(1000)))
    h.maintain()
    assert h.db.execute("SELECT t FROM limits").fetchall() == [(T0,)]
    h.close()


def test_the_database_shrinks_when_retention_does(db_path):
    h = open_history(db_path, retention_days=14, full_resolution_s=DAY)
    users = [user(1000 + i, usage={f"r{j}": float(j) for j in range(8)}) for i in range(200)]
    for k in range(300):
        h.record(doc(T0 + 60 * k, *users))
    h.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    big = h.db.execute("PRAGMA page_count").fetchone()[0]
    h.close()
    h = open_history(db_path, retention_days=0.01)  # 14 minutes: most of it goes
    h.maintain(T0 + 60 * 299)
    h.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    small = h.db.execute("PRAGMA page_count").fetchone()[0]
    free = h.db.execute("PRAGMA freelist_count").fetchone()[0]
    assert h.db.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
    assert small < big / 5 and free <= 0.1 * small + 1
    assert os.path.getsize(db_path) == small * h.db.execute("PRAGMA page_size").fetchone()[0]
    h.close()


def test_maintenance_in_the_background_aggregates_and_keeps_the_files_root_s(db_path):
    h = History(db_path, 14, 60, full_resolution_s=HOUR_S)  # the daemon's way: background maintenance
    for k in range(3 * 60 + 1):
        h.record(doc(T0 + 60 * k, user(1000), user(1001)))
    h.settle(30)
    hours = [t for (t,) in h.db.execute("SELECT DISTINCT t FROM hourly ORDER BY t")]
    assert hours and hours[0] == T0
    assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700
    for name in ("history.db", "history.db-wal", "history.db-shm"):
        assert stat.S_IMODE((db_path.parent / name).stat().st_mode) == 0o600, name
    h.close()
    assert not h._thread.is_alive()


def test_record_never_waits_long_for_maintenance_and_loses_nothing(db_path):
    h = open_history(db_path)
    h.record(doc(T0, user()))
    h._lock.acquire()  # maintenance in the middle of a transaction
    try:
        begin = time.monotonic()
        assert h.record(doc(T0 + 60, user()))
        assert time.monotonic() - begin < 0.5  # waited its 50 ms, then kept the rows for later
        assert not h.record(doc(T0 + 61, user()))  # not due: nothing new, still waiting
    finally:
        h._lock.release()
    assert not h.record(doc(T0 + 62, user()))  # not due, but the waiting rows go in now
    assert [t for (t,) in h.db.execute("SELECT t FROM samples ORDER BY t")] == [T0, T0 + 60]
    h.close()


@pytest.mark.parametrize("bad", [
    {"uid": "nobody"}, {"uid": -1}, {"uid": 2**40}, {"uid": True}, {"name": "x"}, "not a dict", None,
    {"uid": 1002, "usage": {"cpu": "lots"}, "demand": [], "allocation": None},
])
def test_a_malformed_user_is_skipped_and_the_others_recorded(db_path, bad):
    h = open_history(db_path)
    assert h.record(doc(T0, user(1000), bad, user(1001)))
    uids = [u for (u,) in h.db.execute("SELECT uid FROM samples ORDER BY uid")]
    assert {1000, 1001} <= set(uids)  # the last bad one is kept, its values NaN
    assert h.skipped_users + len(uids) == 3
    h.close()


def test_values_that_are_not_numbers_become_nan_not_errors(db_path):
    h = open_history(db_path)
    assert h.record(doc(T0, user(1000, usage={"cpu": None, "memory": True}, dominant_share=None, weighted_share="x",
                                 dominant=None, limits={"cpu.max": float("nan")}, weight=None)))
    h.close()
    s = HistoryReader(db_path).series(T0, T0)[1000]
    assert math.isnan(s.usage["cpu"][0]) and math.isnan(s.usage["memory"][0]) and math.isnan(s.dominant_share[0])
    assert s.dominant_resource[0] is None


@pytest.mark.parametrize("state", [{}, {"time_unix_s": "soon"}, {"time_unix_s": float("inf")}, {"time_unix_s": -5.0},
                                   {"time_unix_s": 1e300}, {"time_unix_s": 1.0, "users": "everyone"}, None])
def test_a_document_without_a_time_raises_only_a_sqlite_error(db_path, state):
    h = open_history(db_path)
    with pytest.raises(sqlite3.DataError):
        h.record(state)
    h.close()


def test_a_database_that_refuses_writes_raises_sqlite_errors_and_recovers(db_path):
    h = open_history(db_path)
    h.record(doc(T0, user()))
    h.db.execute("PRAGMA query_only = ON")
    with pytest.raises(sqlite3.OperationalError):
        h.record(doc(T0 + 60, user(usage={"new": 1.0})))
    h.db.execute("PRAGMA query_only = OFF")
    assert h.record(doc(T0 + 120, user(usage={"new": 1.0})))  # ids re-read: the failed ones are not assumed
    assert h.db.execute("SELECT count(*) FROM samples").fetchone()[0] == 2
    h.close()


def _first_format(path, rows=1):
    """A database of the first format (one ``shares`` table of JSON rows) with ``rows`` rows."""
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE shares (time_unix_s REAL, uid INTEGER, name TEXT, dominant_resource TEXT, "
                "dominant_share REAL, weighted_share REAL, vectors TEXT)")
    old.executemany("INSERT INTO shares VALUES (?, 1000, 'a', 'cpu', 0.5, 0.5, '{}')", [(t,) for t in range(rows)])
    old.commit()
    old.close()


def test_the_first_format_is_moved_aside_and_a_compact_one_started(db_path, caplog):
    db_path.parent.mkdir(mode=0o700)
    _first_format(db_path)
    with pytest.raises(HistoryError, match="first format"):
        HistoryReader(db_path)
    h = open_history(db_path)
    h.record(doc(T0, user()))
    h.close()
    aside = db_path.with_name("history.db.v1")
    assert sqlite3.connect(aside).execute("SELECT count(*) FROM shares").fetchone()[0] == 1
    assert "moved to" in caplog.text
    assert HistoryReader(db_path).series(T0, T0)


def test_moving_the_first_format_aside_never_replaces_an_earlier_copy(db_path, caplog):
    """The audit's leftovers: an earlier history.db.v1 (and its -wal) was replaced by the move.
    The first free name of .v1, .v1.1, .v1.2, … is taken, and the log line names it."""
    db_path.parent.mkdir(mode=0o700)
    kept = db_path.with_name("history.db.v1")
    _first_format(kept, rows=3)
    db_path.with_name("history.db.v1.1-wal").write_bytes(b"")  # a name whose -wal is there is not free either
    _first_format(db_path, rows=1)
    open_history(db_path).close()
    assert sqlite3.connect(kept).execute("SELECT count(*) FROM shares").fetchone()[0] == 3
    moved = db_path.with_name("history.db.v1.2")
    assert sqlite3.connect(moved).execute("SELECT count(*) FROM shares").fetchone()[0] == 1
    assert f"moved to {moved}" in caplog.text


def test_no_free_name_for_the_first_format_is_refused_and_nothing_moved(db_path, monkeypatch):
    from governor.service.history import writer

    monkeypatch.setattr(writer, "MAX_ASIDE_NAMES", 2)
    db_path.parent.mkdir(mode=0o700)
    for name in ("history.db.v1", "history.db.v1.1"):
        db_path.with_name(name).write_bytes(b"an earlier copy")
    _first_format(db_path)
    with pytest.raises(FileExistsError, match=r"history.db is of the first format and must be moved aside, but "):
        open_history(db_path)
    assert sqlite3.connect(db_path).execute("SELECT count(*) FROM shares").fetchone()[0] == 1
    assert {p.name for p in db_path.parent.iterdir()} == {"history.db", "history.db.v1", "history.db.v1.1"}


def test_a_creation_that_fails_midway_leaves_no_tables_and_is_taken_at_the_next_attempt(db_path, monkeypatch):
    """The audit: a disk that filled while the file was made left 6 tables at format 0, refused
    forever. Tables and user_version are one transaction: a failure midway rolls both back."""
    from governor.service.history import writer
    from governor.service.history.schema import SCHEMA
    from governor.service.ownfiles import foreign_file

    half = SCHEMA.index("CREATE TABLE IF NOT EXISTS samples")
    failing = SCHEMA[:half] + "INSERT INTO resources VALUES (1, NULL);\n" + SCHEMA[half:]  # fails after 4 tables
    monkeypatch.setattr(writer, "SCHEMA", failing)
    with pytest.raises(sqlite3.IntegrityError):
        open_history(db_path)
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    assert db.execute("PRAGMA user_version").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
    db.close()
    assert foreign_file("history", db_path) is None
    monkeypatch.setattr(writer, "SCHEMA", SCHEMA)
    h = open_history(db_path)
    assert h.record(doc(T0, user()))
    h.close()
    assert HistoryReader(db_path).series(T0, T0)


def test_a_creation_an_older_drfgov_left_unfinished_is_completed(db_path):
    from governor.service.history.schema import SCHEMA

    db_path.parent.mkdir(mode=0o700)
    old = sqlite3.connect(db_path)
    old.executescript(SCHEMA[:SCHEMA.index("CREATE TABLE IF NOT EXISTS hourly")])  # as the disk filled: 5 of 8
    old.commit()
    old.close()
    h = open_history(db_path)
    assert h.record(doc(T0, user()))
    h.close()
    assert sqlite3.connect(db_path).execute("PRAGMA user_version").fetchone()[0] == 2
    assert HistoryReader(db_path).series(T0, T0)


def test_some_other_database_is_refused(db_path):
    db_path.parent.mkdir(mode=0o700)
    other = sqlite3.connect(db_path)
    other.execute("CREATE TABLE accounts (x)")
    other.commit()
    other.close()
    db_path.chmod(0o644)
    with pytest.raises(ForeignFile, match=r"is not a drfgov history database \(it is an SQLite database of something "
                                          r"else \(tables: accounts\)\)"):
        open_history(db_path)
    assert db_path.stat().st_mode & 0o777 == 0o644  # judged before anything touched it (the audit of 2026-11-27)


def test_the_reader_never_writes_and_says_what_is_wrong(tmp_path, db_path):
    with pytest.raises(HistoryError, match="no such file"):
        HistoryReader(tmp_path / "none.db")
    h = open_history(db_path)
    h.record(doc(T0, user()))
    h.close()
    r = HistoryReader(db_path)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        r.db.execute("DELETE FROM samples")
    assert r.series(T0 + 1, T0 + 100) == {} and r.span() == (T0, T0)
    r.close()


def test_a_reader_sees_every_sample_once_while_maintenance_moves_hours(db_path):
    """Mid-maintenance an hour may be in both tables; the reader counts its aggregate only."""
    h = open_history(db_path, full_resolution_s=HOUR_S)
    for k in range(60):
        h.record(doc(T0 + 60 * k, user()))
    from governor.service.history.aggregate import _aggregate

    layouts = {lid: [int(i) for i in text.split(",")] for lid, text in h.db.execute("SELECT id, resources FROM layouts")}
    rows = h.db.execute("SELECT uid, t, layout, dominant_resource, dominant_share, weighted_share, vectors FROM samples").fetchall()
    h.db.execute("INSERT INTO hourly VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", _aggregate(T0, 1000, rows, layouts, None))
    h.db.commit()  # aggregated, raw rows not yet deleted
    r = HistoryReader(db_path)
    assert r.series(T0, T0 + HOUR_S)[1000].summary()["samples"] == 60
    r.close()
    h.close()


def test_weights_and_names_follow_changes(db_path):
    h = open_history(db_path)
    h.record(doc(T0, user(1000, name="alice")))
    h.record(doc(T0 + 60, user(1000, name="alice2", weight={"cpu": 3.0})))
    assert h.db.execute("SELECT name FROM users").fetchall() == [("alice2",)]
    assert [json.loads(w) for (w,) in h.db.execute("SELECT weight FROM weights ORDER BY t")] == [
        {"cpu": 2.0, "memory": 1.0}, {"cpu": 3.0}]
    h.close()


def test_close_stops_the_background_thread_promptly(db_path):
    h = History(db_path, 14, 60)
    h.record(doc(T0, user()))
    begin = time.monotonic()
    h.close()
    assert time.monotonic() - begin < 3 and not h._thread.is_alive()


def test_summary_of_a_series_is_sample_weighted(db_path):
    h = open_history(db_path)
    for k, cpu in enumerate([1.0, 2.0, 3.0, np.nan]):
        h.record(doc(T0 + 60 * k, user(usage={"cpu": cpu}, held=["cpu"] if k == 0 else [])))
    h.close()
    s = HistoryReader(db_path).series(T0, T0 + 600)[1000].summary()
    assert s["samples"] == 4 and s["resources"]["cpu"]["usage_mean"] == pytest.approx(2.0)
    assert s["held_ratio"] == 0.25 and s["dominant_resource"] == "cpu"


def test_a_user_not_measured_this_tick_is_not_recorded(db_path):
    """Her first sight (and a failed read): usage empty, shares 0. A row of zeros pulled her
    mean down (0.420 instead of 0.50 over 6 ticks) and showed {"limits": null}."""
    h = open_history(db_path)
    first = user(usage={}, demand={}, allocation={}, dominant=None, dominant_share=0.0, weighted_share=0.0)
    first["limits"] = None
    h.record(doc(T0, first, user(1001)))
    for k in range(1, 6):
        h.record(doc(T0 + 60 * k, user(dominant_share=0.5), user(1001)))
    failed_read = dict(first, limits={"cpu.max": "max 100000", "cpu.weight": 200})
    h.record(doc(T0 + 360, failed_read, user(1001)))
    h.close()
    assert h.skipped_users == 0
    series = HistoryReader(db_path).series(T0, T0 + 600)
    s = series[1000].summary()
    assert s["samples"] == 5 and s["dominant_share_mean"] == pytest.approx(0.5), s
    assert series[1001].summary()["samples"] == 7
    db = sqlite3.connect(db_path)
    assert db.execute("SELECT min(t) FROM samples WHERE uid = 1000").fetchone()[0] == T0 + 60
    assert "null" not in {r[0] for r in db.execute("SELECT limits FROM limits WHERE uid = 1000")}


def test_a_history_whose_directory_cannot_be_written_is_read_as_it_is(db_path, monkeypatch):
    """A cleanly stopped history on a read-only filesystem: a WAL reader's mode=ro must make the
    -shm and cannot ("unable to open database file"): it is read with immutable=1 instead.
    (The real read-only mount: tests/cli/test_history.py, as root.)"""
    import governor.service.history.reader as reader_module

    h = open_history(db_path)
    h.record(doc(T0, user()))
    h.close()
    real = sqlite3.connect
    uris = []

    def connect(database, *args, **kwargs):  # as SQLite answers where -shm cannot be made
        uris.append(database)
        if "immutable=1" not in database:
            raise sqlite3.OperationalError("unable to open database file")
        return real(database, *args, **kwargs)

    monkeypatch.setattr(reader_module.sqlite3, "connect", connect)
    r = HistoryReader(db_path)
    assert r.immutable and r.series(T0, T0)[1000].summary()["samples"] == 1
    r.close()
    assert len(uris) == 2 and uris[1].endswith("?mode=ro&immutable=1")
    access = os.access
    monkeypatch.setattr(reader_module.os, "access", lambda path, mode: mode != os.W_OK and access(path, mode))
    monkeypatch.setattr(reader_module.sqlite3, "connect", real)
    r = HistoryReader(db_path)
    assert not r.immutable  # the ro open worked: the fallback only when it fails
    r.close()


def test_an_error_other_than_cannot_open_in_a_writable_directory_is_not_retried(db_path):
    db_path.parent.mkdir(mode=0o700)
    db_path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    with pytest.raises(HistoryError, match="cannot read the history"):
        HistoryReader(db_path)


def test_records_dropped_while_the_lock_stays_busy_leave_no_dangling_ids(db_path, monkeypatch):
    import governor.service.history.writer as writer_module

    monkeypatch.setattr(writer_module, "MAX_PENDING", 2)
    h = open_history(db_path)
    h._lock.acquire()
    try:
        h.record(doc(T0, user(usage={"gpu": 1.0})))  # a new resource and layout, in the batch that will be dropped
        h.record(doc(T0 + 60, user(usage={"gpu": 2.0})))
        h.record(doc(T0 + 120, user(usage={"gpu": 3.0})))
    finally:
        h._lock.release()
    assert not h.record(doc(T0 + 121, user()))  # flushes
    assert h.dropped_batches == 1
    h.close()
    s = HistoryReader(db_path).series(T0, T0 + 600)[1000]
    assert list(s.t) == [T0 + 60, T0 + 120] and list(s.usage["gpu"]) == [2.0, 3.0]


def test_any_json_in_a_user_entry_or_the_capacity_is_skipped_never_raised(tmp_path_factory):
    from hypothesis import HealthCheck, given, settings, strategies as st

    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.text(max_size=5))
    json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                                st.dictionaries(st.text(max_size=5), inner, max_size=3)),
                               max_leaves=8)
    keys = st.sampled_from(["uid", "name", "usage", "demand", "allocation", "held", "limits", "weight",
                            "dominant_resource", "dominant_share", "weighted_share"])
    entries = st.dictionaries(keys, json_values, max_size=11)
    path = tmp_path_factory.mktemp("fuzz") / "lib" / "history.db"
    h = open_history(path, every_s=0)
    clock = iter(range(T0, T0 + 10**6))

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.one_of(entries, json_values), max_size=4), json_values)
    def record(users, capacity):  # malformed users are skipped, a malformed capacity not stored: no error at all
        assert h.record({"time_unix_s": next(clock), "users": users, "capacity": capacity, "saturated": capacity})

    record()
    assert h.record(doc(next(clock), user()))  # and it still records
    h.close()
    HistoryReader(path).series(T0, T0 + 10**6)  # and what it wrote reads back


def test_a_path_with_uri_characters_is_the_file_opened_and_a_fifo_is_refused(tmp_path):
    """The reader's SQLite URI took the path as it was: in ``q.db#`` the ``#`` ended it, so the
    reader opened — read-write, creating it — ``q.db`` (the hostile-input audit of
    2026-11-26); a FIFO hung the open."""
    odd = tmp_path / "q?x.db#1"
    h = open_history(odd)
    assert h.record(doc(T0, user(1000, name="alice")))
    h.close()
    assert HistoryReader(odd).names() == {1000: "alice"}
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("q?x.db#1")) == []
    fifo = tmp_path / "fifo.db"
    os.mkfifo(fifo)
    with pytest.raises(HistoryError, match="not a regular file"):
        HistoryReader(fifo)


def _open_fds_on(path) -> int:
    fds = "/proc/self/fd"
    return sum(1 for fd in os.listdir(fds) if os.path.realpath(os.path.join(fds, fd)).startswith(str(path)))


def test_a_damaged_file_is_a_history_error_from_the_constructor_and_every_read(db_path):
    """What SQLite raises on a damaged file, and rows that do not decode, reach drfgov history as
    HistoryError naming the file (it shows one line, exit 2), and a failed open leaves no
    connection behind."""
    h = open_history(db_path)
    for k in range(3):
        h.record(doc(T0 + 60 * k, user(1000), user(1001)))
    h.close()
    intact = db_path.read_bytes()
    with db_path.open("r+b") as f:  # pages 2 and 3: the reader's first look at the resources table fails
        f.seek(4096)
        f.write(bytes(8192))
    with pytest.raises(HistoryError, match=f"{db_path}: cannot read the history: database disk image is malformed"):
        HistoryReader(db_path)
    assert _open_fds_on(db_path) == 0
    db_path.write_bytes(intact)
    with sqlite3.connect(db_path) as rw:  # a vector cut short: it no longer decodes
        rw.execute("UPDATE samples SET vectors = x'00'")
    rw.close()
    r = HistoryReader(db_path)
    with pytest.raises(HistoryError, match="cannot read the history"):
        r.series(T0, T0 + 600)
    r.close()
