"""``drfgov top`` in a real terminal (tmux: send-keys, capture-pane): the users by weighted
share, the saturated resource flagged, a new tick shown when state.json changes, and ``q``
ends it with the terminal's mode given back. Outside a terminal: one line, exit 2."""

import shutil
import subprocess
import time
import uuid

import pytest

from governor.service.state import write_state
from tests.cli.conftest import _installed_drfgov
from tests.unit.test_metrics import document


def tmux_binary() -> str:
    found = shutil.which("tmux")
    if not found:
        pytest.fail("tmux is not installed (apt-get install tmux; scripts/run-tests does it)", pytrace=False)
    return found


@pytest.fixture
def tmux():
    """``tmux(*args)`` on a server of its own (-L), killed after the test."""
    socket_name = f"drfgov-test-{uuid.uuid4().hex[:8]}"

    def run(*args, check=True):
        return subprocess.run([tmux_binary(), "-L", socket_name, *args], capture_output=True, text=True, timeout=30,
                              check=check)

    yield run
    run("kill-server", check=False)


def screen(tmux) -> str:
    return tmux("capture-pane", "-p", "-t", "top").stdout


def wait_screen(tmux, predicate, timeout_s=30.0) -> str:
    end = time.monotonic() + timeout_s
    while True:
        text = screen(tmux)
        if predicate(text):
            return text
        assert time.monotonic() < end, f"screen never showed it:\n{text}"
        time.sleep(0.2)


def test_top_shows_users_by_weighted_share_refreshes_and_quits_on_q(tmux, tmp_path):
    state = tmp_path / "state.json"
    doc = document(time_unix_s=time.time(), tick=41)
    write_state(state, doc)
    tmux("new-session", "-d", "-s", "top", "-x", "200", "-y", "40",
         # the pane's own size, not COLUMNS/LINES the test's environment may hold (rich prefers them)
         f"env -u COLUMNS -u LINES {_installed_drfgov()} top --state {state}; echo EXITED $?; "
         "stty -a | tr ' ;' '\\n\\n' | grep -x -e -echo -e echo -e icanon -e -icanon | tr '\\n' ' '; echo; sleep 30")
    text = wait_screen(tmux, lambda t: "tick 41" in t and "alice" in t and "press q to quit" in t)
    rows = [line for line in text.splitlines() if "alice" in line or "bob" in line]
    assert [("bob" in row) for row in rows] == [True, False], text  # bob 0.75 before alice 0.25
    assert "cpu SATURATED" in text and "memory SATURATED" not in text
    assert "press q to quit" in text
    bob = rows[0]
    assert "0.750" in bob and "memory" in bob  # weighted share, dominant resource
    assert "cpu" in rows[1].split("alice", 1)[1]  # alice is held back on the CPU

    doc["tick"] = 42
    doc["time_unix_s"] = time.time()
    doc["users"][0]["weighted_share"] = 0.9  # alice now leads
    write_state(state, doc)
    text = wait_screen(tmux, lambda t: "tick 42" in t)
    rows = [line for line in text.splitlines() if "alice" in line or "bob" in line]
    assert "alice" in rows[0] and "0.900" in rows[0], text

    tmux("send-keys", "-t", "top", "q")
    text = wait_screen(tmux, lambda t: "EXITED" in t and "icanon" in t)
    assert "EXITED 0" in text and "Traceback" not in text
    assert "press q to quit" not in text  # the alternate screen is gone: the shell's own again
    assert "icanon echo" in text or "echo icanon" in text, text  # the terminal's mode given back (stty -a)


def test_top_outside_a_terminal_is_one_line_and_exit_2(tmp_path):
    state = tmp_path / "state.json"
    write_state(state, document(time_unix_s=time.time()))
    out = subprocess.run([_installed_drfgov(), "top", "--state", str(state)], capture_output=True, text=True,
                         timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 2
    assert out.stderr == "drfgov: error: drfgov top needs a terminal; in a script use: drfgov shares --watch --json\n"


def test_top_without_state_says_so(tmp_path):
    """A --state file she named that is not there is her input's mistake (exit 2); none at the
    policy's state_path is the daemon not running (exit 1)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"state_path: {tmp_path}/none.json\n")
    for args, code in ((["--state", str(tmp_path / "none.json")], 2), (["--config", str(policy)], 1)):
        out = subprocess.run([_installed_drfgov(), "top", *args], capture_output=True, text=True, timeout=60,
                             stdin=subprocess.DEVNULL)
        assert out.returncode == code and "no such file: drfgov run is not running here" in out.stderr, out.stderr


def test_text_from_the_state_is_shown_as_written_never_read_as_markup():
    """An error text or a name holding ``[/x]`` or ``[red]`` is shown verbatim (rich markup
    would raise MarkupError on a closing tag nothing opened: a traceback instead of the table)."""
    from rich.console import Console

    from governor.cli.views import shares_table, top_table

    doc = document()
    doc["users"][0]["error"] = "cannot write [/x] cpu.max: [bold]no[/bold]"
    doc["users"][1]["name"] = "b[red]ob[/]"
    for table in (top_table(doc), shares_table(doc)):
        console = Console(width=400, record=True, color_system=None)
        console.print(table)
        text = console.export_text()
        assert "(error: cannot write [/x] cpu.max: [bold]no[/bold])" in text, text
        assert "b[red]ob[/]" in text, text
