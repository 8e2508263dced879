"""``drfgov top``: a full-screen live table of the governed users (rich ``Live``), redrawn
every half tick from the world-readable state.json, until ``q``.

Any user may run it (over ssh too): it only reads state.json. The keyboard is read in cbreak
mode (no echo, no line buffering) and given back as it was on any exit.
"""

from __future__ import annotations

import os
import select
import sys
import termios
import time
import tty
from contextlib import contextmanager
from pathlib import Path

from governor.cli.app import app, fail
from governor.cli.service import EXIT_FAILED, ConfigOption, StateOption, _read, _state_path

#: Keys that quit.
QUIT_KEYS = b"qQ"


@app.command()
def top(config: ConfigOption = None, state: StateOption = None) -> None:
    """Live view: users by weighted share, per resource demand / allocation / limit, who is
    held back, saturated resources highlighted. Refreshes each tick; q quits."""
    path = _state_path(config, state)
    doc = _read(path, named=state is not None)
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        fail("drfgov top needs a terminal; in a script use: drfgov shares --watch --json")
    try:
        _run(path, doc)
    except KeyboardInterrupt:
        pass


def _view(doc: dict, note: str = ""):
    from rich.console import Group
    from rich.text import Text

    from governor.cli.views import printable, summary_line, top_table

    head = Text(summary_line(doc), style="bold")  # printable, as every cell of the table (views)
    foot = Text(printable(f"{len(doc['users'])} user(s), highest weighted share first; yellow: held back by the "
                          f"kernel; press q to quit{note}"), style="dim")  # the note may quote the file as written
    return Group(head, top_table(doc), foot)


def _run(path: Path, doc: dict) -> None:
    from rich.console import Console
    from rich.live import Live

    from governor.service.state import StateError, check_document, read_state

    fd = sys.stdin.fileno()
    with _cbreak(fd), Live(_view(doc), screen=True, auto_refresh=False, console=Console()) as live:
        while True:
            ready, _, _ = select.select([fd], [], [], max(0.2, doc["interval_s"] / 2))
            if ready and any(key in QUIT_KEYS for key in os.read(fd, 64)):
                return
            note = ""
            try:
                doc = check_document(read_state(path, fresh=False), path)  # the daemon writes every tick while polled
            except StateError as exc:  # the daemon restarting: keep the last tick on screen
                note = f" — {exc} ({time.strftime('%H:%M:%S')})"
            live.update(_view(doc, note), refresh=True)


@contextmanager
def _cbreak(fd: int):
    """Keys arrive one at a time without echo; the terminal's mode is restored after."""
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        fail("drfgov top needs a terminal", EXIT_FAILED)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
