"""The history's file removed, moved away or replaced while the daemon writes it (the audit's
defect: the open connection went on writing into the unlinked inode, forever and silently, and
a FIFO, symlink or directory planted there was never noticed). Each record compares the path
with the file open (one lstat) and, when they differ, opens the history again as at start:
a new file where it was removed, a planted one refused with the start's error, its target
never touched."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import stat
import threading

import pytest

from governor.service.history import History, HistoryReader
from governor.service.ownfiles import ForeignFile
from tests.unit.test_history import T0, db_path, doc, open_history, user  # noqa: F401 - db_path: the fixture

FILES = ("history.db", "history.db-wal", "history.db-shm")


def _remove_files(db_path):
    for name in FILES:
        (db_path.parent / name).unlink()


def _deleted_but_open(db_path) -> list[str]:
    """This process's descriptors on history files that are no longer linked (space not given back)."""
    fds = "/proc/self/fd"
    held = []
    for fd in os.listdir(fds):
        try:
            target = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        if target.startswith(str(db_path)) and target.endswith(" (deleted)"):
            held.append(target)
    return held


def _moved_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "drfgov" and r.levelno >= logging.WARNING]


def test_a_removed_history_is_made_again_at_its_path_with_the_next_rows(db_path, caplog):
    h = open_history(db_path)
    for k in range(3):
        assert h.record(doc(T0 + 60 * k, user(1000, name="alice"), user(1001)))
    _remove_files(db_path)  # an admin freeing the space
    caplog.clear()
    for k in range(3, 6):
        assert h.record(doc(T0 + 60 * k, user(1000, name="alice"), user(1001)))
    assert db_path.is_file()
    assert _deleted_but_open(db_path) == []  # the old file closed: its space is back
    for name in FILES:
        assert stat.S_IMODE((db_path.parent / name).stat().st_mode) == 0o600, name
    warnings = _moved_warnings(caplog)
    assert len(warnings) == 1 and "removed or replaced" in warnings[0] and "a new, empty history" in warnings[0]
    h.close()
    r = HistoryReader(db_path)
    got = r.series(T0, T0 + 600)
    assert list(got[1000].t) == [T0 + 180, T0 + 240, T0 + 300]  # the old rows went with the old file
    # names, weights and limits are written again into the new file, not assumed from the old one
    assert r.names() == {1000: "alice", 1001: "u1001"}
    assert r.limits(T0, T0 + 600, 1000) == [(T0 + 180, 1000, {"cpu.max": "max 100000", "cpu.weight": 200})]
    r.close()


def test_a_history_moved_away_is_complete_there_and_leaves_no_wal_at_the_path(db_path):
    h = open_history(db_path)
    for k in range(3):
        assert h.record(doc(T0 + 60 * k, user()))
    assert (db_path.parent / "history.db-wal").stat().st_size > 0  # rows not yet checkpointed
    moved = db_path.with_name("archive.db")
    os.rename(db_path, moved)  # its -wal and -shm stay at the path
    assert h.record(doc(T0 + 180, user()))
    h.close()
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["archive.db", "history.db"]
    assert list(HistoryReader(db_path).series(T0, T0 + 600)[1000].t) == [T0 + 180]
    assert list(HistoryReader(moved).series(T0, T0 + 600)[1000].t) == [T0, T0 + 60, T0 + 120]


def test_a_start_after_a_move_and_a_sigkill_takes_none_of_the_wal_left_at_the_path(db_path):
    """Moved away, then the daemon killed before its next record: the old file's -wal and -shm,
    full of its uncheckpointed rows, stay at the path. The next start makes a new history there
    that takes none of them (SQLite's WAL salts belong to the old file), whole and readable."""
    import signal
    import subprocess
    import sys

    moved = db_path.with_name("archive.db")
    child = (f"import os, signal; from tests.unit.test_history import open_history, doc, user, T0\n"
             f"from pathlib import Path\n"
             f"h = open_history(Path({str(db_path)!r}))\n"
             f"for k in range(3): assert h.record(doc(T0 + 60 * k, user()))\n"
             f"os.rename({str(db_path)!r}, {str(moved)!r})\n"
             f"os.kill(os.getpid(), signal.SIGKILL)\n")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=60, cwd=repo)
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert (db_path.parent / "history.db-wal").stat().st_size > 0 and not db_path.exists()  # left at the path
    h = open_history(db_path)
    assert h.record(doc(T0 + 3600, user(1001)))
    h.close()
    r = HistoryReader(db_path)
    got = r.series(T0 - 3600, T0 + 7200)
    assert sorted(got) == [1001] and list(got[1001].t) == [T0 + 3600]
    assert r.db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    r.close()


def _written_past_a_reader(db_path):
    """A history with a reader's snapshot held after its first row, then 39 rows more: pages
    its checkpoint cannot take past the reader. Returns (history, reader)."""
    h = open_history(db_path)
    assert h.record(doc(T0, user()))
    reader = sqlite3.connect(db_path, isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM samples").fetchone() == (1,)  # a snapshot held
    for k in range(1, 40):
        assert h.record(doc(T0 + 60 * k, user(1000 + k)))
    return h, reader


def test_a_history_moved_away_while_read_is_written_on_until_its_rows_can_be_put_in(db_path, caplog):
    """Moved away while a reader (drfgov history, a backup) holds a snapshot of it: the
    checkpoint cannot take the -wal's pages past the reader, and that -wal is still at the path.
    Closed then, and its -wal removed, it lost its newest rows (25 users of 40) or was left
    torn, "malformed" (the review of 2026-11-27). It is written on, said once, and released at
    the first record after the reader lets go: complete, readable, no -wal left at the path."""
    h, reader = _written_past_a_reader(db_path)
    moved = db_path.with_name("archive.db")
    os.rename(db_path, moved)
    caplog.clear()
    for k in range(40, 43):
        assert h.record(doc(T0 + 60 * k, user(1000 + k)))  # written on into the moved file
    assert len(_moved_warnings(caplog)) == 1 and "cannot be put into it yet" in _moved_warnings(caplog)[0]
    assert not db_path.exists()
    reader.rollback()
    reader.close()
    assert h.record(doc(T0 + 60 * 43, user(1043)))  # released now, and a new history at the path
    h.close()
    assert sorted(p.name for p in db_path.parent.iterdir()) == ["archive.db", "history.db"]
    archive = HistoryReader(moved)
    assert archive.db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert sorted(archive.series(T0, T0 + 7200)) == list(range(1000, 1043))
    archive.close()
    assert sorted(HistoryReader(db_path).series(T0, T0 + 7200)) == [1043]


def test_a_worker_connection_closed_while_interrupted_fails_no_record(db_path, monkeypatch):
    """The worker may close its connection between being looked up and interrupted: that
    interrupt raised ProgrammingError out of the record, and left the run marked abandoned
    (the review of 2026-11-27)."""
    h = open_history(db_path)
    assert h.record(doc(T0, user()))

    class Closed:
        def interrupt(self):
            raise sqlite3.ProgrammingError("Cannot operate on a closed database.")

    calls = []

    def wait(timeout):  # the worker's run ends as the interrupt is tried
        calls.append(timeout)
        h._busy = False

    h._busy, h._worker_db = True, Closed()
    monkeypatch.setattr(h, "_thread", threading.current_thread())
    monkeypatch.setattr(h._jobs, "wait", wait)
    _remove_files(db_path)
    assert h.record(doc(T0 + 60, user()))
    assert calls and not h._abandon
    monkeypatch.undo()
    h._worker_db = None
    h.close()


def test_a_history_put_back_at_the_path_is_recorded_into(tmp_path, db_path, caplog):
    backup = tmp_path / "backup" / "history.db"
    b = open_history(backup)
    b.record(doc(T0 - 3600, user()))
    b.close()
    h = open_history(db_path)
    for k in range(3):
        assert h.record(doc(T0 + 60 * k, user()))
    os.replace(backup, db_path)  # an admin restores a copy (the old -wal still next to it)
    caplog.clear()
    assert h.record(doc(T0 + 180, user()))
    assert "the drfgov history found there" in _moved_warnings(caplog)[0]
    h.close()
    r = HistoryReader(db_path)
    assert list(r.series(T0 - 3600, T0 + 600)[1000].t) == [T0 - 3600, T0 + 180]  # none of the old -wal's pages
    r.close()


def test_a_symlink_in_its_place_is_refused_until_removed_and_its_target_never_touched(tmp_path, db_path, caplog):
    elsewhere = tmp_path / "elsewhere"
    target = elsewhere / "history.db"  # a drfgov history: what a link followed would take for ours
    t = open_history(target)
    t.record(doc(T0 - 3600, user(7)))
    t.close()
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns, stat.S_IMODE(p.stat().st_mode))
              for p in elsewhere.iterdir()}
    h = History(db_path, 14, 60)  # the daemon's way: maintenance in the background, which must not follow it either
    for k in range(3):
        assert h.record(doc(T0 + 60 * k, user()))
    h.settle(10)
    _remove_files(db_path)
    os.symlink(target, db_path)
    with pytest.raises(ForeignFile) as at_start:
        History(db_path, 14, 60, background=False)
    assert "a symlink to" in str(at_start.value)
    caplog.clear()
    for k in range(3, 7):
        with pytest.raises(ForeignFile) as refused:
            h.record(doc(T0 + 60 * k, user()))
        assert str(refused.value) == str(at_start.value)  # as at start, each time it is due
        assert not h.wants(T0 + 60 * k + 1)  # tried when next due, not every tick meanwhile
    h._background_run(T0 + 7200)  # a maintenance run now finds no file of its own there
    with pytest.raises(FileNotFoundError):
        h.maintain(T0 + 7200)
    assert h.db is None and _deleted_but_open(db_path) == []
    warnings = _moved_warnings(caplog)
    assert len(warnings) == 1 and "removed or replaced" in warnings[0], warnings  # once, not every record
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns, stat.S_IMODE(p.stat().st_mode))
            for p in elsewhere.iterdir()} == before
    db_path.unlink()
    caplog.clear()
    assert h.record(doc(T0 + 420, user()))
    assert db_path.is_file() and not db_path.is_symlink()
    assert [m for m in _moved_warnings(caplog) if "recording to" in m and "again" in m]
    h.close()
    assert list(HistoryReader(db_path).series(T0, T0 + 600)[1000].t) == [T0 + 420]
    assert HistoryReader(target).names() == {7: "u7"}


@pytest.mark.parametrize("plant", ["fifo", "directory"])
def test_a_fifo_or_directory_in_its_place_is_refused_as_at_start_until_removed(db_path, plant):
    h = open_history(db_path)
    assert h.record(doc(T0, user()))
    _remove_files(db_path)
    if plant == "fifo":
        os.mkfifo(db_path, 0o600)
    else:
        db_path.mkdir(0o700)
    with pytest.raises(ForeignFile) as at_start:
        open_history(db_path)
    with pytest.raises(ForeignFile) as refused:  # and no hang on the FIFO
        h.record(doc(T0 + 60, user()))
    said = {"fifo": "(it is a FIFO)", "directory": "(it is a directory)"}[plant]
    assert str(refused.value) == str(at_start.value) and said in str(refused.value)
    if plant == "fifo":
        db_path.unlink()
    else:
        shutil.rmtree(db_path)
    assert h.record(doc(T0 + 120, user()))
    h.close()
    assert list(HistoryReader(db_path).series(T0, T0 + 600)[1000].t) == [T0 + 120]


def test_when_nothing_changed_a_record_costs_one_lstat_and_reopens_nothing(db_path, monkeypatch):
    h = open_history(db_path)
    assert h.record(doc(T0, user()))  # (the hour's maintenance ran with it)
    db = h.db
    seen = []
    real_lstat, real_stat = os.lstat, os.stat

    def counting(real, name):
        def call(path, *args, **kwargs):
            if str(os.fspath(path)).startswith(str(db_path.parent)):
                seen.append((name, os.fspath(path)))
            return real(path, *args, **kwargs)
        return call

    monkeypatch.setattr(os, "lstat", counting(real_lstat, "lstat"))
    monkeypatch.setattr(os, "stat", counting(real_stat, "stat"))
    monkeypatch.setattr(History, "_reopen", lambda self: pytest.fail("reopened"), raising=False)
    for k in range(1, 6):
        assert h.record(doc(T0 + 60 * k, user()))
    assert not h.record(doc(T0 + 301, user()))  # not due: not even the lstat
    assert seen == [("lstat", str(db_path))] * 5 and h.db is db
    monkeypatch.undo()
    h.close()


def test_maintenance_makes_no_file_at_a_removed_path_and_does_not_warn(db_path, caplog):
    """Its connection is its own, opened each run: by the path, SQLite would make an empty file
    there (with the process's umask) and maintenance would fail on it, warning each hour."""
    h = History(db_path, 14, 60)
    assert h.record(doc(T0, user()))
    h.settle(10)
    _remove_files(db_path)
    caplog.clear()
    h._background_run(T0 + 7200)
    with pytest.raises(FileNotFoundError, match="no longer the history being written"):
        h.maintain(T0 + 7200)
    assert list(db_path.parent.iterdir()) == []
    assert _moved_warnings(caplog) == []
    h.close()


def test_a_history_put_back_while_a_reader_holds_the_old_one_takes_none_of_its_wal(tmp_path, db_path):
    """The old file's checkpoint cannot finish while a reader (drfgov history) holds it: its
    -wal keeps pages, which a file put back at the path would take in as its own were that
    -wal left there."""
    backup = tmp_path / "backup" / "history.db"
    b = open_history(backup)
    b.record(doc(T0 - 3600, user()))
    b.close()
    h, reader = _written_past_a_reader(db_path)
    os.replace(backup, db_path)
    assert h.record(doc(T0 + 3600, user()))
    reader.rollback()
    reader.close()
    h.close()
    r = HistoryReader(db_path)
    got = r.series(T0 - 3600, T0 + 7200)
    assert sorted(got) == [1000] and list(got[1000].t) == [T0 - 3600, T0 + 3600]
    assert r.db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    r.close()


def test_a_maintenance_run_on_the_old_file_is_stopped_before_the_new_one_opens(db_path, caplog, monkeypatch):
    """The worker's run fills the ids' caches and has its own connection: it ends (interrupted,
    quietly) before the caches are read again from the new file."""
    h = History(db_path, 14, 60)
    started, statements = threading.Event(), []

    def endless(db, now):  # a long hour's maintenance (started once a statement has run)
        while True:
            statements.append(db.execute("SELECT count(*) FROM samples").fetchone())
            started.set()

    monkeypatch.setattr(h, "_maintain", endless)
    assert h.record(doc(T0, user()))
    assert started.wait(10)
    _remove_files(db_path)
    caplog.clear()
    assert h.record(doc(T0 + 60, user()))
    assert not h._busy and statements
    assert [m for m in _moved_warnings(caplog) if "maintenance failed" in m] == []
    monkeypatch.undo()
    h.close()
    assert list(HistoryReader(db_path).series(T0, T0 + 600)[1000].t) == [T0 + 60]
