"""``drfgov run``: the control loop as a service — ticks, state, history, signals, lifecycle.

* **Start.** Load the policy (an invalid file: exit 2). If a snapshot of original limits is
  left over (the last run did not stop cleanly), restore it first. Then tick every
  ``interval_s``; after the first tick tell systemd READY=1. A full disk does not stop a
  start: the history is opened at the first tick with room (a limit is written only once its
  original is saved, as always).
* **Each tick.** :meth:`governor.control.loop.Governor.tick`, then state.json (atomic, 0644; every
  tick while someone reads it, else every 10 s and at once for a reader who opens it stale —
  :mod:`governor.service.statereaders`), history (SQLite, every ``history.every_s``), sd_notify
  STATUS and WATCHDOG. The tick's document is built only for those that want it. A slice's
  original limits are saved to the snapshot before the first write to it.
* **SIGHUP** reloads the policy; an invalid file is logged and the last good policy stays.
* **SIGTERM/SIGINT** end the loop: every original limit is restored and the snapshot removed
  (kept, and the exit status 1, if some slice could not be restored — ExecStopPost's
  ``drfgov restore`` tries again).
* ``--once``: one measured tick (a priming sample, ``interval_s`` apart, then the tick), no
  state or history files; the caller prints :attr:`Daemon.last_document`.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import sqlite3
import os
import signal
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from governor.enforce import EnforceError, make_backend
from governor.service.history import History, check_history_directory
from governor.service.journal import JOURNAL_SOCKET, JournalHandler, stderr_is_journal
from governor.service.hostsetup import HostSetup, SetupError, is_dry_run, set_up
from governor.config.identity import PolicyWeights
from governor.config.location import policy_file
from governor.control.loop import Governor, TickReport
from governor.service.notify import Notifier
from governor.service.ownfiles import ForeignFile
from governor.service.runtime import (
    GarbageCollection, InstanceLock, LockHeld, default_runtime_dir, raise_descriptor_limit, remove_stale_temporaries,
)
from governor.config.policy import Policy, load_policy
from governor.shaping.model import ShapingError
from governor.service.snapshot import SnapshotError, load_snapshot, remove_snapshot, restore_snapshot, save_snapshot
from governor.config.source import InputError, check_trusted_directory, directory_to_judge
from governor.service.state import IDLE_EVERY_S, state_document, write_state
from governor.service.statereaders import StateReaders
from governor.service.wake import Wake
from monitors.accounts import ACCOUNTS

if TYPE_CHECKING:
    from governor.service.metrics import Metrics

__all__ = ["Daemon", "directory_refusals", "file_refusals", "output_refusals", "snapshot_path_in",
           "textfile_directory_access", "trusted_state_directory"]

log = logging.getLogger("drfgov")
MAX_FAILED_TICKS = 5  # consecutive unexpected failures before giving up (systemd restarts us)
#: Seconds between tries of a metrics port another process held at start.
LISTEN_RETRY_S = 10.0


def snapshot_path_in(runtime_dir: Path) -> Path:
    """Where the original limits are kept: ``originals.json`` in the runtime directory
    (:mod:`governor.service.runtime`), whatever the policy says — restore must find it without."""
    return Path(runtime_dir) / "originals.json"


class Daemon:
    """One ``drfgov run``. ``config`` None means the built-in defaults.

    Raises (from the constructor): :class:`InputError` for a bad policy file,
    :class:`governor.service.hostsetup.SetupError` when the host cannot run it.
    """

    def __init__(self, config: Path | None, dry_run: bool = False, interval_s: float | None = None,
                 once: bool = False, notifier: Notifier | None = None,
                 clock: Callable[[], float] = time.monotonic, wall_clock: Callable[[], float] = time.time,
                 host_setup: Callable[[Policy, bool, Callable[[], float]], HostSetup] = set_up,
                 runtime_dir: Path | None = None, default_config: Path | None = None):
        """``host_setup(policy, dry_run, clock)`` builds monitor, backend and capacity (tests
        inject a simulated host); ``runtime_dir`` holds the lock and the snapshot (default
        :func:`governor.service.runtime.default_runtime_dir`). Without ``config``, the file at
        ``default_config`` when there is one (asked again at each reload while none was read:
        one made after the start is read then; :func:`governor.config.location.policy_file`),
        else the defaults. Once a file is read, it is the file: gone at a reload, the reload
        fails and the last good policy stays (it does not fall back to the defaults)."""
        self.config, self.dry_run_flag, self.interval_override, self.once = config, dry_run, interval_s, once
        self.default_config = default_config
        self.runtime_dir = Path(runtime_dir) if runtime_dir is not None else default_runtime_dir()
        self.snapshot_path = snapshot_path_in(self.runtime_dir)
        self.lock = InstanceLock(self.runtime_dir)
        self.clock, self.wall_clock, self.host_setup = clock, wall_clock, host_setup
        self.notifier = notifier or Notifier()
        raise_descriptor_limit()  # before discovery sizes how many users keep files open
        path = policy_file(config, default_config)
        self.policy, warnings = load_policy(path)
        self.config = path  # once a file is read, a reload that finds it gone is an error, not the defaults
        for warning in warnings:
            log.warning("%s", warning)
        self.dry_run = is_dry_run(self.policy, dry_run)
        self.host = self._set_up(self.policy)
        self.governor = Governor(self.policy.loop_settings(), self.host.capacity, self.host.monitor,
                                 self.host.backend, clock, PolicyWeights(self.policy, ACCOUNTS.known_groups),
                                 on_snapshot=None if self.dry_run else self._save_snapshot, network=self.host.network,
                                 on_progress=self._progress)
        self._last_ping = float("-inf")
        self.history: History | None = None
        self._history_pending = False  # not opened at start for want of space: retried each tick
        self.metrics: Metrics | None = None
        self.ticks = 0
        self.failed_ticks = 0
        self.stop_requested = False
        self.stop_signal: str | None = None  # the signal's name, logged by the loop once it stops
        self.reload_requested = False
        self._previous: dict = {}  # signal → its handler before run() (none when driven from a thread)
        self.wake = Wake()  # signal handlers and the state.json watcher set it (see governor.service.wake)
        self.user_errors: dict[int, str] = {}
        self.tick_notes: frozenset[str] = frozenset()  # the last tick's notes (logged when they appear)
        self.output_errors: dict[str, str] = {}
        self._listen_tried_s = float("-inf")  # the metrics port was taken at start: tried again from then
        self.last_document: dict = {}
        self.report: TickReport | None = None  # the latest tick's, and what its document needs
        #: the latest tick's document header: :func:`state_document`'s keywords but the report's
        self._document_of: dict[str, object] = {}
        self._document: dict | None = None
        self.readers: StateReaders | None = None  # None: state.json every tick (tests driving tick())
        self._state_written_s = float("-inf")
        self._state_written_tick = 0
        self._state_file: tuple[int, int] | None = None  # the state.json this process wrote last (write_state)

    # -- setup and reload -------------------------------------------------------------------------

    @property
    def interval_s(self) -> float:
        return self.interval_override or self.policy.interval_s

    def _set_up(self, policy: Policy) -> HostSetup:
        host = self.host_setup(policy, self.dry_run, self.clock)
        log.info("measuring %s; backend %s (%s); capacity %.2f cores, %.0f MiB, %d governed disk(s)",
                 host.source, host.backend.name, host.backend_reason, host.capacity.cpu_cores,
                 host.capacity.memory_bytes / 2**20, len(host.capacity.disks))
        for note in host.notes:
            log.warning("%s", note)
        return host

    def reload(self) -> None:
        """Re-read the policy; an invalid one is logged and the running policy stays.

        Order matters: the new shaping is put in place first (if that fails, nothing changed);
        then, when the backend changes, what the old backend wrote is given back through it;
        then the governor runs the next ticks with the new pieces.
        """
        self.notifier.reloading()
        old, history = self.host, None
        try:
            path = policy_file(self.config, self.default_config)
            policy, warnings = load_policy(path)
            if is_dry_run(policy, self.dry_run_flag) != self.dry_run:
                raise InputError(f"{policy.source}: mode: switching between dry-run and enforce needs a restart "
                                 "(systemctl restart drfgov)")
            if Path(policy.state_path).parent != Path(self.policy.state_path).parent:
                trusted_state_directory(policy, create=False)
            self._refuse_foreign_files(policy)
            host = self._set_up(policy)
            # after all that only checks (a refused reload made the new history's file and
            # directories), before the shaping, the one step with kernel side effects
            if _history_settings(policy) != _history_settings(self.policy) and not self._history_pending:
                history = self._open_history(policy)  # the old one goes on until the reload holds
            host.network = self._replace_network(old.network, host.network)
        except Exception as exc:  # noqa: BLE001 - whatever went wrong, the last good policy stays
            if history is not None:
                history.close()
            log.error("reload failed, keeping the last good policy (%s): %s", self.policy.source, exc)
            self.notifier.ready(f"reload failed, running the last good policy: {exc}")
            return
        for warning in warnings:
            log.warning("%s", warning)
        if policy.metrics != self.policy.metrics:
            log.warning("%s: metrics: a change of the metrics section takes effect at the next start "
                        "(systemctl restart drfgov)", policy.source)
            policy = dataclasses.replace(policy, metrics=self.policy.metrics)
        backend_changed = host.backend.name != old.backend.name
        # users' slices somewhere else (user_slice, cgroup_v1.parent): the ones written are given
        # back before they are left behind (taken for slices made again, their originals were lost)
        slices_moved = getattr(host.monitor, "user_slice", None) != getattr(old.monitor, "user_slice", None)
        if backend_changed or slices_moved:
            self._restore_limits()  # through the old backend; the shaping is the new one's already
        if backend_changed:
            self._finish(old)
        else:  # the old backend goes on, and with it what prepares the host for it
            host.backend, host.prepare, host.finish = old.backend, old.prepare, old.finish
        if type(host.monitor) is type(old.monitor) and policy.governed.min_uid == self.policy.governed.min_uid \
                and policy.governed.max_uid == self.policy.governed.max_uid \
                and getattr(host.monitor, "user_slice", None) == getattr(old.monitor, "user_slice", None):
            old.monitor.exempt = host.monitor.exempt
            host.monitor = old.monitor  # keep its counters and per-process state
        else:
            old.monitor.close()  # the files it kept open for the old user set
        moved = Path(policy.state_path) != Path(self.policy.state_path)
        if history is not None:
            if self.history is not None:
                self.history.close()
            self.history = history
            log.info("history: recording to %s now", policy.history_path)
        self.policy, self.host = policy, host
        if moved:
            self._move_state()
        self.governor.reconfigure(policy.loop_settings(), host.capacity, host.monitor, host.backend,
                                  PolicyWeights(policy, ACCOUNTS.known_groups), host.network)
        self.config = path  # the default file, once read, is the file from then on
        log.info("reloaded %s", policy.source)
        self.notifier.ready(f"reloaded {policy.source}")

    def _refuse_foreign_files(self, policy: Policy) -> None:
        """A reload that points state_path or history.path at another file must find nothing
        there, or drfgov's own (:func:`file_refusals`); the metrics wait for a restart.

        Raises:
            InputError: naming the policy file, the setting and what is there.
        """
        moved = {field for field, a, b in (("state_path", policy.state_path, self.policy.state_path),
                                            ("history.path", policy.history_path, self.policy.history_path))
                 if Path(a) != Path(b)}
        for field, why in file_refusals(policy, self.runtime_dir).items():
            if field in moved:
                raise InputError(policy.source, None, field, why)

    def _replace_network(self, old, new):
        """The shaper to run after a reload: the old one when the links are the same; else the
        new one installed (the old removed first: they share interfaces).

        Raises:
            SetupError: the new one cannot be installed (the old one is put back).
        """
        if old is not None and new is not None and old.links == new.links:
            return old
        if old is not None:
            # the new install replaces the table in one transaction: conntrack never lapses (a
            # refused one removes it, and putting the old one back makes it again: a gap then)
            for error in old.remove(keep_table=new is not None):
                log.error("removing shaping: %s", error)
        if new is not None:
            try:
                new.install(every_link=True)
            except ShapingError as exc:
                if old is not None:
                    old.install()
                raise SetupError(f"network shaping: {exc}") from None
        return new

    # -- lifecycle --------------------------------------------------------------------------------

    def _save_snapshot(self, originals) -> None:
        save_snapshot(self.snapshot_path, self.host.backend.name, originals)

    def restore_leftovers(self) -> None:
        """Restore a snapshot a previous run left behind (it did not stop cleanly)."""
        path = self.snapshot_path
        try:
            snapshot = load_snapshot(path)
        except SnapshotError as exc:
            raise SetupError(f"unreadable snapshot of original limits: {exc}. The original limits it held cannot be "
                             "restored automatically: inspect it, "
                             f"put back what you need by hand, then move it away (mv {path} {path}.bad) "
                             "and start again") from None
        if snapshot is None:
            return
        backend = self.host.backend if snapshot.backend == self.host.backend.name else make_backend(snapshot.backend)[0]
        notes: list[str] = []
        restored, failed = restore_snapshot(snapshot, backend, self.policy.memory.margin_bytes, notes)
        log.warning("a previous run did not stop cleanly: restored the original limits of %d slice(s)%s",
                    len(restored), f" ({', '.join(restored)})" if restored else "")
        for note in notes:
            log.warning("restore %s", note)
        for uid, error in failed.items():  # keep her true originals for the next restore
            log.error("restore %s", error)
            self.governor.originals[uid] = snapshot.originals[uid]
        if failed:
            self._save_snapshot(self.governor.originals)
        else:
            remove_snapshot(path)

    def _restore_limits(self) -> bool:
        """Every original cgroup limit back through the current backend; the snapshot is removed
        when all came back. Returns whether they did."""
        notes: list[str] = []
        errors = self.governor.restore(notes)
        self._log_admin_changes()
        for note in notes:
            log.warning("restore %s", note)
        for error in errors:
            log.error("restore %s", error)
        if not errors and not self.dry_run:
            try:
                remove_snapshot(self.snapshot_path)
            except OSError as exc:  # the stop goes on (the service audit of 2026-11-27: it raised out of run)
                log.error("every original limit is back, but the snapshot %s could not be removed (%s): remove it "
                          "before the next start, which would put its limits back over any set meanwhile",
                          self.snapshot_path, exc.strerror or exc)
                return False
        return not errors

    @staticmethod
    def _finish(host: HostSetup) -> None:
        """Undo what ``host.prepare`` did (after its backend's limits were restored)."""
        if host.finish is not None:
            host.finish()

    def _restore_all(self) -> bool:
        """:meth:`_restore_limits`, what preparing the host did undone, and the shaping removed
        (at stop)."""
        ok = self._restore_limits()
        if not self.dry_run:
            self._finish(self.host)
        if self.governor.network is not None:
            for error in self.governor.network.remove():
                log.error("restore shaping: %s", error)
                ok = False
        return ok

    # -- the loop ---------------------------------------------------------------------------------

    def tick(self) -> TickReport:
        """One tick: the Governor's, then out to state.json, history and metrics as each wants."""
        started_s = time.perf_counter()
        if self.host.prepare is not None and not self.dry_run:
            try:
                self.host.prepare()
            except EnforceError as exc:
                if self.output_errors.get("prepare") != str(exc):  # once, not every tick
                    log.warning("preparing the host for this tick (the tick goes on): %s", exc)
                self.output_errors["prepare"] = str(exc)
            else:
                if self.output_errors.pop("prepare", None):
                    log.info("host prepared again")
        # the last tick's report and document go before this tick's are built: one generation
        # of per-user objects at a time (at 10,000 users, 17 MiB of peak RSS; issue 16). A tick
        # that fails (a bug) thus leaves no report: state.json stays as last written, and a
        # reader waits for the next good tick. With metrics on, their collector keeps the last
        # tick's report (~2.9 KiB a user), or the document a scrape built from it (~3.9 KiB;
        # the whole document it kept before was ~4.8 KiB), until this tick's is handed over
        self.report = self._document = None
        self.governor.word_reasons = self._reports_read()
        report = self.governor.tick()
        duration_s = time.perf_counter() - started_s
        self.ticks += 1
        self.report = report
        self._document_of = {"tick": self.ticks, "time_unix_s": self.wall_clock(), "interval_s": self.interval_s,
                             "mode": "dry-run" if self.dry_run else "enforce", "backend": self.host.backend.name,
                             "policy_file": self.policy.source}
        self._log_user_errors(report)
        self._log_limit_changes(report)
        if not self.once:
            self._publish(report, duration_s)
        return report

    def document(self, once: bool = False) -> dict:
        """The state document of the latest tick (:func:`governor.service.state.state_document`),
        built on first use: ~40 µs a user, so only for what wants it this tick. ``once``: for one
        reader (state.json, or history) — unless the whole document is built already, one whose
        users are built as they are read, never all in memory (~3 KiB a user)."""
        if self._document is not None:
            return self._document
        if self.report is None:
            raise RuntimeError("no tick yet")
        document = state_document(self.report, **self._document_of, users_once=once)
        if not once:
            self._document = document
        return document

    def _publish(self, report: TickReport, duration_s: float) -> None:
        """state.json, history and metrics, each when it wants this tick; no failure of theirs
        fails the tick (the limits are what matters)."""
        if self.metrics is not None:  # its document is built when scraped, from this tick's report
            if "metrics.listen" in self.output_errors:
                self._listen_again()
            writes = sum(len(r.written) for r in report.users.values())
            errors = sum(1 for r in report.users.values() if r.error) + (report.network_error is not None)
            build = partial(state_document, report, **self._document_of, reasons=False)
            time_unix_s = self._document_of["time_unix_s"]
            self._output("metrics", lambda: self.metrics.observe(build, time_unix_s, duration_s, writes, errors))
        if self._state_due():
            self._output("state", self._write_state)
        if self._history_pending or (self.history is not None and self.history.wants(self._document_of["time_unix_s"])):
            self._output("history", lambda: self._record_history(self.document(once=True)))

    def _reports_read(self) -> bool:
        """Whether the coming tick's document will be built for its every user with reasons:
        state.json written every tick (unwatched, or read lately or just now). Its reasons
        are then worded as the users are planned (only the cost differs: see
        :attr:`Governor.word_reasons`); a write every 10 s or a history row words them when
        read, and the metrics show none."""
        if self.once:
            return False
        readers = self.readers
        return readers is None or readers.requested or readers.watched()

    def _state_due(self) -> bool:
        """Whether this tick writes state.json: always without a watch on its readers; else
        when one opened it lately or just now, or :data:`IDLE_EVERY_S` after the last write."""
        if self.readers is None:
            return True
        requested = self.readers.take_request()
        return requested or self.readers.watched() or self.clock() - self._state_written_s >= IDLE_EVERY_S

    def _write_state(self) -> None:
        # the attempt counts: a failing write is tried again when next due, not at every open
        self._state_written_s, self._state_written_tick = self.clock(), self.ticks
        written, self._state_file = self._state_file, None  # until this write lands
        self._state_file = write_state(self.policy.state_path, self.document(once=True), written)

    def _answer_reader(self) -> None:
        """Between ticks: a reader opened state.json older than the latest tick — write it now.
        A request for a file that is of the latest tick stays for the next tick to take (the
        watcher does not wake us again meanwhile)."""
        if (self.readers is not None and self.readers.requested and self.report is not None
                and self._state_written_tick < self.ticks):
            self.readers.take_request()
            self._output("state", self._write_state)

    def _output(self, name: str, write: Callable[[], object]) -> None:
        """Run one output; its failure never fails the tick or the loop, and is logged when it
        starts or changes, not every tick (an unexpected one with its traceback, once)."""
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - the limits are what matters
            expected = isinstance(exc, (OSError, sqlite3.Error))
            kind = f"{type(exc).__name__} {getattr(exc, 'errno', '')}"  # not the message: it names temp files
            if self.output_errors.get(name) != kind:
                log.error("%s not written (the tick goes on): %s: %s", name, type(exc).__name__, exc,
                          exc_info=not expected)
            self.output_errors[name] = kind
        else:
            if self.output_errors.pop(name, None):
                log.info("%s written again", name)

    def _open_history(self, policy: Policy | None = None) -> History:
        policy = policy or self.policy
        return History(policy.history_path, policy.history_retention_days, policy.history_every_s)

    def _record_history(self, doc: dict) -> None:
        """Record ``doc``; a history that could not be opened at start (disk full) is opened now."""
        if self._history_pending:
            self.history = self._open_history()
            self._history_pending = False
        if self.history is not None:
            self.history.record(doc)

    def _log_limit_changes(self, report: TickReport) -> None:
        """One line per limit written this tick (in a dry run: that would have been), with
        journal fields ``DRFGOV_UID``, ``DRFGOV_USER``, ``DRFGOV_KNOB``, ``DRFGOV_VALUE`` (the
        kernel file's text) and ``DRFGOV_REASON``."""
        verb = "would set" if self.dry_run else "set"
        for uid, r in report.users.items():
            if not r.written or r.limits is None:
                continue
            for knob in r.written:
                value, reason = r.limits.text(knob), r.reasons.get(knob, "")
                log.info("%s (uid %d): %s %s %s: %s", r.name, uid, verb, knob, value, reason,
                         extra={"journal": {"DRFGOV_UID": uid, "DRFGOV_USER": r.name, "DRFGOV_KNOB": knob.name,
                                            "DRFGOV_VALUE": value, "DRFGOV_REASON": reason}})

    def _log_admin_changes(self) -> None:
        """Log each limit someone else changed while governed, taken as hers
        (:meth:`governor.control.loop.Governor._take_changes_by_others`)."""
        for note in self.governor.admin_change_notes:
            log.warning("%s", note)
        self.governor.admin_change_notes.clear()

    def _log_user_errors(self, report: TickReport) -> None:
        """Log a user's error when it appears or changes, not every tick — users failing alike
        (but for their slice's name) in one line — and so a tick's note (a fallback's traceback:
        a bug that stays is logged once, and again when it has been gone a tick); what a restore
        of a user leaving governance did instead of an original memory.max below use, and the
        limits others changed while she was governed."""
        for note in self.governor.release_notes:
            log.warning("restore %s", note)
        self.governor.release_notes.clear()
        self._log_admin_changes()
        for note in report.notes:
            if note not in self.tick_notes:
                log.error("%s", note)
        self.tick_notes = frozenset(report.notes)
        now = {uid: r.error for uid, r in report.users.items() if r.error}
        fresh: dict[str, list[int]] = {}  # one line per kind of error: a bus gone fails every user alike
        for uid, error in now.items():
            if self.user_errors.get(uid) != error:
                fresh.setdefault(error.replace(f"user-{uid}.slice", "user-UID.slice"), []).append(uid)
        for kind, uids in fresh.items():
            first = uids[0]
            if len(uids) == 1:
                log.error("%s (uid %d): %s", report.users[first].name, first, now[first])
            else:
                log.error("%s (uid %d) and %d other user(s): %s", report.users[first].name, first, len(uids) - 1, kind)
        self.user_errors = now

    def _status(self, report: TickReport) -> str:
        users = report.users
        top = max(users.values(), key=lambda u: u.weighted_share, default=None)
        contended = ", ".join(r.name for r in report.saturated) or "nothing"
        lead = f"; highest weighted share {top.name} {top.weighted_share:.2f}" if top else ""
        return f"tick {self.ticks}: {len(users)} user(s), contended: {contended}{lead}"

    def run(self) -> int:
        """Tick until stopped (or twice with ``once``). Returns the exit status.

        Raises:
            SetupError: another ``drfgov run`` holds the instance lock, the state or history
                location cannot be written, or a snapshot left behind is unreadable (before
                any tick).
        """
        if not (self.once and self.dry_run):  # anything that writes state or limits: one at a time
            try:
                self.lock.acquire()
            except LockHeld as exc:
                raise SetupError(str(exc)) from None
            except OSError as exc:
                raise SetupError(f"{self.lock.path}: cannot take the instance lock: {exc}") from None
            for stale in remove_stale_temporaries(Path(self.policy.state_path), self.snapshot_path):
                log.info("removed %s, left by a run killed while writing", stale)
        if not self.once:
            self._open_outputs()
            textfile = self.policy.metrics.textfile
            if textfile is not None:  # its directory is trusted now (the metrics' start judged it)
                for stale in remove_stale_temporaries(Path(textfile)):
                    log.info("removed %s, left by a run killed while writing", stale)
        self._install_signals()
        if not self.dry_run:
            self.restore_leftovers()
        deadline = self.clock()
        garbage = self._garbage = GarbageCollection(self.clock)  # none automatic while ticking: see runtime.GC_EVERY_S
        failed = False
        try:
            try:
                self._install_network()
                garbage.pause()
                try:
                    failed = self._loop(deadline)
                except Exception:  # noqa: BLE001 - a bug outside the ticks' own guard: the limits go back all the same
                    log.exception("the loop failed: stopping (limits are restored)")
                    failed = True
            finally:
                garbage.resume()
                self._ignore_signals()  # stopping: no signal may kill it before the limits are back
            if failed:
                self._stop()
                return 1
            if self.stop_signal is not None:
                log.info("%s: stopping", self.stop_signal)
            self._leave_state()
            return 0 if self._stop() else 1
        finally:
            self._restore_signals()

    def _loop(self, deadline: float) -> bool:
        """Tick until asked to stop (or ``--once``'s two ticks); True when it stopped for ticks
        that kept failing (:data:`MAX_FAILED_TICKS`)."""
        while not self.stop_requested:
            if self.reload_requested:
                self.reload_requested = False
                self._rearm_reload()
                self.reload()
                if self.stop_requested:  # asked during the reload (seconds under load): no tick after it
                    break
            report = self._guarded_tick()  # the last is not kept through this tick (see tick())
            self._garbage.collect_if_due()
            if self.failed_ticks >= MAX_FAILED_TICKS:
                log.critical("%d ticks in a row failed: stopping (limits are restored)", self.failed_ticks)
                return True
            if self.ticks == 1 and report:
                self.notifier.ready(self._status(report))
            elif report:
                self.notifier.status(self._status(report))
            report = None
            if self.once and self.ticks >= 2:
                break
            deadline = self._sleep_until(deadline + self.interval_s)
        return False

    def _leave_state(self) -> None:
        """After the loop: the last tick's document for the caller (``--once`` prints it) and the
        file left behind of the last tick. Nothing here may keep the limits from being restored."""
        if self.report is None:
            if self.failed_ticks:
                log.error("the last tick failed: no document of it to leave (state.json stays as last written)")
            return
        try:
            self.last_document = self.document()
        except Exception:  # noqa: BLE001 - a bug in the document: restore all the same
            log.exception("the last tick's document could not be built")
            return
        if self.readers is not None and self._state_written_tick < self.ticks:
            self._output("state", self._write_state)

    def _install_network(self) -> None:
        """Build the shaping (removing a crashed run's first), or a clear error before any tick."""
        network = self.host.network
        if network is None:
            return
        try:
            network.install(every_link=True)
        except ShapingError as exc:
            raise SetupError(f"{self.policy.source}: network shaping: {exc} (see drfgov doctor; or set "
                             "capacity.nics.IF.ingress: false, or drop net from enforce)") from None
        log.info("shaping %s", ", ".join(f"{r} at {link.capacity_bits_per_s / 1e6:g} Mbit/s"
                                         for r, link in network.links.items() if r not in network.missing))
        for resource, why in network.missing.items():  # its interface is away (a VPN down at boot)
            log.warning("shaping %s: %s: shaped once it is there (tried each tick)", resource, why)

    def _open_outputs(self) -> None:
        """state.json's directory, the history database and the metrics, or a clear error now,
        not at tick 1 (a full disk is not an error: the history is opened once there is room)."""
        self._open_files()
        self._start_metrics()
        self.readers = self._watch_readers()

    def _move_state(self) -> None:
        """A reload moved state_path: the new file is written at the next tick, and watched."""
        self._state_written_s, self._state_written_tick = float("-inf"), 0
        self._state_file = None
        if self.readers is None:
            return
        self.readers.close()
        try:
            trusted_state_directory(self.policy)  # judged by its parent at the reload: made now
        except (OSError, SetupError) as exc:
            log.error("state_path: cannot create its directory (state.json not written): %s", exc)
        self.readers = self._watch_readers()

    def _watch_readers(self) -> StateReaders | None:
        """Watch who opens state.json (its directory exists by now); None: write every tick."""
        readers = StateReaders(Path(self.policy.state_path), self.clock, self.wake.set)
        return readers if readers.start() else None

    def _open_files(self) -> None:
        """state.json's directory made and judged, the files the policy names judged
        (:func:`file_refusals`: one that is not drfgov's is never touched), the history opened.

        Raises:
            SetupError: naming the setting at fault (the "run as root" hint only when not root).
        """
        state_dir = Path(self.policy.state_path).parent
        refusals = file_refusals(self.policy, self.runtime_dir)
        if refusals:  # drfgov run's CLI refused these already (exit 2): a file planted since, or a caller of ours
            field, why = next(iter(refusals.items()))
            raise SetupError(f"{self.policy.source}: {field}: {why}")
        hint = "" if os.geteuid() == 0 else " (run as root, as the systemd unit does, or point it elsewhere)"
        try:
            trusted_state_directory(self.policy)
            if not os.access(state_dir, os.W_OK):
                raise PermissionError(f"{state_dir} is not writable")
        except OSError as exc:
            raise SetupError(f"{self.policy.source}: state_path: cannot write there: {exc}{hint}") from None
        try:
            self.history = self._open_history()
        except ForeignFile as exc:  # its text names history.path
            raise SetupError(f"{self.policy.source}: {exc}") from None
        except (OSError, sqlite3.Error) as exc:
            if _disk_full(exc):  # transient: govern now, record once there is room (tried each tick)
                self._history_pending = True
                self.output_errors["history"] = f"{type(exc).__name__} {getattr(exc, 'errno', '')}"
                log.error("history not opened (the ticks go on; tried again each tick): %s: %s",
                          type(exc).__name__, exc)
                return
            raise SetupError(f"{self.policy.source}: history.path: cannot write there: {exc}{hint}") from None

    def _start_metrics(self) -> None:
        if self.policy.metrics.enabled:
            # prometheus_client and the HTTP server are ~60 ms of imports: only where metrics are on
            from governor.service.metrics import Metrics, MetricsError

            metrics = Metrics(self.policy.metrics)
            try:
                metrics.start()
            except MetricsError as exc:
                if not exc.in_use:
                    raise SetupError(f"{self.policy.source}: {exc}") from None
                # another process has the port — perhaps a local user's, who took it first: were
                # that fatal she could keep the governor from ever starting (the lifecycle audit
                # of 2026-11-26); it governs meanwhile, and the port is tried again
                log.error("%s: %s: governing without the listener; tried again every %g s",
                          self.policy.source, exc, LISTEN_RETRY_S)
                self.output_errors["metrics.listen"] = "EADDRINUSE"
                self._listen_tried_s = self.clock()
            self.metrics = metrics
            if metrics.listening:
                log.info("metrics on http://%s/metrics", self.policy.metrics.listen)

    def _listen_again(self) -> None:
        """The listener's port was taken at start: tried again every :data:`LISTEN_RETRY_S`."""
        now = self.clock()
        if abs(now - self._listen_tried_s) < LISTEN_RETRY_S:
            return
        self._listen_tried_s = now
        try:
            self.metrics.listen()
        except MetricsError:
            return  # said at start; the state document's output errors still show it
        except Exception:  # noqa: BLE001 - a bug (a thread that cannot start): said once, the tick goes on
            log.exception("metrics: the listener could not start (not tried again)")
            self.output_errors.pop("metrics.listen", None)
            self.output_errors["metrics"] = "listener failed"
            return
        self.output_errors.pop("metrics.listen", None)
        log.info("metrics on http://%s/metrics (the port is free now)", self.policy.metrics.listen)

    def _guarded_tick(self) -> TickReport | None:
        try:
            report = self.tick()
        except Exception:  # noqa: BLE001 - a bug must not leave users limited without a loop
            self.failed_ticks += 1
            if self.metrics is not None:
                self.metrics.failed_tick()
            log.exception("tick failed (%d in a row)", self.failed_ticks)
            return None
        self.failed_ticks = 0
        return report

    def _progress(self) -> None:
        """Feed the watchdog from inside a tick, at most every half of its period: a tick
        held up by slow D-Bus answers is alive, a stuck one is not (and gets no ping)."""
        period = self.notifier.watchdog_period_s
        if period is not None and self.clock() - self._last_ping >= period / 2:
            self._last_ping = self.clock()
            self.notifier.watchdog()

    def _sleep_until(self, deadline: float) -> float:
        """Wait for ``deadline`` (pinging the watchdog); returns it, or now if we fell behind."""
        period = self.notifier.watchdog_period_s
        while not (self.stop_requested or self.reload_requested):
            self.notifier.watchdog()
            remaining = deadline - self.clock()
            if remaining <= 0:
                break
            self.wake.wait(remaining if period is None else min(remaining, period))
            self.wake.clear()
            self._answer_reader()
        now = self.clock()
        return now if now - deadline > self.interval_s else deadline  # behind by a tick: do not burst

    def _stop(self) -> bool:
        self.notifier.stopping("restoring original limits")
        ok = True if self.once else self._restore_all()  # --once leaves its limits for drfgov restore
        if self.history is not None:
            self.history.close()
        if self.metrics is not None:
            self.metrics.close()
        if self.readers is not None:
            self.readers.close()
        self.lock.release()
        log.info("stopped after %d tick(s)%s", self.ticks, "" if ok else "; some limits could not be restored")
        return ok

    # -- signals ----------------------------------------------------------------------------------

    def _install_signals(self) -> None:
        self._previous = {}
        if threading.current_thread() is not threading.main_thread():
            return  # tests drive a daemon from a thread: they set the flags themselves

        # Each handler first ignores its signals until the loop has acted on it: Python runs a
        # pending handler at the start of any Python call, the handler's own included, so under a
        # flood each one nested the next until RecursionError killed the loop (the fault suite's
        # SIGHUP flood, 2026-11-27, on a loaded machine); ignored, the kernel drops them, and many
        # SIGHUPs are one reload anyway. A SIGHUP is heeded again before the policy is read
        # (:meth:`_rearm_reload`), so none sent after an edit is lost.
        def stop(signum, _frame):  # no logging here: a signal that lands inside a write to
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stderr would make the handler's write
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # re-enter it
            self.stop_signal = signal.Signals(signum).name
            self.request_stop()

        def hup(_signum, _frame):
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            self.request_reload()

        self._hup = hup
        for sig, handler in ((signal.SIGTERM, stop), (signal.SIGINT, stop), (signal.SIGHUP, hup)):
            self._previous[sig] = signal.signal(sig, handler)

    def _rearm_reload(self) -> None:
        """Heed SIGHUP again (its handler ignored it until now): before the policy is read, so a
        SIGHUP sent after any edit the read may miss makes another reload."""
        if self._previous:
            signal.signal(signal.SIGHUP, self._hup)

    def _ignore_signals(self) -> None:
        """Ignore SIGTERM, SIGINT and SIGHUP while the limits are given back (:meth:`_stop`):
        their default action would end the process before it had (the review of 2026-11-27: a
        SIGHUP flood with a SIGTERM in it exited 129 with every limit in place)."""
        for sig in self._previous:
            signal.signal(sig, signal.SIG_IGN)

    def _restore_signals(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def request_stop(self) -> None:
        self.stop_requested = True
        self.wake.set()

    def request_reload(self) -> None:
        self.reload_requested = True
        self.wake.set()


def _disk_full(exc: Exception) -> bool:
    """ENOSPC, or SQLite's SQLITE_FULL (13) saying the same (sqlite.org/rescode.html)."""
    return getattr(exc, "errno", None) == errno.ENOSPC or getattr(exc, "sqlite_errorcode", None) == 13


def configure_logging(verbose: bool = False) -> None:
    """Log to stderr; under systemd (``$JOURNAL_STREAM`` is our stderr) to the journal's native
    socket, with fields of our own (:mod:`governor.service.journal`), falling back to stderr
    lines with ``<N>`` priority prefixes that journald turns into log levels (sd-daemon(3))."""
    journal = stderr_is_journal()
    handler: logging.Handler = logging.StreamHandler()
    handler.setFormatter(_JournalFormatter() if journal else logging.Formatter("drfgov: %(levelname)s: %(message)s"))
    if journal and os.path.exists(JOURNAL_SOCKET):
        handler = JournalHandler(fallback=handler)
    root = logging.getLogger("drfgov")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


class _JournalFormatter(logging.Formatter):
    _PRIORITY = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}

    def format(self, record: logging.LogRecord) -> str:
        return f"<{self._PRIORITY.get(record.levelno, 6)}>{super().format(record)}"


def trusted_state_directory(policy: Policy, create: bool = True) -> None:
    """Make state.json's directory (0755: users read it) and refuse one that another user owns
    or may write: she could replace state.json with forged shares that everyone reads
    (:func:`~governor.config.source.check_trusted_directory`). Without ``create`` (a reload,
    which may yet fail: it leaves nothing behind) nothing is made, and a directory not there
    yet is judged as :func:`~governor.config.source.directory_to_judge` says: by its nearest
    existing parent (or the one above a sticky one), where no one else can make the rest
    unseen.

    Raises:
        SetupError: naming the directory at fault and the fix. OSError: it cannot be made.
    """
    state_dir = Path(policy.state_path).parent
    trusted = {0, os.geteuid()}
    if create:
        state_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    else:
        state_dir = directory_to_judge(state_dir, trusted)
    try:
        check_trusted_directory(state_dir, trusted)
    except InputError as exc:
        raise SetupError(f"{policy.source}: state_path: {exc}") from None


def directory_refusals(policy: Policy) -> dict[str, str]:
    """What ``drfgov run`` would refuse of the policy's directories, without making any: field
    (``state_path``, ``history.path``, ``metrics.textfile``) → why, naming the fix. The state
    directory by :func:`trusted_state_directory`, the history's by its own rule
    (:func:`~governor.service.history.check_history_directory`), the textfile's as
    :meth:`~governor.service.metrics.Metrics.start` judges it (trusted, by
    :func:`~governor.config.source.check_trusted_directory`; and, as root, one not there yet
    that cannot be made: :func:`textfile_directory_access`), a directory not there yet as
    :func:`~governor.config.source.directory_to_judge` says; with the files there,
    :func:`output_refusals`."""
    refusals = {}
    trusted = {0, os.geteuid()}
    try:
        trusted_state_directory(policy, create=False)
    except SetupError as exc:  # its text names the policy file and state_path
        refusals["state_path"] = str(exc).removeprefix(f"{policy.source}: state_path: ")
    try:
        check_history_directory(directory_to_judge(Path(policy.history_path).parent, trusted))
    except PermissionError as exc:  # its text names history.path
        refusals["history.path"] = str(exc).removeprefix("history.path: ")
    if policy.metrics.textfile is not None:
        try:
            check_trusted_directory(directory_to_judge(os.path.dirname(policy.metrics.textfile), trusted), trusted)
        except InputError as exc:  # "DIR: why; fix: …"
            refusals["metrics.textfile"] = str(exc)
        else:
            access = textfile_directory_access(policy)
            if access is not None and access[0]:
                refusals["metrics.textfile"] = access[1]
    return refusals


def textfile_directory_access(policy: Policy) -> tuple[bool, str] | None:
    """Whether root can write the directory of ``metrics.textfile`` (asked only as root: another
    user's access says nothing of the daemon's), as ``drfgov run`` needs: ``(True, why)`` when
    the directory is not there and its nearest existing parent is not writable (run cannot make
    it: refused at its start), ``(False, why)`` when it is there and not writable (a read-only
    filesystem: run starts, and logs each textfile write that fails); None when it is writable,
    would be made, there is no textfile, or this process is not root. Trust is judged apart
    (:func:`directory_refusals`)."""
    if policy.metrics.textfile is None or os.geteuid() != 0:
        return None
    directory = Path(os.path.abspath(os.path.dirname(policy.metrics.textfile)))
    existing = next((p for p in (directory, *directory.parents) if os.path.lexists(p)), Path("/"))
    if not existing.is_dir() or os.access(existing, os.W_OK | os.X_OK):
        return None  # a file in the way is the trust check's (not a directory)
    if existing == directory:
        return False, (f"{directory} is not writable, even by root (a read-only filesystem?): drfgov run starts, "
                       "and logs each textfile write that fails")
    return True, (f"{directory} is not there and cannot be made: {existing} is not writable, even by root (a "
                  "read-only filesystem?); fix: make the directory, or point metrics.textfile elsewhere")


def file_refusals(policy: Policy, runtime_dir: Path | None = None) -> dict[str, str]:
    """What ``drfgov run`` would refuse of the files the policy names, reading only: field
    (``state_path``, ``history.path``, ``metrics.textfile``) → why, naming the fix. A file there
    that is not drfgov's own of its kind (:func:`governor.service.ownfiles.foreign_file`: the
    policy file itself, an admin's document): the daemon would replace, chmod or remove it; or
    the snapshot of original limits (``originals.json`` in ``runtime_dir``, default
    :func:`~governor.service.runtime.default_runtime_dir`), which the policy cannot know of.
    (Two settings naming one file, or the policy file, are the policy's own error: its loader
    refuses them.)"""
    from governor.service.ownfiles import foreign_file
    from governor.service.runtime import default_runtime_dir

    snapshot = os.path.realpath(snapshot_path_in(runtime_dir if runtime_dir is not None else default_runtime_dir()))
    refusals: dict[str, str] = {}
    for field, kind, path in (("state_path", "state", policy.state_path),
                              ("history.path", "history", policy.history_path),
                              ("metrics.textfile", "textfile", policy.metrics.textfile)):
        if path is None:
            continue
        if os.path.realpath(path) == snapshot:
            refusals[field] = f"{path} is where drfgov keeps its snapshot of original limits: point {field} elsewhere"
            continue
        why = foreign_file(kind, path, policy.source)
        if why is not None:
            refusals[field] = why
    return refusals


def output_refusals(policy: Policy) -> dict[str, str]:
    """Everything ``drfgov run`` would refuse of where the policy has it write, without making
    or touching anything: :func:`directory_refusals`, then for a setting whose directory passed,
    :func:`file_refusals`. The one judgement check-config, ``run`` before its start and
    ``doctor`` ask."""
    refusals = directory_refusals(policy)
    for field, why in file_refusals(policy).items():
        refusals.setdefault(field, why)
    return refusals


def _history_settings(policy: Policy) -> tuple:
    """The policy's history section: a reload that changes it records to the history it names."""
    return policy.history_path, policy.history_retention_days, policy.history_every_s
