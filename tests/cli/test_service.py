"""`drfgov run`, `shares`, `explain`, `restore` and `doctor` through the installed command,
on this host: real /proc measurements of real processes under other uids (dry run — this
host has no per-user cgroup v2), real signals, real files. Enforcement on a real kernel is
proven in tests/vm and tests/systemd_vm."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cgroups import NotCgroup2
from cgroups.mount import find_cgroup2
from tests.cli.conftest import REPO, _installed_drfgov, cli_env
from tests.fakecgroup import fake_cgroup

BUSY = "import time\nend = time.time() + {s}\nwhile time.time() < end: pass\n"
UID = 50001


@pytest.fixture
def busy_user():
    """A CPU-bound process owned by uid 50001 (no passwd entry: shown as uid50001)."""
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    proc = subprocess.Popen(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", python, "-c", BUSY.format(s=60)])
    time.sleep(0.3)
    yield proc
    proc.kill()
    proc.wait()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far (proc(5), fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_run_once_dry_run_measures_real_use_from_proc(drfgov, busy_user):
    before, t0 = cpu_seconds(busy_user.pid), time.monotonic()
    out = drfgov("run", "--dry-run", "--once", "--interval", "1", "--json")
    own = (cpu_seconds(busy_user.pid) - before) / (time.monotonic() - t0)  # what the loop got meanwhile
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["mode"] == "dry-run" and doc["backend"] == "dry-run" and doc["tick"] == 2
    user = next(u for u in doc["users"] if u["uid"] == UID)
    # a whole core on an idle host, less on a loaded one: what /proc says it had, same window
    assert 0.5 * own < user["usage"]["cpu"] <= min(1.1, 2 * own) and user["dominant_resource"] == "cpu", (own, user["usage"])
    assert user["limits"]["cpu.weight"] == 100


def test_run_once_prints_the_plan_as_a_table(drfgov, busy_user):
    out = drfgov("run", "--dry-run", "--once", "--interval", "0.5")
    assert out.returncode == 0, out.stderr
    assert "uid50001" in out.stdout and "dry run: nothing was written" in out.stdout


def test_daemon_publishes_state_reloads_and_stops_on_sigterm(drfgov, busy_user, tmp_path):
    config = tmp_path / "drfgov.yaml"
    good = (f"mode: dry-run\ninterval_s: 0.3\nstate_path: {tmp_path}/run/state.json\n"
            f"history: {{path: {tmp_path}/lib/history.db, every_s: 0}}\n")
    config.write_text(good)
    daemon = subprocess.Popen([_installed_drfgov(), "run", "--config", str(config)], cwd=REPO,
                              stderr=subprocess.PIPE, text=True, env=cli_env(tmp_path / "run"))
    try:
        state = tmp_path / "run" / "state.json"
        wait_for(lambda: state.exists() and json.loads(state.read_text())["tick"] >= 3)
        shares = drfgov("shares", "--config", config, "--json")
        assert shares.returncode == 0 and any(u["uid"] == UID for u in json.loads(shares.stdout)["users"])
        table = drfgov("shares", "--state", state)
        assert "uid50001" in table.stdout and "demand / alloc / limit" in table.stdout
        explained = drfgov("explain", str(UID), "--config", config)
        assert explained.returncode == 0 and "Dominant resource: cpu" in explained.stdout
        unknown = drfgov("explain", "nobody-here", "--config", config)
        assert unknown.returncode == 2 and "is not governed right now" in unknown.stderr

        config.write_text(good + "weights: {default: -1}\n")
        daemon.send_signal(signal.SIGHUP)
        tick = json.loads(state.read_text())["tick"]
        wait_for(lambda: json.loads(state.read_text())["tick"] >= tick + 3)  # still ticking
        assert daemon.poll() is None
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0, err
    assert "reload failed, keeping the last good policy" in err and "weights.default: expected a number > 0" in err
    assert "SIGTERM: stopping" in err and "stopped after" in err
    assert (tmp_path / "lib" / "history.db").stat().st_size > 0
    assert "Traceback" not in err


def test_state_is_written_for_its_readers_and_shares_gets_the_latest_tick(drfgov, busy_user, tmp_path):
    """Issue 16: unread, state.json is not rewritten each tick; `drfgov shares` opening it has
    the daemon write the latest tick at once, and while it is read it is written every tick."""
    config = tmp_path / "drfgov.yaml"
    config.write_text(f"mode: dry-run\ninterval_s: 0.3\nstate_path: {tmp_path}/run/state.json\n"
                      f"history: {{path: {tmp_path}/lib/history.db}}\n")
    daemon = subprocess.Popen([_installed_drfgov(), "run", "--config", str(config)], cwd=REPO,
                              stderr=subprocess.PIPE, text=True, env=cli_env(tmp_path / "run"))
    state = tmp_path / "run" / "state.json"
    try:
        wait_for(lambda: state.exists())
        first = replaced_key(state)  # a stat is not a read
        time.sleep(2.0)  # ~6 ticks, nobody reading
        assert replaced_key(state) == first
        out = drfgov("shares", "--config", config, "--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["tick"] >= 5, doc["tick"]  # the file held tick 1 (unread, not due for 10 s): rewritten on the open
        inodes = set()
        for _ in range(6):  # read now: written every tick
            inodes.add(replaced_key(state))
            time.sleep(0.3)
        assert len(inodes) >= 3, inodes  # unread, it would be one file throughout
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0 and "Traceback" not in err, err


def test_run_says_which_cgroup_interface_governs_this_host_and_why(drfgov, tmp_path):
    """v2 where its controllers are, else v1 (issue 18), else a refusal that says how to dry-run."""
    from governor.service.cgroupkind import choose

    kind = choose()
    if kind.kind == "v2":
        pytest.skip("this host has a usable cgroup v2: enforcement is tested in the VM tiers")
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"state_path: {tmp_path}/state.json\nhistory: {{path: {tmp_path}/history.db}}\n"
                      "cgroup_v1: {parent: drfgov-cli-test-none}\nreserve: {cpu_cores: 0, memory_bytes: 0}\n")
    out = drfgov("run", "--once", "--config", policy)
    if kind.kind == "proc":
        assert out.returncode == 1 and "cannot enforce" in out.stderr and "--dry-run --once" in out.stderr
    else:
        assert out.returncode == 0, out.stderr
        assert "cgroup v1 slices under drfgov-cli-test-none/user.slice" in out.stderr
        assert "cpu and memory are bound to cgroup v1 hierarchies" in out.stderr and "cgroupfs-v1" in out.stderr


def test_shares_without_a_daemon_says_so(drfgov, tmp_path):
    """No state at the policy's state_path: the daemon is not running — not her mistake, exit 1."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"state_path: {tmp_path}/run/state.json\n")
    for command in (["shares"], ["explain", "alice"], ["top"]):
        out = drfgov(*command, "--config", policy)
        assert out.returncode == 1 and out.stderr == (f"drfgov: error: {tmp_path}/run/state.json: no such file: drfgov "
                                                      "run is not running here, or has not finished its first ticks "
                                                      "(see: systemctl status drfgov)\n"), (command, out.stderr)


@pytest.mark.parametrize("kind, said", [
    ("missing", "no such file: drfgov run is not running here, or has not finished its first ticks "
                "(see: systemctl status drfgov)"),
    ("not json", "not JSON (line 1, column 2: Expecting property name enclosed in double quotes): "
                 "not a drfgov state document"),
    ("not a state document", "not a drfgov state document (version 1): version: expected 1, got nothing"),
    ("users not a list", "not a drfgov state document (version 1): users: expected a list of users, got 5"),
])
def test_a_bad_state_file_named_with_state_is_bad_input_exit_2(drfgov, tmp_path, kind, said):
    """The file she named is her input: missing, not JSON or not a state document, it is the one
    rule's clear line and exit 2 (it was exit 1, as for a daemon that is not running)."""
    path = tmp_path / "state.json"
    if kind == "not json":
        path.write_text("{bad\n")
    elif kind == "not a state document":
        path.write_text('{"users": 5}')
    elif kind == "users not a list":
        path.write_text('{"version": 1, "users": 5}')
    for command in (["shares"], ["shares", "--watch"], ["explain", "alice"], ["top"]):
        out = drfgov(*command, "--state", path)
        assert out.returncode == 2 and out.stdout == "", (command, out.stdout, out.stderr)
        assert out.stderr == f"drfgov: error: {path}: {said}\n", (command, out.stderr)


def test_a_bad_state_file_at_the_policys_state_path_is_the_daemons_failure_exit_1(drfgov, tmp_path):
    """The policy's state_path holds the daemon's output, not her input: exit 1, the same line."""
    path = tmp_path / "state.json"
    path.write_text('{"users": 5}')
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"state_path: {path}\n")
    out = drfgov("shares", "--config", policy)
    assert out.returncode == 1 and out.stderr == (f"drfgov: error: {path}: not a drfgov state document (version 1): "
                                                  "version: expected 1, got nothing\n"), out.stderr


def test_restore_puts_snapshot_limits_back_into_cgroup_files(drfgov, tmp_path):
    slice_dir = fake_cgroup(tmp_path / "cg", cpu_weight="300\n", cpu_max="20000 100000\n")
    snapshot = tmp_path / "originals.json"
    limits = {"cpu.max": "max 100000", "cpu.weight": 77, "memory.low": 0, "memory.high": None, "memory.max": None, "io.max": {}}
    snapshot.write_text(json.dumps({"version": 1, "backend": "cgroupfs",
                                    "slices": {"1000": {"cgroup": str(slice_dir), "limits": limits}}}))
    out = drfgov("restore", "--snapshot", snapshot, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["restored"] == ["user-1000.slice"]
    assert (slice_dir / "cpu.weight").read_text().strip() == "77"
    assert (slice_dir / "cpu.max").read_text().strip() == "max 100000"
    assert not snapshot.exists()
    again = drfgov("restore")  # the default snapshot path (the runtime directory's): absent
    assert again.returncode == 0 and again.stdout.startswith("nothing to restore")


def test_restore_of_a_snapshot_given_but_not_there_is_an_error(drfgov, tmp_path):
    """The audit: --snapshot /nonexistent/dir/x.json said "nothing to restore", exit 0: a typo
    after a crash left every limit in place and reported success. Only the default path may be
    absent."""
    out = drfgov("restore", "--snapshot", tmp_path / "no-such-dir" / "originals.json")
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1, (out.stdout, out.stderr)
    assert out.stderr.startswith(f"drfgov: error: --snapshot {tmp_path}/no-such-dir/originals.json: no such file")
    assert drfgov("restore").returncode == 0


def test_restore_needs_only_the_snapshot_not_a_valid_policy(drfgov, tmp_path):
    """The audit: ExecStopPost's restore parsed the policy first; one typo (e.g. after a failed
    reload) and it exited 2, leaving every written limit."""
    slice_dir = fake_cgroup(tmp_path / "cg", cpu_weight="300\n")
    snapshot = tmp_path / "originals.json"
    limits = {"cpu.max": "max 100000", "cpu.weight": 77, "memory.low": 0, "memory.high": None, "memory.max": None, "io.max": {}}
    snapshot.write_text(json.dumps({"version": 1, "backend": "cgroupfs",
                                    "slices": {"1000": {"cgroup": str(slice_dir), "limits": limits}}}))
    policy = tmp_path / "drfgov.yaml"
    policy.write_text("weights:\n  users: {alice: -2}\n")  # a typo
    policy.chmod(0o600)
    out = drfgov("restore", "--snapshot", snapshot, "--config", policy)
    assert out.returncode == 0, out.stderr
    assert "warning" in out.stderr and "restoring with the default memory margin" in out.stderr
    assert (slice_dir / "cpu.weight").read_text().strip() == "77" and not snapshot.exists()


def test_restore_of_a_damaged_snapshot_fails_loudly(drfgov, tmp_path):
    snapshot = tmp_path / "originals.json"
    snapshot.write_text("{not json")
    out = drfgov("restore", "--snapshot", snapshot)
    assert out.returncode == 2 and snapshot.exists() and out.stderr == (
        f"drfgov: error: --snapshot {snapshot}:1: not JSON (column 2: Expecting property name enclosed in double "
        "quotes): expected a drfgov snapshot of original limits (JSON, version 1)\n"), out.stderr


@pytest.mark.parametrize("kind, said", [
    ("list", "expected a JSON object with version, backend and slices, got a list"),
    ("directory", "a directory: expected a drfgov snapshot of original limits (JSON, version 1)"),
    ("not utf-8", "not UTF-8 text (byte 0): expected a drfgov snapshot of original limits (JSON, version 1)"),
    ("empty", "empty: expected a drfgov snapshot of original limits (JSON, version 1)"),
    ("slices a list", "slices: expected an object of uid → slice, got a list"),
    ("bad limits", "slices.1001.limits.cpu.max: expected 'QUOTA PERIOD' such as 'max 100000', got \"abc\""),
    ("unknown backend", "backend: expected cgroupfs, cgroupfs-v1, cgroupfs-mixed, systemd, systemd-v1 or dry-run, "
                        "got 'x'"),
])
def test_a_snapshot_named_on_the_command_line_that_is_not_one_is_bad_input(drfgov, tmp_path, kind, said):
    """The audit of 2026-11-27: exit 1 and Python's words ("'list' object has no attribute
    'get'", "[Errno 21] Is a directory", "'utf-8' codec can't decode…", "Expecting value: line
    1 column 1 (char 0)"). A file named on the command line is input: exit 2, one line naming
    the file, the field and what was expected, and nothing touched."""
    path = tmp_path / "originals.json"
    limits = {"cpu.max": "abc", "cpu.weight": 100, "memory.low": 0, "memory.high": None, "memory.max": None,
              "io.max": {}}
    slice_path = "/sys/fs/cgroup/user.slice/user-1001.slice"
    if kind == "directory":
        path.mkdir()
    else:
        path.write_bytes({"list": b"[]", "not utf-8": b"\xff\xfe", "empty": b"",
                          "slices a list": b'{"version": 1, "backend": "cgroupfs", "slices": []}',
                          "bad limits": json.dumps({"version": 1, "backend": "cgroupfs", "slices": {
                              "1001": {"cgroup": slice_path, "limits": limits}}}).encode(),
                          "unknown backend": b'{"version": 1, "backend": "x", "slices": {}}'}[kind])
    out = drfgov("restore", "--snapshot", path)
    assert out.returncode == 2 and out.stdout == "" and out.stderr == f"drfgov: error: --snapshot {path}: {said}\n", \
        out.stderr
    assert path.exists()


def test_the_daemons_own_snapshot_that_is_not_one_is_a_host_failure_in_one_line(tmp_path):
    """The snapshot at the default path is the daemon's output, not the caller's input: exit 1
    (ExecStopPost's restore), with the same clean words."""
    runtime = tmp_path / "run"
    runtime.mkdir()
    (runtime / "originals.json").write_text("[]")
    out = subprocess.run([_installed_drfgov(), "restore"], capture_output=True, text=True, timeout=60, cwd=REPO,
                         env=cli_env(runtime))
    assert out.returncode == 1 and out.stderr == (
        f"drfgov: error: {runtime}/originals.json: expected a JSON object with version, backend and slices, "
        "got a list\n"), out.stderr


def test_doctor_reports_every_check_and_fails_when_one_fails(drfgov):
    out = drfgov("doctor", "--json")
    doc = json.loads(out.stdout)
    names = [c["name"] for c in doc["checks"]]
    assert names[0] == "cgroup v2" and {"PSI", "systemd", "disks", "NICs", "state directory"} <= set(names)
    failed = [c for c in doc["checks"] if c["status"] == "fail"]
    assert doc["ok"] is (not failed) and out.returncode == (1 if failed else 0)
    assert all(c["fix"] for c in failed)
    try:
        find_cgroup2()
        usable = True
    except NotCgroup2:
        usable = False
    assert (doc["checks"][0]["status"] == "ok") is usable


def test_doctor_fails_a_textfile_directory_with_check_configs_words(drfgov, tmp_path):
    """The audit's leftovers: check-config and run refuse metrics.textfile's directory (world-
    writable, under a file), but doctor judged the state and history directories only and said
    nothing of it. Now its "textfile directory" check fails with check-config's reason and fix."""
    from tests.textfiledirs import textfile_dirs

    shared, private, a_file, outputs = textfile_dirs(tmp_path)
    policy = tmp_path / "p.yaml"
    for directory, judged in ((shared, shared), (shared / "sub", shared), (a_file, a_file)):
        policy.write_text(f"mode: dry-run\nmetrics:\n  textfile: {directory}/drfgov.prom\n{outputs}")
        out = drfgov("doctor", "--config", policy, "--json")
        checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
        textfile = checks["textfile directory"]
        assert out.returncode == 1 and textfile["status"] == "fail", out.stdout
        said = drfgov("check-config", policy).stderr
        assert said.startswith(f"drfgov: error: {policy}:3: metrics.textfile: ") and said.count("\n") == 1, said
        reason, _, fix = said.removeprefix(f"drfgov: error: {policy}:3: ").rstrip("\n").partition("; fix: ")
        assert textfile["detail"] == f"drfgov run refuses it: {reason}", (said, textfile)
        assert textfile["detail"].startswith(f"drfgov run refuses it: metrics.textfile: {judged}: "), textfile
        assert textfile["detail"].count(str(judged)) == 1, textfile  # the directory named once (the fix: apart)
        assert textfile["fix"] == fix or not fix and textfile["fix"] == (f"point metrics.textfile in {policy} at "
                                                                         "a directory only root may write"), said
        assert checks["state directory"]["status"] == checks["history directory"]["status"] == "ok"
    policy.write_text(f"metrics:\n  textfile: {private}/prom/drfgov.prom\n{outputs}")
    checks = {c["name"]: c for c in json.loads(drfgov("doctor", "--config", policy, "--json").stdout)["checks"]}
    assert checks["textfile directory"] == {"name": "textfile directory", "status": "ok",
                                            "detail": f"{private}/prom is writable (will be created)", "fix": ""}
    policy.write_text(outputs)  # no textfile: no such check
    checks = {c["name"] for c in json.loads(drfgov("doctor", "--config", policy, "--json").stdout)["checks"]}
    assert "state directory" in checks and "textfile directory" not in checks


def replaced_key(path):
    """What changes when the daemon replaces ``path`` (inode numbers alone are reused)."""
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns


def wait_for(condition, timeout_s=30.0):
    end = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except (OSError, ValueError):
            pass  # the file is being created
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.1)


def test_run_says_at_once_when_it_cannot_write_its_state(drfgov, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = tmp_path / "p.yaml"
    config.write_text(f"mode: dry-run\nstate_path: {blocker}/run/state.json\n")
    out = drfgov("run", "--config", config)  # a mistake in the policy, found before anything is made
    assert out.returncode == 2 and f"state_path: {blocker}: not a directory" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("kind, said", [
    ("directory", "unreadable state: Is a directory"),
    ("not json", "not JSON (line 1, column 1: Expecting value)"),
    ("not utf-8", "not UTF-8 text (byte 13)"),
    ("huge number", "a number of over 4,300 digits"),
])
def test_a_state_file_that_cannot_be_read_says_why_in_words(drfgov, tmp_path, kind, said):
    """The CLI audit of 2026-11-27: a directory was "IsADirectoryError: [Errno 21] Is a
    directory: 3" (a descriptor's number), the others Python's exception names and advice."""
    path = tmp_path / "state.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "not json":
        path.write_text("nope\n")
    elif kind == "not utf-8":
        path.write_bytes(b'{"version": 1\xff}')
    else:
        path.write_text('{"version": 1, "users": [], "x": ' + "9" * 5000 + "}")
    out = drfgov("shares", "--state", path)
    assert out.returncode == 2 and out.stderr.strip() == f"drfgov: error: {path}: {said}" + (
        "" if kind == "directory" else ": not a drfgov state document"), out.stderr


def test_state_and_config_together_are_refused(drfgov, tmp_path):
    """--state and --config name the same thing two ways: one was silently ignored."""
    for command in (["shares"], ["explain", "1000"], ["top"]):
        out = drfgov(*command, "--config", tmp_path / "p.yaml", "--state", tmp_path / "state.json")
        assert out.returncode == 2 and out.stderr.startswith("drfgov: error: --state: give --config"), out.stderr


def test_explain_on_a_host_where_nobody_is_governed_says_so_in_words(drfgov, tmp_path):
    """Not "(governed: nobody)": nobody is a user's name (uid 65534)."""
    state = tmp_path / "state.json"
    doc = _state_document()
    doc["users"] = []
    state.write_text(json.dumps(doc))
    out = drfgov("explain", "alice", "--state", state)
    assert out.returncode == 2 and out.stderr.strip() == (
        "drfgov: error: 'alice' is not governed right now (no user is governed)"), out.stderr


def test_run_json_without_once_is_refused(drfgov):
    """--json prints the one tick's document of --once; without it, it was silently ignored."""
    out = drfgov("run", "--dry-run", "--json")
    assert out.returncode == 2 and "--json: only with --once" in out.stderr
    assert json.loads(out.stdout)["ok"] is False


def test_version_and_short_help(drfgov):
    from importlib.metadata import version

    out = drfgov("--version")
    assert out.returncode == 0 and out.stdout == f"drfgov {version('drf-governor')}\n"
    for command in (["-h"], ["shares", "-h"], ["calibrate", "io", "-h"]):
        out = drfgov(*command)
        assert out.returncode == 0 and out.stdout.startswith("Usage: drfgov"), (command, out.stderr)


@pytest.mark.parametrize("kind", ["deep", "wrong types", "fifo", "device", "not an object"])
def test_a_state_file_that_is_not_a_state_document_is_refused_in_one_line(drfgov, tmp_path, kind):
    """Given with --state (her own mistake, or a file of someone else's): a traceback, a hang or
    all the memory before (the hostile-input audit of 2026-11-26); one line and exit 2 now (bad input)."""
    import os

    path = tmp_path / "state.json"
    if kind == "deep":
        path.write_text('{"version": 1, "users": [], "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    elif kind == "wrong types":
        path.write_text('{"version": 1, "users": [{"uid": 1000, "name": "alice"}]}')
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    else:
        path.write_text('{"version": 1, "users": [1]}')
    for command in (["shares"], ["explain", "1000"], ["shares", "--json"]):
        out = drfgov(*command, "--state", path)
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "not a" in out.stderr or "unreadable state" in out.stderr, out.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "1e10", "-1", "0.05"])
def test_run_interval_takes_the_policys_interval_rule(drfgov, value):
    """The audit: --interval nan passed click's min=0.1 and busy-looped (deaf to SIGTERM at
    times); inf and 1e10 were an OverflowError traceback. interval_s's rule now: one line, exit 2."""
    out = drfgov("run", "--dry-run", "--once", "--interval", value)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.startswith("drfgov: error: --interval: expected a ") and len(out.stderr.splitlines()) == 1
    assert "number" in out.stderr
    assert "Traceback" not in out.stderr


def _state_document(**changes):
    """A state document as the daemon writes one: one user, her limits in force."""
    user = {"uid": 1000, "name": "alice", "weight": {"cpu": 1.0, "memory": 1.0, "io": 1.0, "net": 1.0},
            "dominant_resource": "cpu", "dominant_share": 0.5, "weighted_share": 0.5,
            "demand": {"cpu": 1.0, "memory": 2**20}, "allocation": {"cpu": 1.0, "memory": 2**20}, "held": [],
            "limits": {"cpu.max": "max 100000", "cpu.weight": 100, "memory.low": 0, "memory.high": None,
                       "memory.max": None, "io.max": {}}, "written": [], "error": None, "classes": {}}
    doc = {"version": 1, "time_unix_s": time.time(), "tick": 3, "interval_s": 1.0, "mode": "dry-run",
           "backend": "dry-run", "policy_file": "<defaults>", "capacity": {"cpu": 2.0, "memory": 2**30},
           "saturated": [], "users": [user], "network_error": None}
    for key, value in changes.items():
        if key.startswith("user_"):
            user[key[5:]] = value
        else:
            doc[key] = value
    return doc


@pytest.mark.parametrize("changes, field", [
    ({"capacity": {"cpu": 2.0, "gpu": 1.0}}, "capacity: unknown resource kind 'gpu'"),
    ({"user_limits": {"cpu.max": "garbage", "cpu.weight": 100, "memory.low": 0, "memory.high": None,
                      "memory.max": None, "io.max": {}}}, "users[0].limits: cpu.max: expected 'QUOTA PERIOD'"),
    ({"time_unix_s": 1e300}, "time_unix_s: expected a number ≤"),
    ({"time_unix_s": float("nan")}, "time_unix_s: expected a finite number ≥ 0, got nan"),
    ({"interval_s": 1e300}, "interval_s: expected a number ≤ 86400"),
    ({"user_demand": {"cpu": float("inf")}}, "users[0].demand: cpu: expected a finite number ≥ 0, got inf"),
    ({"user_dominant_resource": "disk:sda"}, "users[0].dominant_resource: disk resource"),
    ({"user_classes": {"cpu": {"rate_bits_per_s": 1, "ceil_bits_per_s": 2}}}, "users[0].classes: cpu: expected a link"),
])
def test_a_state_document_of_the_right_shape_but_impossible_values_is_refused_in_one_line(drfgov, tmp_path, changes, field):
    """The audit: a capacity 'gpu', a cpu.max "garbage", a time of 1e300 or NaN passed the type
    checks, and shares, explain and top then failed in a view with a traceback. One line now, as
    for any other file that is not a state document, and exit 2: --state names her input."""
    path = tmp_path / "state.json"
    path.write_text(json.dumps(_state_document()))
    assert drfgov("shares", "--state", path).returncode == 0
    assert drfgov("explain", "alice", "--state", path).returncode == 0
    path.write_text(json.dumps(_state_document(**changes)))
    for command in (["shares"], ["explain", "alice"], ["shares", "--json"]):
        out = drfgov(*command, "--state", path)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (command, out.stderr)
        assert "Traceback" not in out.stderr and f"not a drfgov state document (version 1): {field}" in out.stderr, out.stderr


def test_run_refuses_a_state_directory_others_may_write_as_a_policy_mistake(drfgov, tmp_path):
    """check-config refuses it as the policy's error (exit 2); run refused the same directory
    only once set up, exit 1 (the CLI audit of 2026-11-26): now the same, before anything."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    config = tmp_path / "p.yaml"
    config.write_text(f"mode: dry-run\nstate_path: {shared}/state.json\nhistory: {{path: {tmp_path}/lib/h.db}}\n")
    checked, ran = drfgov("check-config", config), drfgov("run", "--config", config)
    assert checked.returncode == ran.returncode == 2, ran.stderr
    assert f"state_path: {shared}" in ran.stderr and "world-writable" in ran.stderr and "Traceback" not in ran.stderr
    assert not (tmp_path / "lib").exists()


def test_shares_json_says_whether_the_state_is_stale_as_the_table_does(drfgov, tmp_path):
    """The audit of 2026-11-27: an hour-old state was flagged STALE in the table but not in
    --json, and one whose tick is in the future (the clock went back, another host's file) was
    never flagged. --json now adds age_s and stale after the document's own fields."""
    for offset_s, stale in ((-3600.0, True), (3600.0, True), (0.0, False)):
        path = tmp_path / "state.json"
        doc = _state_document(time_unix_s=time.time() + offset_s)
        path.write_text(json.dumps(doc))
        out = drfgov("shares", "--state", path, "--json")
        assert out.returncode == 0, out.stderr
        shown = json.loads(out.stdout)
        assert list(shown)[:-2] == list(doc) and {k: shown[k] for k in doc} == doc  # the document unchanged
        assert list(shown)[-2:] == ["age_s", "stale"] and shown["stale"] is stale, (offset_s, shown["age_s"])
        assert abs(shown["age_s"] + offset_s) < 30
        table = drfgov("shares", "--state", path).stdout
        assert ("STALE" in table) is stale, table


def test_explain_json_says_whether_the_state_is_stale_as_shares_json_does(drfgov, tmp_path):
    """The audit of 2026-11-27 (leftovers): explain --json had no age_s or stale, so a script
    asking why alice is capped could not tell an hour-old answer from this tick's."""
    for offset_s, stale in ((-3600.0, True), (3600.0, True), (0.0, False)):
        path = tmp_path / "state.json"
        path.write_text(json.dumps(_state_document(time_unix_s=time.time() + offset_s)))
        out = drfgov("explain", "alice", "--state", path, "--json")
        assert out.returncode == 0, out.stderr
        shown = json.loads(out.stdout)
        assert list(shown) == ["user", "explanation", "age_s", "stale"] and shown["user"]["name"] == "alice"
        assert shown["stale"] is stale and abs(shown["age_s"] + offset_s) < 30, (offset_s, shown["age_s"])
        assert json.loads(drfgov("shares", "--state", path, "--json").stdout)["stale"] is stale


def test_explain_says_a_stale_state_first_in_the_line_the_shares_table_opens_with(drfgov, tmp_path):
    """The audit of 2026-11-27 (leftovers): explain --json said stale, plain explain did not,
    so an admin read an hour-old "why alice is capped" as this tick's. Now it opens with the
    shares table's own first line, STALE note and all (one wording: views.summary_line)."""
    import re

    def ageless(text: str) -> str:  # the two commands run a second or so apart
        return re.sub(r"\d+ s (old|ahead)", r"N s \1", " ".join(text.split()))

    path = tmp_path / "state.json"
    for offset_s, note in ((-3600.0, "— STALE: N s old, is drfgov running?"),
                           (3600.0, "— STALE: its tick is N s ahead of this clock (the clock went back, or another "
                                    "host's file)"),
                           (0.0, None)):
        path.write_text(json.dumps(_state_document(time_unix_s=time.time() + offset_s)))
        out = drfgov("explain", "alice", "--state", path)
        table = drfgov("shares", "--state", path).stdout  # wrapped at 160 columns
        assert out.returncode == 0 and out.stderr == "", out.stderr
        lines = out.stdout.splitlines()
        if note is None:
            assert lines[0] == "alice (uid 1000), weight 1." and "STALE" not in out.stdout + table, out.stdout
            continue
        assert lines[0].startswith("tick 3 at ") and ageless(lines[0]).endswith(note), lines[0]
        assert ageless(lines[0]) in ageless(table), (lines[0], table)
        assert lines[1] == "alice (uid 1000), weight 1.", out.stdout


def test_shares_table_says_a_tick_from_the_future_is_ahead_of_this_clock(drfgov, tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(_state_document(time_unix_s=time.time() + 3600)))
    out = drfgov("shares", "--state", path)
    said = " ".join(out.stdout.split())  # the line is wrapped at 160 columns
    assert out.returncode == 0 and "STALE: its tick is" in said and "s ahead of this clock (the clock went back" in said


def test_a_state_path_or_history_at_a_file_not_drfgovs_is_refused_by_check_config_and_run(drfgov, tmp_path):
    """The audit of 2026-11-27: check-config said OK, then even `run --dry-run` replaced the
    policy file named as its own state_path with state JSON, and made a text file named as
    history.path 0600 before saying "file is not a database (run as root, …)" (as root). Now
    both refuse it, exit 2, naming the field, the file and what it is, and touch nothing."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    policy = tmp_path / "b.yaml"
    precious = tmp_path / "imp.txt"
    precious.write_text("precious\n")
    precious.chmod(0o644)
    other = tmp_path / "other.yaml"
    other.write_text("keep: me\n")
    cases = (
        (f"state_path: {policy}\nhistory:\n  path: {tmp_path}/h2.db\n", "state_path", 1, "the policy file"),
        (f"state_path: {other}\nhistory:\n  path: {tmp_path}/h2.db\n", "state_path", 1, "a YAML file, 9 bytes"),
        (f"state_path: {run_dir}/state.json\nhistory:\n  path: {precious}\n", "history.path", 3,
         "a text file, 9 bytes"),
    )
    for text, field, line, found in cases:
        policy.write_text(text)
        for command in (["check-config", policy], ["run", "--config", policy, "--dry-run", "--interval", "0.5"]):
            out = drfgov(*command)
            assert out.returncode == 2 and f"drfgov: error: {policy}:{line}: {field}: " in out.stderr, \
                (command, out.stderr)
            assert "Traceback" not in out.stderr and "run as root" not in out.stderr
            assert found in out.stderr, out.stderr
            assert policy.read_text() == text
    assert precious.read_text() == "precious\n" and precious.stat().st_mode & 0o777 == 0o644
    assert other.read_text() == "keep: me\n" and not (tmp_path / "h2.db").exists()


def test_an_earlier_state_json_and_history_of_drfgovs_are_taken_again(drfgov, tmp_path):
    policy = tmp_path / "g.yaml"
    policy.write_text(f"mode: dry-run\ninterval_s: 0.3\nstate_path: {tmp_path}/run/state.json\n"
                      f"history: {{path: {tmp_path}/lib/h.db, every_s: 0}}\n")
    for start in range(2):
        if start:
            assert drfgov("check-config", policy).returncode == 0
        daemon = subprocess.Popen([_installed_drfgov(), "run", "--config", str(policy)], cwd=REPO,
                                  stderr=subprocess.PIPE, text=True, env=cli_env(tmp_path / "run"))
        state = tmp_path / "run" / "state.json"
        before = replaced_key(state) if start else None
        try:  # this run's own second tick (the first run left tick 2 or more)
            wait_for(lambda: replaced_key(state) != before and json.loads(state.read_text())["tick"] >= 2)
        finally:
            daemon.send_signal(signal.SIGTERM)
            _, err = daemon.communicate(timeout=30)
        assert daemon.returncode == 0 and "error" not in err.lower(), err
    assert (tmp_path / "lib" / "h.db").stat().st_mode & 0o777 == 0o600
