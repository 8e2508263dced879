"""The daemon's own runtime files, found without the policy: the single-instance lock and the
snapshot of original limits, in ``$RUNTIME_DIRECTORY`` (systemd's ``RuntimeDirectory=``, set
for every Exec line of the unit, ExecStopPost included) or ``/run/drfgov``.

Nothing here is writable or lockable by other users: the lock and the snapshot are 0600 and
root's; a local user who could ``flock`` a file of ours could stop the daemon (the SQLite
history had that hole).

* :class:`InstanceLock` — one ``drfgov run`` at a time (``flock(2)`` on ``drfgov.lock``, which
  holds the pid); ``drfgov restore`` asks it before touching limits.
* :func:`remove_stale_temporaries` — a SIGKILL during an atomic write leaves
  ``.NAME.XXXXXXXX`` beside its target; the next start (holding the lock) removes them.

And two settings of the process itself: :func:`raise_descriptor_limit`, and
:class:`GarbageCollection`, the loop's collection schedule.
"""

from __future__ import annotations

import fcntl
import gc
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["GarbageCollection", "InstanceLock", "LockHeld", "default_runtime_dir", "raise_descriptor_limit",
           "remove_stale_temporaries"]

DEFAULT_RUNTIME_DIR = Path("/run/drfgov")


def default_runtime_dir() -> Path:
    """``$RUNTIME_DIRECTORY`` (its first entry) when systemd set it, else ``/run/drfgov``."""
    env = os.environ.get("RUNTIME_DIRECTORY", "").split(":")[0]
    return Path(env) if env else DEFAULT_RUNTIME_DIR


class LockHeld(Exception):
    """Another ``drfgov run`` holds the lock; the message names its pid and the lock file."""


class InstanceLock:
    """An exclusive ``flock`` on ``DIR/drfgov.lock`` (mode 0600, created with DIR 0755), held
    until :meth:`release` or the process ends (the kernel drops it on any exit, SIGKILL too)."""

    def __init__(self, runtime_dir: Path):
        self.path = Path(runtime_dir) / "drfgov.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock now, or raise.

        Raises:
            LockHeld: another process holds it.
            OSError: the directory or file cannot be created.
        """
        self.path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise LockHeld(f"another drfgov run (pid {holder}) holds {self.path}: stop it first "
                           "(systemctl stop drfgov)") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid only names the holder in messages; the flock is the lock (a full /run must not stop us)
        self._fd = fd

    def holder(self) -> str | None:
        """The pid of the process holding the lock, or None when nobody does (it is not taken)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        finally:
            os.close(fd)
        return None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def remove_stale_temporaries(*targets: Path) -> list[Path]:
    """Remove the temporary files :func:`governor.service.atomic.write_atomic` leaves beside
    each target when killed mid-write (``.NAME.`` + 8 random characters). Call only while
    holding the instance lock. Returns what was removed."""
    removed = []
    for target in targets:
        prefix = f".{target.name}."
        try:
            entries = list(target.parent.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith(prefix) and len(entry.name) == len(prefix) + 8 and entry.is_file():
                entry.unlink(missing_ok=True)
                removed.append(entry)
    return removed


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard one (systemd starts services at 1,024 soft;
    the unit's LimitNOFILE sets the hard). Returns (soft, hard) in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft, hard


#: Seconds between the daemon's full garbage collections. A tick's objects hold no reference
#: cycles — a full collection right after a tick finds nothing, at 1,000 users and at 10,000 —
#: so reference counting frees them all; CPython's automatic collections, set off by allocation
#: counts (tens of them a tick at 10,000 users, the older generations' walking every user's
#: state), were pure cost: 22% of a tick at 10,000 users even at 50,000 allocations between
#: young collections (``benchmarks/bench_daemon.py``, issue 16). So the loop turns them off while
#: it runs and collects fully once this long has passed, between ticks, for what cycles a library
#: or an error path leaves (``bench_daemon.py``'s figure, 2-core machine: 18–22 ms at 1,000 users,
#: 360 ms at 10,000 — 0.6% of a core).
GC_EVERY_S = 60.0


class GarbageCollection:
    """The loop's garbage collection: none automatic between :meth:`pause` and :meth:`resume`,
    a full one from :meth:`collect_if_due` between ticks every :data:`GC_EVERY_S` (``clock``:
    monotonic seconds)."""

    def __init__(self, clock: Callable[[], float], every_s: float = GC_EVERY_S):
        self.clock, self.every_s = clock, every_s
        self.due_s = clock() + every_s
        self._was_enabled = False

    def pause(self) -> None:
        """Automatic collections off (until :meth:`resume`)."""
        self._was_enabled = gc.isenabled()
        gc.disable()

    def resume(self) -> None:
        """Automatic collections as they were before :meth:`pause`."""
        if self._was_enabled:
            gc.enable()

    def collect_if_due(self) -> int | None:
        """A full collection when one is due: the unreachable objects it found, or None."""
        now = self.clock()
        if now < self.due_s:
            return None
        self.due_s = now + self.every_s
        return gc.collect()
