"""A local user (uid 65534) opens and locks every file and directory the daemon owns while it
ticks: state.json and its directory, history.db with -wal and -shm and their directory, the
instance lock, originals.json and the runtime directory — flock(2) shared and exclusive, and
fcntl(2) read and write locks on the bytes SQLite locks (the database's lock bytes at 1 GiB,
-shm's lock slots from byte 120). The ticks go on."""

import errno
import fcntl
import json
import os
import signal
import struct
import time

from tests.faults.harness import (
    daemon_body, failed_ticks_in, limits_lost, make_world, record_figures, start_child, unlimited_users, wait_child,
)

NOBODY = 65534
TICKS_HELD = 20  # ticks that must complete while she holds every lock she could take


def owned_paths(world):
    h = world.history_dir / "history.db"
    return [world.state_path, world.state_dir, h, h.with_name("history.db-wal"), h.with_name("history.db-shm"),
            world.history_dir, world.runtime_dir / "drfgov.lock", world.snapshot, world.runtime_dir]


def lock_everything(paths, report, state_path, ticks):
    """As uid 65534: open each path, take every lock it can, hold them until state.json shows
    ``ticks`` more ticks (at most a minute); writes {path: [what succeeded]} and the ticks seen
    to ``report``."""
    def body():
        out = open(report, "w")  # noqa: SIM115 - opened as root, written as her
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        got, fds = {}, []
        for path in paths:
            got[str(path)] = done = []
            for flags in (os.O_RDWR, os.O_RDONLY):
                try:
                    fd = os.open(path, flags | os.O_NOFOLLOW)
                except OSError as exc:
                    done.append(f"open {errno.errorcode[exc.errno]}")
                    continue
                fds.append(fd)
                done.append("open rw" if flags == os.O_RDWR else "open ro")
                for name, op in (("flock ex", fcntl.LOCK_EX), ("flock sh", fcntl.LOCK_SH)):
                    try:
                        fcntl.flock(fd, op | fcntl.LOCK_NB)
                        done.append(name)
                        break
                    except OSError:
                        pass
                for start in (120, 1 << 30, 0):  # -shm's lock slots, the database's lock page, byte 0
                    for kind, name in ((fcntl.F_WRLCK, "wrlck"), (fcntl.F_RDLCK, "rdlck")):
                        try:
                            fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack("hhqqi", kind, 0, start, 512, 0))
                            done.append(f"{name}@{start}")
                            break
                        except OSError:
                            pass
                break
        tick = lambda: json.loads(state_path.read_text())["tick"]  # noqa: E731
        first, end = tick(), time.monotonic() + 60
        while tick() < first + ticks and time.monotonic() < end:
            time.sleep(0.01)
        out.write(json.dumps({"got": got, "ticks": tick() - first}))
        out.close()
        return 0
    return body


def test_a_local_user_locking_every_file_of_the_daemon(base):
    world = make_world(base, 3, pace_s=0.01)
    pid = start_child(base, daemon_body(world, None), "locked")
    try:
        end = time.monotonic() + 60
        while not (world.snapshot.exists() and (world.history_dir / "history.db-shm").exists()
                   and world.state_path.exists()):
            assert time.monotonic() < end
            time.sleep(0.02)
        report = base / "locker.json"
        locker = lock_everything(owned_paths(world), report, world.state_path, TICKS_HELD)
        assert wait_child(start_child(base, locker, "locker")) == 0
        unlimited = unlimited_users(world.host)
    finally:
        os.kill(pid, signal.SIGTERM)
        status = wait_child(pid)
    found = json.loads(report.read_text())
    got, during = found["got"], found["ticks"]
    locked = {p: what for p, what in got.items() if any(w.startswith(("flock", "wrlck", "rdlck")) for w in what)}
    log = (base / "locked.log").read_text()
    lost, missed = limits_lost(world.host), failed_ticks_in(base, "locked")
    record_figures("local_user_locks", "uid 65534 locking every file the daemon owns", len(got), len(lost), missed, 0,
                   "lockable by her: " + (", ".join(sorted(os.path.basename(p) or p for p in locked)) or "none"))
    assert status == 0 and missed == 0 and not lost and not unlimited, log
    assert during >= TICKS_HELD, f"only {during} ticks in a minute of locks"
    history_files = {str(p) for p in owned_paths(world)[2:6]}
    assert not history_files & set(locked), locked  # SQLite's files are root's alone
    assert all(w.startswith("open E") for p in history_files for w in got[p][:1] if p != str(world.history_dir)), got
