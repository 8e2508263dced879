"""The daemon loop's wake-up: a self-pipe that a signal handler, another thread (a reader of
state.json opening it) or the loop itself can set, and the loop waits on between ticks.

Why not :class:`threading.Event`: its ``set()`` takes a lock, and a signal handler runs on
the main thread between two bytecodes — also while the main thread holds that same lock inside
``wait()`` or ``clear()``. The handler then blocks on a lock its own thread holds (a deadlock)
or, under a flood of signals, nests until RecursionError, and the loop died without restoring
anyone's limits (the lifecycle audit of 2026-11-26: a SIGHUP flood left the governor's
cpu.max on every slice). A pipe's ``write(2)`` takes no lock of Python's and never blocks here
(non-blocking; a full pipe already says "awake").
"""

from __future__ import annotations

import os
import select
import weakref

__all__ = ["Wake"]


class Wake:
    """A flag that wakes :meth:`wait`: :meth:`set` from anywhere (a signal handler included),
    :meth:`wait` and :meth:`clear` from the loop. Holds two descriptors until :meth:`close`."""

    def __init__(self):
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._poll = select.poll()  # not select(): a descriptor past 1023 (the daemon raises its limit)
        self._poll.register(self._read_fd, select.POLLIN)
        # closed with the object, never before: a late set() must not write to a number reused
        self._close = weakref.finalize(self, _close, self._read_fd, self._write_fd)

    def set(self) -> None:
        try:
            os.write(self._write_fd, b"!")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups: set already

    def is_set(self) -> bool:
        return bool(self._poll.poll(0))

    def wait(self, timeout_s: float | None = None) -> bool:
        """Until set or ``timeout_s`` seconds have passed (None: until set); whether it is set."""
        return bool(self._poll.poll(None if timeout_s is None else max(0, int(timeout_s * 1000 + 0.999))))

    def clear(self) -> None:
        try:
            while os.read(self._read_fd, 4096):
                pass
        except BlockingIOError:
            pass

    def close(self) -> None:
        """Close both descriptors (once nothing can set it any more)."""
        self._close()


def _close(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
