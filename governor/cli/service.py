"""The service's commands: ``run``, ``shares``, ``explain``, ``restore``, ``doctor``.

Registered on :data:`governor.cli.app.app`. Exit status: 0 success, 1 the host or daemon failed
(a check failed, a limit could not be restored, no state yet at the policy's state_path), 2 bad
input (policy file, unknown user, a ``--state`` file that is missing or not a state document).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # rich is imported where a table is drawn: --help needs none of it
    from rich.console import Console

from governor.cli.app import DEFAULT_CONFIG, EXIT_USAGE, app, check_directories, config_path, emit_json, fail
from governor.config.errors import InputError

EXIT_FAILED = 1
ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help="Policy file; default /etc/drfgov/drfgov.yaml, else built-in defaults.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def _policy(config: Path | None):
    from governor.config.policy import load_policy

    try:
        return load_policy(config_path(config))[0]
    except InputError as exc:
        fail(str(exc))


@app.command()
def run(
    config: ConfigOption = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Measure and plan; write no limit.")] = False,
    once: Annotated[bool, typer.Option("--once", help="One measured tick (two samples INTERVAL apart), print the plan, exit.")] = False,
    interval: Annotated[float | None, typer.Option("--interval", help="Seconds between ticks (overrides interval_s; 0.1 … 86400).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="With --once: print the state document as JSON.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    """Govern: measure users, compute weighted DRF shares, write their limits, every tick.

    SIGHUP reloads the policy (an invalid file keeps the last good one); SIGTERM/SIGINT
    restore every original limit and exit. With --once, limits written stay in place until
    `drfgov restore`; with --dry-run nothing is written at all.
    """
    from governor.config.numbers import check_interval
    from governor.service.daemon import Daemon, configure_logging
    from governor.service.hostsetup import SetupError

    if as_json and not once:
        fail("--json: only with --once (the daemon logs; its state is read with drfgov shares --json)")
    if interval is not None:
        try:
            interval = check_interval(interval)
        except ValueError as exc:
            fail(f"--interval: {exc}")  # the policy's interval_s rule: nan passed click's min and spun the loop
    configure_logging(verbose)
    try:
        daemon = Daemon(config, dry_run=dry_run, interval_s=interval, once=once, default_config=DEFAULT_CONFIG)
        if not once:
            check_directories(daemon.policy)  # a mistake in the policy: exit 2, before anything is made
    except InputError as exc:
        fail(str(exc))
    except SetupError as exc:
        fail(str(exc), EXIT_FAILED)
    try:
        status = daemon.run()
    except SetupError as exc:
        fail(str(exc), EXIT_FAILED)
    if once and daemon.last_document:
        if as_json:
            emit_json(daemon.last_document)
        else:
            _print_shares(daemon.last_document)
            kept = "dry run: nothing was written" if daemon.dry_run else "limits written stay until: drfgov restore"
            print(kept)
    raise typer.Exit(status)


def _print_shares(doc: dict) -> None:
    from governor.cli.views import markup_safe, shares_table, summary_line

    console = _console()
    console.print(markup_safe(summary_line(doc)), highlight=False)
    if doc["users"]:
        console.print(shares_table(doc))
    else:
        console.print("no governed users right now (uid governed.min_uid … max_uid with a slice or processes)")


def _console() -> Console:
    """The terminal's width on a terminal; 160 columns into a pipe or file (no wrapped rows)."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


def _state_path(config: Path | None, state: Path | None) -> Path:
    """``--state``, or the state_path of the policy ``--config`` names (default: the installed
    one); both given is a usage error (exit 2): one of them would be ignored."""
    if state is not None and config is not None:
        fail("--state: give --config (the state_path of its policy) or --state, not both")
    return state if state is not None else Path(_policy(config).state_path)


StateOption = Annotated[Path | None, typer.Option("--state", help="state.json to read; default the policy's state_path.")]


def _read(path: Path, fresh: bool = True, named: bool = False) -> dict:
    """state.json at ``path`` (``fresh``: waiting for the daemon to replace a stale one, see
    :func:`governor.service.state.read_state`), or exit with the reason: 2 when the user ``named``
    the file (``--state``: her input, missing, unreadable or not a state document, like any file
    named on the command line), else 1 (the policy's state_path: the daemon's output, not there
    while it is not running)."""
    from governor.service.state import StateError, check_document, read_state

    try:
        return check_document(read_state(path, fresh=fresh), path)
    except StateError as exc:
        from governor.cli.views import printable  # (rich with it: not on the way of a good file)

        fail(printable(str(exc)), EXIT_USAGE if named else EXIT_FAILED)  # it may quote the file (a link's name)


@app.command()
def shares(
    config: ConfigOption = None,
    state: StateOption = None,
    as_json: JsonOption = False,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Follow every tick until Ctrl-C (JSON: one document per line).")] = False,
) -> None:
    """Each governed user's weight, dominant resource and share, and per resource her
    demand / allocation / limit, from the daemon's latest tick. With --json: the state
    document, and its age_s and stale (see _with_staleness)."""
    path = _state_path(config, state)
    doc = _read(path, named=state is not None)
    if not watch:
        emit_json(_with_staleness(doc)) if as_json else _print_shares(doc)
        return
    try:
        _watch(path, doc, as_json)
    except KeyboardInterrupt:
        pass


def _with_staleness(doc: dict, now_unix_s: float | None = None) -> dict:
    """The state document as ``shares --json`` prints it: its own fields unchanged, then
    :func:`_staleness_fields`."""
    return {**doc, **_staleness_fields(doc, now_unix_s)}


def _staleness_fields(doc: dict, now_unix_s: float | None = None) -> dict:
    """``{"age_s": float, "stale": bool}`` of a state document, as ``shares --json`` and
    ``explain --json`` print them: ``age_s`` is seconds since its tick on this clock (3 decimals;
    negative when the tick's time is ahead of this clock) and ``stale`` is
    :func:`governor.service.state.staleness`, what the shares table flags STALE."""
    from governor.service.state import staleness

    age_s, stale = staleness(doc, now_unix_s)
    return {"age_s": round(age_s, 3), "stale": stale}


def _watch(path: Path, doc: dict, as_json: bool) -> None:
    """Re-read state.json every half tick: JSON prints each new tick once, and the same tick
    again when it turns stale (the daemon stopped: a script learns it, not silence); the table
    is redrawn every time (its staleness note ages)."""
    from contextlib import nullcontext

    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    from governor.cli.views import shares_table, summary_line

    def view(d: dict):
        return Group(Text(summary_line(d)), shares_table(d))

    if as_json:
        shown = _with_staleness(doc)
        print(json.dumps(shown), flush=True)
    with nullcontext() if as_json else Live(view(doc), auto_refresh=False, console=_console()) as live:
        last = doc["tick"]
        while True:
            time.sleep(max(0.2, doc["interval_s"] / 2))
            doc = _read(path, fresh=False)  # this poll's open has the daemon write every tick
            if not as_json:
                live.update(view(doc), refresh=True)
                continue
            now = _with_staleness(doc)
            if doc["tick"] != last or now["stale"] != shown["stale"]:
                print(json.dumps(now), flush=True)
                shown = now
            last = doc["tick"]


@app.command()
def explain(
    user: Annotated[str, typer.Argument(metavar="USER", help="Login name or uid.")],
    config: ConfigOption = None,
    state: StateOption = None,
    as_json: JsonOption = False,
) -> None:
    """Why USER gets what she gets: her demand, dominant resource, weighted share, and each
    limit with its reason, from the daemon's latest tick. A stale tick (too old, or ahead of
    this clock) is said first, in the line the shares table opens with (its STALE note). With
    --json: ``user`` (her entry in the state document), ``explanation`` (the lines), and the
    tick's ``age_s`` and ``stale`` (see _staleness_fields)."""
    from governor.cli.views import explain_lines, find_user, summary_line

    doc = _read(_state_path(config, state), named=state is not None)
    try:
        entry = find_user(doc, user)
    except KeyError as exc:
        fail(exc.args[0])
    lines = explain_lines(doc, entry)
    now_unix_s = time.time()  # one clock for the flag and its note
    staleness = _staleness_fields(doc, now_unix_s)
    if as_json:
        emit_json({"user": entry, "explanation": lines, **staleness})
    else:  # shares' summary line: one copy of the STALE wording (views.summary_line) and rule (state.staleness)
        print("\n".join(([summary_line(doc, now_unix_s)] if staleness["stale"] else []) + lines))


@app.command()
def restore(
    config: ConfigOption = None,
    snapshot: Annotated[Path | None, typer.Option("--snapshot", help="Snapshot file; default originals.json in $RUNTIME_DIRECTORY or /run/drfgov.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Restore even while a drfgov run holds the instance lock.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Put back every slice's original limits from the snapshot the daemon keeps, and delete the
    governor's traffic shaping (the unit's ExecStopPost; refused while `drfgov run` is running,
    which restores on stop). It needs no valid policy: --config only sets the memory margin.
    No snapshot at the default path is success (nothing to restore); a --snapshot FILE that is
    not there, or is not a snapshot, is bad input (exit 2, nothing touched); the daemon's own
    snapshot that is not one is a host failure (exit 1)."""
    from governor.config.policy import MemorySafety, load_policy
    from governor.enforce import EnforceError, make_backend
    from governor.service.daemon import snapshot_path_in
    from governor.service.runtime import InstanceLock, default_runtime_dir
    from governor.service.snapshot import SnapshotError, load_snapshot, remove_snapshot, restore_snapshot, save_snapshot

    path = snapshot if snapshot is not None else snapshot_path_in(default_runtime_dir())
    if snapshot is not None and not os.path.lexists(snapshot):  # a typo must not report every limit restored
        fail(f"--snapshot {snapshot}: no such file; without --snapshot, restore reads "
             f"{snapshot_path_in(default_runtime_dir())} (absent there: nothing to restore)")
    holder = InstanceLock(path.parent).holder()
    if holder is not None and not force:
        fail(f"drfgov run (pid {holder}) is running and restores its limits when it stops "
             f"(systemctl stop drfgov); use --force to restore now anyway", EXIT_FAILED)
    margin = MemorySafety().margin_bytes
    if config_path(config) is not None:
        try:
            margin = load_policy(config_path(config))[0].memory.margin_bytes
        except InputError as exc:
            print(f"drfgov: warning: {exc}; restoring with the default memory margin", file=sys.stderr)
    try:
        found = load_snapshot(path)
    except SnapshotError as exc:
        if snapshot is not None:  # a file she named is input: refused before anything is touched
            fail(f"--snapshot {exc}")
        shaping_errors = _remove_shaping()  # the daemon's own snapshot is damaged: a host failure; do what can be done
        for error in shaping_errors:
            print(f"drfgov: error: could not remove traffic shaping: {error}", file=sys.stderr)
        fail(str(exc), EXIT_FAILED)
    backend, backend_error = None, None
    if found is not None:
        try:
            backend, _ = make_backend(found.backend)
        except ValueError:  # an unknown name: the file is at fault
            backend_error = (f"{path}: backend: expected cgroupfs, cgroupfs-v1, cgroupfs-mixed, systemd, systemd-v1 "
                             f"or dry-run, got {found.backend!r:.60}")
            if snapshot is not None:
                fail(f"--snapshot {backend_error}")  # input: before anything is touched
        except EnforceError as exc:
            backend_error = f"backend {found.backend} from {path}: {exc}"
    shaping_errors = _remove_shaping()
    if backend_error is not None:
        fail(backend_error, EXIT_FAILED)
    restored, failed, notes = [], {}, []
    if found is not None:
        restored, failed = restore_snapshot(found, backend, margin, notes)
        if failed:
            save_snapshot(path, found.backend, {uid: found.originals[uid] for uid in failed})
        else:
            remove_snapshot(path)
    if as_json:
        emit_json({"snapshot": str(path), "restored": restored, "failed": {str(k): v for k, v in failed.items()},
                   "notes": notes, "shaping_errors": shaping_errors})
    else:
        if found is None:
            print(f"nothing to restore: no {path} (the daemon stopped cleanly, or never wrote a limit)")
        else:
            print(f"restored the original limits of {len(restored)} slice(s)" + (f": {', '.join(restored)}" if restored else ""))
        for note in notes:
            print(f"drfgov: warning: {note}")
        for error in failed.values():
            print(f"drfgov: error: could not restore {error} (kept in {path})")
        for error in shaping_errors:
            print(f"drfgov: error: could not remove traffic shaping: {error}")
    if failed or shaping_errors:
        raise typer.Exit(EXIT_FAILED)


def _remove_shaping() -> list[str]:
    """Delete whatever traffic shaping carries the governor's handles (root only: without
    CAP_NET_ADMIN there is none of ours to see, and none could have been made)."""
    if os.geteuid() != 0:
        return []
    from governor.shaping.shaper import remove_all

    try:
        return remove_all()
    except Exception as exc:  # noqa: BLE001 - pyroute2 can fail in many ways; report, do not trace
        return [str(exc)]


@app.command()
def doctor(config: ConfigOption = None, as_json: JsonOption = False) -> None:
    """Check that this host can be governed: cgroup v2, user.slice controllers, PSI, systemd,
    cron and at jobs in user slices, disks, NICs, the state, history and metrics textfile directories as
    check-config judges them — each failing check with a fix."""
    from rich.table import Table

    from governor.cli.views import markup_safe
    from governor.service.doctor import run_checks

    checks = run_checks(_policy(config))
    failed = any(c.status == "fail" for c in checks)
    if as_json:
        emit_json({"ok": not failed, "checks": [c.to_json() for c in checks]})
    else:
        table = Table("check", "status", "detail", "fix")
        style = {"ok": "green", "warn": "yellow", "fail": "bold red"}
        for c in checks:
            table.add_row(markup_safe(c.name), f"[{style[c.status]}]{markup_safe(c.status)}[/]", markup_safe(c.detail),
                          markup_safe(c.fix))  # paths and messages shown as written: a state_path with [/x] crashed it
        _console().print(table)
    if failed:
        raise typer.Exit(EXIT_FAILED)


__all__ = ["EXIT_FAILED", "EXIT_USAGE"]
