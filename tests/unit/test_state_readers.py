"""state.json written for its readers (issue 16): every tick while someone opens it, at once
for a reader who opens it stale, every IDLE_EVERY_S otherwise, the last tick at stop; and the
readers' side, read_state waiting for that replacement. inotify is the host kernel's, real."""

import json
import os
import threading
import time

import pytest

from governor.service.state import IDLE_EVERY_S, read_state, state_document, write_state
from governor.service.statereaders import READ_WINDOW_S, StateReaders
from tests.unit.test_daemon import world  # noqa: F401 - the fixture


def key(path):
    """What changes when the daemon replaces ``path`` (inode numbers alone are reused)."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def wait_for(predicate, timeout_s=5.0):
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "never happened"
        time.sleep(0.01)


def test_an_open_of_state_json_is_seen_and_others_are_not(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("")  # empty: the state writer replaces nothing but a state document or an empty file
    (tmp_path / "other.json").write_text("{}")
    woken = threading.Event()
    readers = StateReaders(path, time.monotonic, woken.set)
    assert readers.start() and readers.watching
    try:
        assert not readers.watched()
        write_state(path, {"version": 1, "users": []})  # the daemon's own write: a temporary, renamed
        (tmp_path / "other.json").read_text()
        os.stat(path)  # a stat is no read
        time.sleep(0.5)
        assert not woken.is_set() and not readers.take_request() and not readers.watched()
        path.read_text()
        assert woken.wait(5)
        assert readers.take_request() and readers.watched()
        assert not readers.take_request()  # taken once
    finally:
        readers.close()


def test_without_a_watch_state_is_written_every_tick(tmp_path, caplog):
    readers = StateReaders(tmp_path / "missing" / "state.json", time.monotonic, lambda: None)
    assert not readers.start()
    assert readers.watched()
    assert "written every tick" in caplog.text


def ticks_until(d, clock, seconds):
    for _ in range(int(seconds)):
        clock[0] += 1.0
        d.tick()


@pytest.fixture
def watched(world):  # noqa: F811
    """A daemon on a fake clock with its outputs open (its readers watched); stopped after."""
    _, config, daemon, _, tmp = world
    clock = [0.0]
    d = daemon(clock=lambda: clock[0])
    d._open_outputs()
    yield d, clock, config, tmp
    d._stop()


def test_the_daemons_own_writes_are_no_reader(watched):
    """Before replacing state.json the writer reads its first bytes (a drfgov state document is
    all it replaces), and that open(2) is what the watch takes for a reader: from its first idle
    write on, an unread state.json was written every tick, forever (the service audit of
    2026-11-27). The file the daemon wrote last is not read again: unread, it is written every
    IDLE_EVERY_S. The watcher is given the time to see each tick's opens, as a real second would."""
    d, clock, _, tmp = watched
    writes = []
    write = d._write_state
    d._write_state = lambda: (writes.append(d.ticks), write())
    for _ in range(3 * int(IDLE_EVERY_S) + 2):
        clock[0] += 1.0
        d.tick()
        d._answer_reader()
        time.sleep(0.1)
    # the first write reads what was there (nothing, or an older run's file): one reader's worth
    assert writes[:1] == [1] and writes[-3:] == [11, 21, 31] and len(writes) <= 4, writes


def test_the_daemon_writes_state_for_its_readers_only(watched):
    d, clock, _, tmp = watched
    path = tmp / "run" / "state.json"
    assert d.readers is not None and d.readers.watching
    d.tick()
    first = key(path)
    assert json.loads(path.read_bytes())["tick"] == 1
    wait_for(lambda: d.readers.requested)  # the test's own open, seen
    d.readers.take_request()
    d.readers.last_open_s = float("-inf")  # as if nobody had read it
    ticks_until(d, clock, IDLE_EVERY_S - 2)
    assert key(path) == first  # nobody read it: not rewritten
    ticks_until(d, clock, 2)
    assert key(path) != first  # IDLE_EVERY_S later it is
    idle = key(path)

    ticks_until(d, clock, 1)
    assert key(path) == idle
    d.wake.clear()
    wait_for(lambda: d.readers.armed)
    with open(path) as f:  # a reader finds it a tick old: the daemon, woken, writes the latest
        assert json.load(f)["tick"] == d.ticks - 1
    wait_for(lambda: d.wake.is_set())
    d._answer_reader()
    wait_for(lambda: d.readers.armed)
    assert read_state(path, fresh=False)["tick"] == d.ticks
    wait_for(lambda: d.readers.requested)  # that read was an open too
    for _ in range(5):  # being read, it is written every tick
        before = key(path)
        ticks_until(d, clock, 1)
        assert key(path) != before
    clock[0] += READ_WINDOW_S
    d.readers.take_request()
    ticks_until(d, clock, 1)
    quiet = key(path)
    ticks_until(d, clock, 1)
    assert key(path) == quiet  # not read for a minute: idle again


def test_the_file_left_at_stop_is_the_last_ticks(world):  # noqa: F811
    _, _, daemon, _, tmp = world
    d = daemon(interval_s=0.05)
    stopper = threading.Timer(1.0, d.request_stop)
    stopper.start()
    assert d.run() == 0
    stopper.join()
    doc = read_state(tmp / "run" / "state.json", fresh=False)
    assert doc["tick"] == d.ticks > 5 and doc == d.last_document


def test_history_gets_a_document_only_when_it_records(world, monkeypatch):  # noqa: F811
    _, config, daemon, _, tmp = world
    config.write_text(config.read_text().replace("every_s: 0", "every_s: 60"))
    built = []
    real = state_document
    monkeypatch.setattr("governor.service.daemon.state_document", lambda *a, **kw: built.append(1) or real(*a, **kw))
    clock = [0.0]
    d = daemon(clock=lambda: clock[0])
    d._open_outputs()
    try:
        d.tick()  # the first: state.json and history both, each its own document, built as it is read
        d.readers.last_open_s = float("-inf")
        d.readers.take_request()
        assert len(built) == 2
        for _ in range(5):
            clock[0] += 1.0
            d.tick()
        assert len(built) == 2  # nothing wanted a document: none was built
    finally:
        d._stop()


def doc_at(time_unix_s, tick, interval_s=0.2):
    return {"version": 1, "time_unix_s": time_unix_s, "tick": tick, "interval_s": interval_s, "users": []}


def test_read_state_waits_for_the_daemon_to_replace_a_stale_document(tmp_path):
    path = tmp_path / "state.json"
    write_state(path, doc_at(time.time() - 5, 1))
    timer = threading.Timer(0.3, lambda: write_state(path, doc_at(time.time(), 2)))
    timer.start()
    started = time.monotonic()
    assert read_state(path)["tick"] == 2
    assert time.monotonic() - started >= 0.25
    timer.join()
    assert read_state(path, fresh=False)["tick"] == 2


def test_read_state_gives_a_stale_document_when_nobody_replaces_it(tmp_path):
    path = tmp_path / "state.json"
    write_state(path, doc_at(time.time() - 5, 7))  # stale, but young enough for a daemon writing every 10 s
    started = time.monotonic()
    assert read_state(path)["tick"] == 7
    assert 1.3 <= time.monotonic() - started < 5  # 2 × interval_s + 1
    write_state(path, doc_at(time.time(), 8))
    started = time.monotonic()
    assert read_state(path)["tick"] == 8 and time.monotonic() - started < 0.5  # fresh: no wait


def test_read_state_does_not_wait_on_a_stopped_daemon(tmp_path):
    path = tmp_path / "state.json"
    write_state(path, doc_at(time.time() - 60, 3))  # no writing daemon leaves a file this old
    started = time.monotonic()
    assert read_state(path)["tick"] == 3 and time.monotonic() - started < 0.5


def test_a_flood_of_opens_wakes_the_loop_once_a_request(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("{}")
    wakes = []
    readers = StateReaders(path, time.monotonic, lambda: wakes.append(1))
    assert readers.start()
    try:
        for _ in range(5):  # bursts the watcher reads apart
            for _ in range(400):
                with open(path):
                    pass
            time.sleep(0.15)
        wait_for(lambda: readers.requested)
        assert len(wakes) == 1  # not taken yet: no more wake-ups (nor events: the watch is off)
        assert not readers.armed
        assert readers.take_request()
        wait_for(lambda: readers.armed)  # the watch is back once the loop took the request
        with open(path):
            pass
        wait_for(lambda: len(wakes) == 2)
    finally:
        readers.close()


def test_a_removed_directory_ends_the_watch_and_state_goes_on_every_tick(tmp_path, caplog):
    directory = tmp_path / "run"
    directory.mkdir()
    readers = StateReaders(directory / "state.json", time.monotonic, lambda: None)
    assert readers.start()
    try:
        readers.last_open_s = float("-inf")
        assert not readers.watched()
        directory.rmdir()
        wait_for(lambda: not readers.watching)
        assert readers.watched() and "watching its readers failed" in caplog.text
    finally:
        readers.close()


def test_a_name_orjson_refuses_is_written_by_the_standard_encoder(tmp_path):
    path = tmp_path / "state.json"
    name = b"caf\xe9".decode(errors="surrogateescape")  # a passwd name that is not UTF-8
    write_state(path, {**doc_at(1.0, 1), "users": [{"name": name, "big": 2**70}]})
    assert json.loads(path.read_text())["users"] == [{"name": name, "big": 2**70}]


def test_an_output_that_raises_anything_fails_neither_the_tick_nor_the_loop(world, monkeypatch, caplog):  # noqa: F811
    _, _, daemon, _, _ = world
    d = daemon()

    def broken(*_args):
        raise TypeError("a bug in the encoder")
    monkeypatch.setattr("governor.service.daemon.write_state", broken)
    for _ in range(3):
        assert d._guarded_tick() is not None
    assert d.failed_ticks == 0
    assert caplog.text.count("state not written") == 1 and "a bug in the encoder" in caplog.text


def test_a_reload_that_moves_state_path_writes_and_watches_the_new_file(watched):
    d, clock, config, tmp = watched
    d.tick()
    d.readers.last_open_s = float("-inf")
    d.readers.take_request()
    config.write_text(config.read_text().replace(f"{tmp}/run/state.json", f"{tmp}/moved/state.json"))
    d.reload()
    clock[0] += 1.0
    d.tick()
    moved = tmp / "moved" / "state.json"
    assert read_state(moved, fresh=False)["tick"] == 2  # at once, not 10 s later
    assert d.readers.watching
    moved.read_bytes()
    wait_for(lambda: d.readers.requested)


def test_a_reader_between_ticks_gets_the_latest_tick_before_the_next(world):  # noqa: F811
    """The daemon's own loop (interval 2 s, real clock): nobody reads until tick 2 is done; the
    file then holds tick 1 (not due for 10 s). An open has the loop write tick 2 at once —
    well before tick 3."""
    _, config, daemon, _, tmp = world
    config.write_text(config.read_text().replace("interval_s: 1", "interval_s: 2"))
    d = daemon()
    runner = threading.Thread(target=d.run)
    runner.start()
    path = tmp / "run" / "state.json"
    try:
        wait_for(lambda: path.exists() and d.ticks >= 1, 20)  # exists() is a stat, not an open
        wait_for(lambda: d.ticks >= 2, 20)
        before = key(path)
        with open(path) as f:
            assert json.load(f)["tick"] == 1
        wait_for(lambda: key(path) != before, 1.5)
        assert d.ticks == 2 and read_state(path, fresh=False)["tick"] == 2
    finally:
        d.request_stop()
        runner.join(30)


def test_a_request_for_a_file_of_the_latest_tick_waits_for_the_next_tick(watched):
    d, clock, _, tmp = watched
    path = tmp / "run" / "state.json"
    d.tick()  # written: the first tick
    written = key(path)
    path.read_bytes()
    wait_for(lambda: d.readers.requested)
    d._answer_reader()
    assert d.readers.requested and key(path) == written  # nothing newer to write: kept for the tick
    clock[0] += 1.0
    d.tick()
    assert not d.readers.requested and key(path) != written


def test_a_failing_write_is_not_tried_again_at_every_open(world, monkeypatch):  # noqa: F811
    _, _, daemon, _, tmp = world
    attempts = []

    def full(*_args):
        attempts.append(1)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("governor.service.daemon.write_state", full)
    d = daemon()
    d._open_outputs()
    path = tmp / "run" / "state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")  # a reader's file from before the disk filled
    try:
        # this open seen before the tick takes it (seen after, under load, it left the watch
        # off until the next tick took it, and ``armed`` below never came)
        wait_for(lambda: d.readers.requested)
        d.tick()
        assert len(attempts) == 1
        wait_for(lambda: d.readers.armed)
        for _ in range(5):
            d.wake.clear()
            path.read_bytes()
            wait_for(lambda: d.readers.requested)
            d._answer_reader()
            d.readers.take_request()
            wait_for(lambda: d.readers.armed)
        assert len(attempts) == 1  # tried again when next due (the next tick), not per open
    finally:
        d._stop()


def test_a_document_that_cannot_be_built_at_stop_still_restores_every_limit(world, monkeypatch):  # noqa: F811
    host, _, daemon, _, _ = world
    originals = {uid: u.limits for uid, u in host.users.items()}
    d = daemon(interval_s=0.05)

    def broken(*_args, **_kw):
        raise TypeError("a bug in the document")
    stopper = threading.Timer(0.8, d.request_stop)
    stopper.start()
    monkeypatch.setattr("governor.service.daemon.state_document", broken)
    assert d.run() == 0
    stopper.join()
    assert d.failed_ticks == 0 and d.ticks > 3
    assert {uid: u.limits for uid, u in host.users.items()} == originals
    assert not d.snapshot_path.exists()


def test_a_flood_of_opens_of_its_directory_wakes_the_watcher_a_few_times_a_second(tmp_path):
    """``ls`` of state.json's directory raises IN_OPEN too, and leaves the watch in place: a
    local user opening the directory in a loop had the watcher read and parse every event, ~a
    core of the daemon's CPU (the safety audit of 2026-11-26). Now it reads at most twenty
    batches a second while she does; an open of state.json in the flood is still seen."""
    import subprocess
    import sys

    path = tmp_path / "state.json"
    path.write_text("{}")
    woken = threading.Event()
    readers = StateReaders(path, time.monotonic, woken.set)
    assert readers.start()
    reads, real = [], readers._inotify.read
    readers._inotify.read = lambda *a, **kw: (reads.append(1), real(*a, **kw))[1]
    flood = ("import os, time\nend = time.monotonic() + 2.0\nn = 0\nwhile time.monotonic() < end:\n"
             f"    os.close(os.open({str(tmp_path)!r}, os.O_RDONLY | os.O_DIRECTORY)); n += 1\nprint(n)")
    try:
        proc = subprocess.Popen([sys.executable, "-c", flood], stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        reads.clear()
        time.sleep(1.0)
        during = len(reads)
        path.read_text()  # a reader, in the flood
        wait_for(woken.is_set)
        proc.wait(timeout=10)
        assert int(proc.stdout.read()) > 1_000  # she did flood it (~10^6 opens in 2 s on a quiet machine)
        assert during <= 25, f"{during} reads of the inotify queue in a second of the flood"
    finally:
        readers.close()
