"""With --json, every command's error is a document on stdout too (the check-config rule), with
the same one line on stderr and the same exit status (the audit: check-config printed
{"ok": false, ...} on stdout, every other command nothing)."""

import json

import pytest


@pytest.mark.parametrize("args, code", [
    (["check-config", "{missing}"], 2),
    (["allocate", "{missing}"], 2),
    (["compare", "{missing}"], 2),
    (["simulate", "{missing}"], 2),
    (["calibrate", "io", "/dev/shm"], 2),
    (["run", "--dry-run", "--once", "--interval", "nan"], 2),
    (["shares", "--state", "{missing}"], 2),
    (["explain", "alice", "--state", "{missing}"], 2),
    (["restore", "--snapshot", "{missing}"], 2),
    (["doctor", "--config", "{missing}"], 2),
    (["history", "--db", "{missing}"], 2),
])
def test_an_error_with_json_is_a_document_on_stdout(drfgov, tmp_path, args, code):
    missing = str(tmp_path / "missing")
    out = drfgov(*(a.format(missing=missing) for a in args), "--json")
    assert out.returncode == code, (out.stdout, out.stderr)
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1 and line.startswith("drfgov: error: ") and "Traceback" not in out.stderr
    assert len(out.stdout.splitlines()) == 1, out.stdout  # one line: a --watch stream stays JSON lines
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and doc["error"] == line.removeprefix("drfgov: error: ")


def test_without_json_an_error_is_the_stderr_line_alone(drfgov, tmp_path):
    out = drfgov("shares", "--state", tmp_path / "missing")
    assert out.returncode == 2 and out.stdout == "" and out.stderr.startswith("drfgov: error: ")


def test_another_click_on_the_path_does_not_drop_the_json_line(tmp_path):
    """The running command was asked of ``import click``: with a click of its own importable
    beside typer's copy (anything in the environment that brings one), that click knew no
    running command and the JSON line was dropped (the review of the JSON errors)."""
    import os
    import subprocess

    from tests.cli.conftest import REPO, _installed_drfgov, cli_env

    fake = tmp_path / "path" / "click"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("def get_current_context(silent=False):\n    return None\n")
    env = cli_env(tmp_path / "run")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(fake.parent), env.get("PYTHONPATH", "")) if p)
    out = subprocess.run([_installed_drfgov(), "allocate", str(tmp_path / "missing"), "--json"], capture_output=True,
                         text=True, timeout=120, cwd=REPO, env=env)
    assert out.returncode == 2 and json.loads(out.stdout)["ok"] is False, (out.stdout, out.stderr)


# click's own usage errors come before any command runs (fail() never sees them): with --json
# anywhere on the command line they get the same line on stdout, click's text stays on stderr.
USAGE_ERRORS = [
    pytest.param(["compare", "{missing}", "--slots", "0"], "Invalid value for '--slots'", id="min"),
    pytest.param(["allocate", "{missing}", "--bogus"], "No such option: --bogus", id="unknown-option"),
    pytest.param(["allocate"], "Missing argument 'FILE'", id="missing-argument"),
    pytest.param(["run", "--dry-run", "--interval", "abc"], "'abc' is not a valid float", id="bad-type"),
    pytest.param(["calibrate", "io", "--size-mib", "x"], "'x' is not a valid", id="nested-group"),
    pytest.param(["no-such-command"], "No such command", id="unknown-command"),
]


@pytest.mark.parametrize("args, message", USAGE_ERRORS)
def test_a_usage_error_with_json_is_a_document_on_stdout(drfgov, tmp_path, args, message):
    args = [a.format(missing=tmp_path / "missing") for a in args]
    words = 2 if args[0] == "calibrate" else 1  # the command's name: `calibrate --json` is calibrate's error
    for out in (drfgov(*args, "--json"), drfgov(*args[:words], "--json", *args[words:])):  # --json anywhere
        assert out.returncode == 2, (out.stdout, out.stderr)
        assert len(out.stdout.splitlines()) == 1, out.stdout
        doc = json.loads(out.stdout)
        assert doc == {"ok": False, "error": doc["error"]} and message in doc["error"]
        assert f"Error: {doc['error']}" in out.stderr and "Usage: drfgov" in out.stderr  # click's text unchanged
        assert "Traceback" not in out.stderr


@pytest.mark.parametrize("args, message", USAGE_ERRORS)
def test_a_usage_error_without_json_is_click_text_alone(drfgov, tmp_path, args, message):
    out = drfgov(*(a.format(missing=tmp_path / "missing") for a in args))
    assert out.returncode == 2 and out.stdout == "", (out.stdout, out.stderr)
    assert message in out.stderr and "Usage: drfgov" in out.stderr


def test_json_after_double_dash_is_an_argument_not_the_option(drfgov):
    """`--` ends the options: a FILE named `--json` asks for no JSON (here a missing file, a
    plain error on stderr; `--slots 0` a usage error with click's text alone)."""
    out = drfgov("compare", "--slots", "0", "--", "--json")
    assert out.returncode == 2 and out.stdout == "" and "Invalid value for '--slots'" in out.stderr
