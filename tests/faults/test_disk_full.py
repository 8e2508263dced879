"""Disk full for state, history and the snapshot: a small tmpfs holding the state directory,
the history directory and the runtime directory (as /run/drfgov holds state.json and
originals.json), filled while the daemon runs, then freed."""

import errno
import json
import os
import subprocess

import pytest

from tests.faults.harness import (
    FIRST_UID, daemon_body, failed_ticks_in, limits_lost, make_world, record_figures, run_child,
)

NEWCOMER = FIRST_UID + 3


def fill(directory):
    """Fill the small disk. Unbuffered: a buffered file kept the tail of its last, partial write
    and raised ENOSPC again when the ``with`` closed it, failing the tick that ran the harness
    (whenever the free space was not a multiple of the block written)."""
    with open(directory / "filler", "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    free = os.statvfs(directory)
    assert free.f_bavail * free.f_frsize < 65536, "the small disk is not full"


@pytest.fixture
def small_disk(base):
    disk = base / "small"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0755", "drfgov-full", str(disk)], check=True)
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def on_small_disk(world, disk):
    world.state_dir, world.history_dir, world.runtime_dir = disk / "state", disk / "lib", disk / "run"
    world.write_policy()
    return world


def test_disk_full_while_running(base, small_disk):
    world = on_small_disk(make_world(base, 3), small_disk)
    world.pace_s = 0.1  # ticks a reader's pace apart: the daemon sees her opens (in 50 ms batches)

    def schedule(w):
        if w.state_path.exists():  # someone reads state.json each tick (drfgov top): it is written each tick
            w.state_path.read_bytes()
        if w.discoveries == 4:
            fill(small_disk)
        elif w.discoveries == 6:
            w.host.log_in(NEWCOMER)  # a user arrives while her original limits cannot be saved
        elif w.discoveries == 10:
            (small_disk / "filler").unlink()
    world.before_discovery = schedule
    status = run_child(base, daemon_body(world, 14), "full")
    log = (base / "full.log").read_text()
    state = json.loads(world.state_path.read_text())
    lost = limits_lost(world.host)
    record_figures("disk_full", "disk full (state, history, snapshot) for 6 ticks while running", 1, len(lost),
                   failed_ticks_in(base, "full"), 0,
                   "a user arriving meanwhile is limited once her originals can be saved")
    assert status == 0 and failed_ticks_in(base, "full") == 0 and not lost, log
    # each failure logged when it starts, not every tick (history's WAL may reuse its pages: no failure)
    assert log.count("state not written") == 1 and log.count("history not written") <= 1, log
    assert "state written again" in log and log.count("snapshot not saved") == 1
    assert state["tick"] == 15 and all(u["limits"]["cpu.max"] != "max 100000" for u in state["users"])
    assert NEWCOMER in {u["uid"] for u in state["users"]}


def test_disk_full_at_start(base, small_disk):
    """Started (or restarted by systemd) while the disk is full: it runs, writes no limit it
    cannot snapshot, and once space is back saves, limits and records as usual."""
    world = on_small_disk(make_world(base, 3), small_disk)
    world.runtime_dir.mkdir()
    fill(small_disk)

    def schedule(w):
        if w.discoveries == 4:
            (small_disk / "filler").unlink()
    world.before_discovery = schedule
    status = run_child(base, daemon_body(world, 8), "full-start")
    log = (base / "full-start.log").read_text()
    state = json.loads(world.state_path.read_text()) if world.state_path.exists() else {}
    lost = limits_lost(world.host)
    missed = failed_ticks_in(base, "full-start") + (0 if status == 0 else 8 - state.get("tick", 0))
    record_figures("disk_full_start", "disk full (state, history, snapshot, lock) when the daemon starts", 1,
                   len(lost), missed, 0, "no limit is written until its original can be saved")
    assert status == 0 and missed == 0 and not lost, log
    assert state["tick"] == 9 and all(u["limits"]["cpu.max"] != "max 100000" for u in state["users"])
    assert (world.history_dir / "history.db").exists() and "history written again" in log


def test_a_snapshot_that_cannot_be_removed_at_stop_fails_the_stop_not_run(base, monkeypatch, caplog):
    """Every limit back but the snapshot not removable (the runtime directory gone read-only):
    its OSError raised out of run() — the metrics textfile, the history, the state.json watch and
    the lock left as they were, and a traceback for an exit (the service audit of 2026-11-27).
    The stop finishes and exits 1, saying what to remove: left, the next start would restore it
    over whatever limits were set meanwhile."""
    import logging
    import pathlib

    caplog.set_level(logging.INFO)
    textfile = base / "prom" / "drfgov.prom"
    world = make_world(base, 2, stop_after=3, policy_extra=f"metrics: {{textfile: {textfile}}}\n")
    d = world.daemon()
    unlink = pathlib.Path.unlink

    def read_only_snapshot(self, *args, **kwargs):
        if self.name == "originals.json":
            raise OSError(errno.EROFS, "Read-only file system", str(self))
        return unlink(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "unlink", read_only_snapshot)
    monkeypatch.setattr("os.kill", lambda pid, sig: d.request_stop())  # the stepping monitor's SIGTERM
    assert d.run() == 1
    assert "snapshot" in caplog.text and "could not be removed (Read-only file system)" in caplog.text
    assert not textfile.exists() and d.lock.holder() is None  # the rest of the stop was done
    assert limits_lost(world.host) == []
