"""The view commands (``--help``, ``shares``, ``explain``) load only what they show (issue 16).

A view answers at once: it reads state.json and prints a table. Each module below costs tens of
milliseconds and megabytes to import and none of them is needed to do that: numpy, scipy and
pyroute2 belong to the daemon and the offline tools; pydantic is what typer ≥ 0.29 coerces
every parameter through (+~100 ms, +14 MiB per command on a 2-core machine: pyproject pins
typer below it); PyYAML and the line-tracking loader are for commands that read an input file
(the views catch :class:`InputError` from :mod:`governor.config.errors`). Each command runs in a fresh interpreter through the console script's entry
point, and the test reads that interpreter's ``sys.modules`` at exit.
"""

import json
import subprocess
import sys

import pytest

from tests.unit.test_views_and_identity import contended_document

from .conftest import REPO

HEAVY = ("numpy", "scipy", "pyroute2", "pydantic", "yaml")
#: What help needs none of: tables are drawn with rich (and typer's rich help imports rich and
#: markdown-it, ~60 ms), so help is click's plain text and rich is imported where a table is drawn.
HELP_HEAVY = HEAVY + ("rich", "markdown_it", "pygments", "sqlite3", "prometheus_client")

# runs drfgov's entry point with ARGV, then prints the heavy modules that got loaded
PROBE = """
import sys
sys.argv = ["drfgov", *ARGV]
from governor.cli import main
try:
    main()
except SystemExit:
    pass
print("LOADED", sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY)), file=sys.stderr)
"""


def loaded_after(*argv: str, heavy: tuple[str, ...] = HEAVY) -> tuple[list[str], subprocess.CompletedProcess]:
    code = PROBE.replace("ARGV", repr(list(argv))).replace("HEAVY", repr(heavy))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    line = [x for x in out.stderr.splitlines() if x.startswith("LOADED ")]
    assert line, out.stderr
    return eval(line[-1][len("LOADED "):]), out


@pytest.fixture(scope="module")
def state_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("state") / "state.json"
    path.write_text(json.dumps(contended_document()))
    return path


@pytest.mark.parametrize("argv", [("--help",), ("shares", "--state", "STATE"), ("shares", "--state", "STATE", "--json"),
                                  ("explain", "alice", "--state", "STATE")], ids=" ".join)
def test_a_view_command_loads_no_heavy_module(argv, state_file):
    loaded, out = loaded_after(*(str(state_file) if a == "STATE" else a for a in argv))
    assert "alice" in out.stdout or argv == ("--help",), out.stdout + out.stderr  # it did its work
    assert loaded == []


@pytest.mark.parametrize("argv", [("shares", "--state", "STATE"), ("explain", "alice", "--state", "STATE")],
                         ids=" ".join)
def test_a_view_loads_none_of_the_state_writer(argv, state_file):
    """The views read state.json: the daemon's writer (:mod:`governor.service.atomic`'s tempfile)
    and its watch for readers (:mod:`governor.service.statereaders`' logging) are none of
    theirs (~5 ms of ``shares``' 125)."""
    loaded, out = loaded_after(*(str(state_file) if a == "STATE" else a for a in argv),
                               heavy=("tempfile", "logging", "governor"))
    assert "alice" in out.stdout, out.stdout + out.stderr
    assert loaded == ["governor"]  # the probe sees the project itself: not vacuous


@pytest.mark.parametrize("argv", [("--help",), ("allocate", "--help"), ("shares", "--help"), ("history", "--help")],
                         ids=" ".join)
def test_help_loads_no_table_library(argv):
    loaded, out = loaded_after(*argv, heavy=HELP_HEAVY)
    assert "Usage: drfgov" in out.stdout, out.stdout + out.stderr
    assert loaded == []


def test_the_probe_sees_a_heavy_module():
    """Not vacuous: ``allocate`` solves with numpy, and the probe says so."""
    loaded, _ = loaded_after("allocate", "configs/paper-example.yaml", "--json")
    assert "numpy" in loaded


def test_the_daemon_loads_no_metrics_library_when_metrics_are_off():
    """prometheus_client and its HTTP listener (asyncio; ~60 ms of a start) only where ``metrics``
    is set; the default policy sets none. The run did its tick: its table names the backend."""
    loaded, out = loaded_after("run", "--dry-run", "--once", heavy=("prometheus_client", "asyncio"))
    assert out.returncode == 0 and "dry-run" in out.stdout + out.stderr, out.stdout + out.stderr
    assert loaded == []
