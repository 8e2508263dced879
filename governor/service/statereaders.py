"""Who reads state.json: the daemon writes it every tick only while someone does (issue 16).

Building and encoding the document is about a third of a tick's CPU (~38 µs of ~128 per user,
``benchmarks/bench_daemon.py``): at 10,000 users, 0.4 s a second for a file nobody may open.
So the daemon watches its directory with inotify (``IN_OPEN``, inotify(7)) — readers need no
write access and leave nothing behind: a reader's ``open(2)`` is the signal, so nothing here is
writable or lockable by other users — and writes state.json

* every tick while it has been opened within :data:`READ_WINDOW_S` (``drfgov shares --watch``,
  ``drfgov top``, a monitoring script polling it);
* at once, between ticks, when it is opened while older than the latest tick: the latest tick's
  document, so a reader that finds a stale file waits only for its building
  (:func:`governor.service.state.read_state` waits for the replacement);
* otherwise every :data:`governor.service.state.IDLE_EVERY_S`, and at the first tick and at stop.

A flood of opens by a local user costs what one open does: once an open is seen the watch is
removed — nothing more is queued or parsed, however fast she opens — until the loop takes the
request (at its next tick, or between ticks when it writes for her), so the watcher handles at
most one event a tick and wakes the loop at most once a tick. Opens of anything else in the
directory (the directory itself: ``ls``) raise ``IN_OPEN`` too and leave the watch in place, so
after a batch of those the watcher waits :data:`_OTHER_OPENS_PAUSE_S` before it reads again: the
kernel merges a flood of identical events queued meanwhile into one (inotify(7)), and the
watcher wakes at most twenty times a second whatever she does (the safety audit of 2026-11-26:
a directory opened in a loop by a local user cost the daemon ~a core). While someone keeps reading, the
watch that comes back sees her again at once, so :data:`READ_WINDOW_S` holds. Where inotify
cannot watch (no inotify, the watch limit reached, the directory removed or moved, the event
queue failing) :class:`StateReaders` says so once and the daemon writes every tick, as it used
to.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

__all__ = ["READ_WINDOW_S", "StateReaders"]

log = logging.getLogger("drfgov")

#: Seconds a reader's open keeps state.json written every tick.
READ_WINDOW_S = 60.0
#: The watcher thread's poll timeout (ms): how long :meth:`StateReaders.close` may wait for it.
_POLL_MS = 200
#: Seconds the watcher waits after a batch of opens of other files than state.json in its directory.
_OTHER_OPENS_PAUSE_S = 0.05


class StateReaders:
    """Opens of ``state_path`` seen by inotify on its directory. ``on_open`` is called from the
    watcher thread (set the daemon's wake-up event there); ``clock``: monotonic seconds."""

    def __init__(self, state_path: Path, clock: Callable[[], float], on_open: Callable[[], None]):
        self.path = Path(state_path)
        self.clock, self.on_open = clock, on_open
        self.last_open_s = float("-inf")
        self.requested = False  # an open since the loop last took one: the watcher sets it, the loop clears it
        self.watching = False
        self._stop = threading.Event()
        self._rearm = threading.Event()  # the loop took the request: watch again
        self._thread: threading.Thread | None = None
        self._inotify = None
        self._wd: int | None = None  # the directory's watch, None while a request is pending

    def start(self) -> bool:
        """Watch the directory (it must exist). Returns False, with a warning logged, where
        inotify cannot: then :meth:`watched` is always true."""
        try:
            from inotify_simple import INotify

            self._inotify = INotify()
            self._add_watch()
        except (OSError, ImportError) as exc:
            log.warning("state.json is written every tick: its readers cannot be watched (%s)", exc)
            if self._inotify is not None:
                self._inotify.close()
                self._inotify = None
            return False
        self.watching = True
        self._thread = threading.Thread(target=self._watch, name="drfgov-state-readers", daemon=True)
        self._thread.start()
        return True

    def watched(self) -> bool:
        """Whether state.json should be written this tick for a reader (always, unwatched)."""
        return not self.watching or self.clock() - self.last_open_s < READ_WINDOW_S

    @property
    def armed(self) -> bool:
        """Whether opens are watched right now (not while a request waits for the loop)."""
        return self._wd is not None

    def take_request(self) -> bool:
        """Whether someone opened state.json since the last call (and forget it: the watch comes
        back, and the next open wakes the loop again)."""
        requested, self.requested = self.requested, False
        if requested:
            self._rearm.set()
        return requested

    def _add_watch(self) -> None:
        from inotify_simple import flags

        self._wd = self._inotify.add_watch(str(self.path.parent), flags.OPEN | flags.MOVE_SELF | flags.ONLYDIR)

    def _watch(self) -> None:
        from inotify_simple import flags

        name = self.path.name
        try:
            while not self._stop.is_set():
                if self._wd is None:  # a request is pending: nothing to watch until it is taken
                    if self._rearm.wait(_POLL_MS / 1000):
                        self._rearm.clear()
                        self._add_watch()
                    continue
                opened = False
                events = self._inotify.read(timeout=_POLL_MS)
                for event in events:
                    if event.wd != self._wd:
                        continue  # the IN_IGNORED of a watch we removed
                    if event.mask & (flags.IGNORED | flags.MOVE_SELF):  # the directory went, and the watch with it
                        raise OSError(f"{self.path.parent} was removed or moved")
                    opened = opened or event.name == name
                if opened:
                    self.last_open_s = self.clock()
                    self._inotify.rm_watch(self._wd)
                    self._wd = None
                    self.requested = True
                    self.on_open()
                elif events:  # others' opens: let a flood of them merge in the queue meanwhile
                    self._stop.wait(_OTHER_OPENS_PAUSE_S)
        except Exception as exc:  # noqa: BLE001 - whatever stops the watch, state.json goes on every tick
            if not self._stop.is_set():
                log.warning("state.json is written every tick from now: watching its readers failed (%s)", exc)
                self.watching = False

    def close(self) -> None:
        """Stop the watcher thread and close the inotify descriptor."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * _POLL_MS / 1000)
            self._thread = None
        if self._inotify is not None:
            try:
                self._inotify.close()
            except OSError:
                pass
            self._inotify = None
        self.watching = False
