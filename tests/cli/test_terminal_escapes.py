"""No control character of a state document reaches the terminal (the audit of 2026-11-28).

A ``--state`` file's strings are only type-checked (:func:`governor.service.state.check_document`):
``mode``, ``backend``, ``saturated``, her ``held``, ``reasons`` (knobs and words), ``written``,
``error``, ``network_error``, a name, a link's name (``net:IF:tx`` allows any IF without a blank,
colon or slash), a cpu.max or io.max line split on a character Python calls a blank (``\\x85``,
``\\x1c``). A user who prepares one with ``ESC ] 0;… BEL`` (the window title) or ``ESC [31;1m``
and has root run ``drfgov explain``, ``shares`` or ``top`` on it wrote to root's terminal. Each is
now shown as ``\\xNN`` (:func:`governor.cli.views.printable`), and nothing else of the output moves.
"""

import fcntl
import json
import os
import pty
import re
import select
import struct
import termios
import time
from io import StringIO

from governor.service.state import check_document
from tests.cli.conftest import _installed_drfgov

#: An OSC (window title, ended by BEL), a CSI, its 8-bit form (C1 CSI), NEL, backspace, CR, DEL.
PAYLOAD = "\x1b]0;PWNED\x07\x1b[31;1mRED\x1b[0m\x9b7m\x85\x08\r\x7f"
LINK = "net:\x1b]0;T\x07\x9b1m:tx"  # an interface name of 9 characters, none of them a blank
#: Control characters but the newline that ends a line (and the tab, which none of it prints).
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
GiB = 2**30


def hostile_document() -> dict:
    """A document :func:`check_document` accepts, with PAYLOAD in every string a view shows."""
    limits = {"cpu.max": "1000\x85100000", "cpu.weight": 100, "memory.low": None, "memory.high": 2 * GiB,
              "memory.max": None, "io.max": {"8:0": "rbps=1048576\x1cwbps=max"}}  # shown as written: not all 4 keys
    her = {"uid": 40001, "name": f"eve{PAYLOAD}", "weight": {"cpu": 1.0, "memory": 1.0, "io": 1.0, "net": 1.0},
           "dominant_resource": LINK, "dominant_share": 0.5, "weighted_share": 0.5,
           "demand": {"cpu": 1.5, "memory": GiB, "disk:8:0": 0.5, LINK: 9e8},
           "allocation": {"cpu": 0.5, "memory": GiB, "disk:8:0": 0.5, LINK: 5e8},
           "held": ["cpu", LINK, f"h{PAYLOAD}"], "limits": limits, "planned": {**limits, "cpu.weight": 200},
           "reasons": {"cpu.max": f"reason {PAYLOAD}", "io.max 8:0": f"disk {PAYLOAD}", f"k{PAYLOAD}": f"r{PAYLOAD}"},
           "written": ["cpu.max", f"w{PAYLOAD}"], "error": f"e{PAYLOAD}",
           "classes": {LINK: {"rate_bits_per_s": 5e8, "ceil_bits_per_s": 5e8}}}
    other = {**her, "uid": 40002, "name": f"peer{PAYLOAD}", "dominant_share": 0.25, "weighted_share": 0.25}
    doc = {"version": 1, "time_unix_s": 1795000000.0, "tick": 7, "interval_s": 1.0,  # old: the STALE line too
           "mode": f"mode{PAYLOAD}", "backend": f"backend{PAYLOAD}", "policy_file": f"p{PAYLOAD}",
           "capacity": {"cpu": 2.0, "memory": 8 * GiB, "disk:8:0": 1.0, LINK: 1e9},
           "saturated": ["cpu", LINK, f"x{PAYLOAD}"], "users": [her, other], "network_error": f"n{PAYLOAD}"}
    return check_document(doc, "hostile.json")  # accepted: the views must make it safe


def _write(tmp_path) -> str:
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(hostile_document()))
    return str(path)


def _clean(text: str, what: str) -> None:
    found = CONTROL.search(text)
    assert found is None, f"{what}: {found.group()!r} at {found.start()}:\n{text!r}"


def test_explain_prints_no_control_character(drfgov, tmp_path):
    path = _write(tmp_path)
    for who in ("40001", "40002"):
        out = drfgov("explain", who, "--state", path)
        assert out.returncode == 0, out.stderr
        _clean(out.stdout + out.stderr, f"explain {who}")
        shown = out.stdout
        assert "STALE" in shown and r"mode\x1b]0;PWNED\x07\x1b[31;1mRED\x1b[0m\x9b7m\x85\x08\x0d\x7f" in shown, shown
        for line in (r"reason \x1b]0;PWNED", r"Written this tick: cpu.max, w\x1b]0;PWNED", r"held her back on: cpu, ",
                     r"x\x1b]0;PWNED", r"  k\x1b]0;PWNED", r"disk \x1b]0;PWNED", r"cpu.max = 1000\x85100000",
                     r"rbps=1048576\x1cwbps=max", r"tc class on \x1b]0;T\x07\x9b1m egress", r"Error: e\x1b]0;",
                     r"failed this tick: n\x1b]0;"):
            assert line in shown, (line, shown)


def test_explain_json_stays_the_document(drfgov, tmp_path):
    """--json is not the terminal's text: her entry as the file has it (JSON escapes every
    control character), the explanation as printed."""
    out = drfgov("explain", "40001", "--state", _write(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    _clean(out.stdout, "explain --json")
    shown = json.loads(out.stdout)
    assert shown["user"]["reasons"]["cpu.max"] == f"reason {PAYLOAD}"
    assert any(r"reason \x1b]0;PWNED" in line for line in shown["explanation"]), shown["explanation"]


def test_shares_prints_no_control_character(drfgov, tmp_path):
    out = drfgov("shares", "--state", _write(tmp_path))  # not a terminal: rich adds no escape of its own
    assert out.returncode == 0, out.stderr
    _clean(out.stdout + out.stderr, "shares")
    assert r"mode\x1b]0;PWNED" in out.stdout and r"eve\x1b]0;PWNED" in out.stdout, out.stdout


def test_shares_tells_a_refused_document_printable(drfgov, tmp_path):
    """A message quoting the file (a link's name beside a number no daemon writes) says it as \\xNN."""
    doc = hostile_document()
    doc["capacity"][LINK] = -1.0
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(doc))
    out = drfgov("shares", "--state", path)
    assert out.returncode == 2 and r"net:\x1b]0;T\x07\x9b1m:tx" in out.stderr, out.stderr
    _clean(out.stdout + out.stderr, "refused")


def test_top_and_shares_views_render_no_control_character():
    """top's screen (its summary line, table and foot) and the shares table, drawn without colour:
    every character left is the document's or the table's."""
    from rich.console import Console

    from governor.cli.top import _view
    from governor.cli.views import shares_table

    doc = hostile_document()
    for name, view, shown in (("top", _view(doc, note=f" — {PAYLOAD}"), r"h\x1b]0;PWNED"),  # held, and the note
                              ("shares", shares_table(doc), r"eve\x1b]0;PWNED")):
        console = Console(file=StringIO(), width=400, color_system=None, force_terminal=False)
        console.print(view)
        text = console.file.getvalue()
        _clean(text, name)
        assert shown in text and r"\x1b]0;T\x07\x9b1m" in text and r"rbps=1048576\x1cwbps=max" in text, text


def test_top_on_a_terminal_writes_none_of_the_document_s_escapes(tmp_path):
    """The installed ``drfgov top`` in a pseudo-terminal, as root would run it: rich's own SGR and
    screen sequences, but no OSC (the window title), no BEL, no 8-bit CSI and not the file's CSI."""
    path = _write(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # the child: drfgov top on the pty, the pane's size and not the test's COLUMNS/LINES
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        os.execve(_installed_drfgov(), [_installed_drfgov(), "top", "--state", path], {**env, "TERM": "xterm-256color"})
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 400, 0, 0))
    raw = b""
    end = time.monotonic() + 60
    try:
        while b"press q to quit" not in raw and time.monotonic() < end:
            if select.select([fd], [], [], 0.5)[0]:
                raw += os.read(fd, 65536)
        assert b"press q to quit" in raw, raw[-2000:]
        os.write(fd, b"q")
        while time.monotonic() < end:
            if select.select([fd], [], [], 0.5)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the child is gone
                    break
                if not chunk:
                    break
                raw += chunk
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, raw[-2000:]
    text = raw.decode("utf-8", "replace")
    assert "Traceback" not in text
    assert "\x1b]" not in text and "\x07" not in text and "\x9b" not in text and "\x85" not in text, repr(text)
    assert "\x1b[31;1m" not in text and "PWNED" in text, repr(text)  # rich writes bold first: "1;31"
