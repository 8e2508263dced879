"""``drfgov history``, run as an admin would: the installed command on a database the real
History class wrote (two days, the first aggregated hourly)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest

from governor.service.history import History

USERS = {1000: "alice", 1001: "bob", 1002: "carol"}


def _entry(uid: int, k: int) -> dict:
    """Smooth, different per user: alice CPU-bound and held back by day, bob memory-bound."""
    phase = 2 * math.pi * k / 1440
    cpu = {1000: 3.0 + 2.0 * math.sin(phase), 1001: 0.5, 1002: 0.2 + 0.1 * math.cos(3 * phase)}[uid]
    memory = {1000: 2.0**30, 1001: (6 + 2 * math.sin(phase)) * 2**30, 1002: 2.0**29}[uid]
    usage = {"cpu": cpu, "memory": memory, "disk:8:0": 0.1 * (uid - 999), "net:eth0:tx": 1e7 * (uid - 999)}
    allocation = {r: v * 1.25 for r, v in usage.items()}
    shares = {"cpu": cpu / 8.0, "memory": memory / 2.0**34}
    dominant = max(shares, key=shares.get)
    held = ["cpu"] if uid == 1000 and math.sin(phase) > 0.5 else []
    return {"uid": uid, "name": USERS[uid], "weight": {"cpu": 2.0 if uid == 1000 else 1.0}, "dominant_resource": dominant,
            "dominant_share": shares[dominant], "weighted_share": shares[dominant] / (2.0 if uid == 1000 else 1.0),
            "usage": usage, "demand": {r: v * 1.5 for r, v in usage.items()}, "allocation": allocation, "held": held,
            "limits": {"cpu.max": f"{int(100000 * allocation['cpu'])} 100000" if held else "max 100000"}}


@pytest.fixture(scope="module")
def history_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("history") / "lib" / "history.db"
    h = History(path, retention_days=14, every_s=60)
    now = time.time()
    n = 2 * 1440
    for k in range(n):
        h.record({"time_unix_s": now - (n - k) * 60, "capacity": {"cpu": 8.0, "memory": 2.0**34, "disk:8:0": 1.0,
                                                                  "net:eth0:tx": 1e9},
                  "saturated": [], "users": [_entry(uid, k) for uid in USERS]})
    h.settle(60)
    h.maintain()
    h.close()
    return path


def _error_line(out) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drfgov: error: "), out.stderr
    return lines[0]


def test_summary_table_of_every_user(drfgov, history_db):
    out = drfgov("history", "--db", history_db, "--since", "3d")
    assert out.returncode == 0, out.stderr
    for name in USERS.values():
        assert name in out.stdout
    assert "use / alloc" in out.stdout and "held" in out.stdout
    alice = next(line for line in out.stdout.splitlines() if "alice" in line)
    assert "1000" in alice and "cpu" in alice


def test_json_has_means_that_match_what_was_recorded(drfgov, history_db):
    out = drfgov("history", "alice", "--db", history_db, "--since", "2d", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    [alice] = doc["users"]
    assert alice["name"] == "alice" and alice["uid"] == 1000 and alice["dominant_resource"] == "cpu"
    assert 2800 <= alice["samples"] <= 2880  # two days of minutes, hourly beyond the first
    assert alice["resources"]["cpu"]["usage_mean"] == pytest.approx(3.0, abs=0.1)  # 3 + 2 sin: mean 3
    assert alice["resources"]["cpu"]["demand_max"] == pytest.approx(7.5, rel=0.01)
    assert alice["held_ratio"] == pytest.approx(1 / 3, abs=0.03)  # sin > 0.5 a third of the time
    assert alice["weighted_share_mean"] == pytest.approx(alice["dominant_share_mean"] / 2)
    assert doc["limits"] and all("cpu.max" in change["limits"] for change in doc["limits"])


def test_the_default_database_is_the_policys(drfgov, history_db, tmp_path):
    policy = tmp_path / "drfgov.yaml"
    policy.write_text(f"history: {{path: {history_db}}}\n")
    out = drfgov("history", "bob", "--config", policy, "--since", "6h", "--json")
    assert out.returncode == 0, out.stderr
    assert [u["name"] for u in json.loads(out.stdout)["users"]] == ["bob"]


@pytest.mark.parametrize("args, message", [
    (("--db", "{tmp}/none.db"), "no such file"),
    (("dave", "--db", "{db}"), "dave: no such user in the history (known: alice, bob, carol)"),
    (("--since", "yesterday-ish", "--db", "{db}"), "--since: expected a duration"),
    (("--until", "6x", "--db", "{db}"), "--until: expected a duration"),
    (("--since", "1h", "--until", "2h", "--db", "{db}"), "is not before --until"),
    (("--plot", "{tmp}/out.gif", "--db", "{db}"), "--plot"),
])
def test_bad_input_exits_2_with_one_line(drfgov, history_db, tmp_path, args, message):
    out = drfgov("history", *(a.format(tmp=tmp_path, db=history_db) for a in args))
    assert out.returncode == 2 and message in _error_line(out)
    assert not (tmp_path / "out.gif").exists()


def test_a_range_with_nothing_recorded_exits_1_and_says_what_there_is(drfgov, history_db):
    out = drfgov("history", "--db", history_db, "--since", "2000-01-01", "--until", "2000-01-02")
    assert out.returncode == 1 and "no history between 2000-01-01" in _error_line(out) and "it holds" in out.stderr


def test_plot_is_a_real_png_with_something_drawn(drfgov, history_db, tmp_path):
    image = pytest.importorskip("matplotlib.image")
    png = tmp_path / "alice.png"
    out = drfgov("history", "--db", history_db, "--since", "2d", "--plot", png)
    assert out.returncode == 0, out.stderr
    assert f"plot: {png}" in out.stdout
    pixels = image.imread(png)
    height, width = pixels.shape[:2]
    assert width >= 1000 and height >= 600  # three users, two panels each
    rgb = pixels[..., :3]
    assert rgb.std() > 0.05  # not blank
    # lines in colour, not only black text on white: some pixels are clearly saturated
    saturation = rgb.max(axis=2) - rgb.min(axis=2)
    assert (saturation > 0.3).mean() > 0.002
    # the held-back shading: reddish pixels (red well above green and blue)
    reddish = (rgb[..., 0] > rgb[..., 1] + 0.05) & (rgb[..., 0] > rgb[..., 2] + 0.05)
    assert reddish.mean() > 0.01


@pytest.mark.parametrize("suffix, magic", [(".svg", b"<?xml"), (".pdf", b"%PDF")])
def test_plot_formats_follow_the_file_name(drfgov, history_db, tmp_path, suffix, magic):
    pytest.importorskip("matplotlib")
    path = tmp_path / f"bob{suffix}"
    out = drfgov("history", "bob", "--db", history_db, "--since", "6h", "--plot", path)
    assert out.returncode == 0, out.stderr
    assert path.read_bytes().startswith(magic) and path.stat().st_size > 5000


def test_a_reader_that_may_not_read_is_told_why(history_db):
    """As nobody (uid 65534): exit 2, one line saying the history is root's. The child forks
    from this process with the code already loaded, so the test does not depend on where or
    with which mode the checkout lives (a 0700 clone is unreadable to other users)."""
    import os

    from typer.testing import CliRunner

    from governor.cli.app import app

    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    assert CliRunner().invoke(app, ["history", "--db", str(history_db)]).exit_code == 0  # root reads it; loads the code
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, run the command in-process, report, exit
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            res = CliRunner().invoke(app, ["history", "--db", str(history_db)])
            os.write(w, json.dumps([res.exit_code, res.output + repr(res.exception)]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    code, output = json.loads(data)
    assert code == 2 and "permission denied" in output, output
    assert "Traceback" not in output


def test_a_history_on_a_read_only_filesystem_is_read_as_it_is(drfgov, history_db, tmp_path):
    """A cleanly stopped history under a read-only bind mount: mode=ro alone failed ("unable to
    open database file", exit 2): WAL readers must make a -shm. As root, with a real mount."""
    import os
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount")
    source, view = tmp_path / "src", tmp_path / "ro"
    source.mkdir(mode=0o700)
    view.mkdir()
    shutil.copy(history_db, source / "history.db")  # the fixture's daemon stopped cleanly: no -wal, no -shm
    if subprocess.run(["mount", "--bind", source, view]).returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", view], check=True)
        out = drfgov("history", "--db", view / "history.db", "--since", "3d", "--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        assert doc["read_as_is"] is True and {u["name"] for u in doc["users"]} == set(USERS.values())
        table = drfgov("history", "--db", view / "history.db", "--since", "3d")
        assert table.returncode == 0 and "a writer at the same time is not seen" in table.stdout
        assert sorted(os.listdir(source)) == ["history.db"]
    finally:
        subprocess.run(["umount", view], check=True)


def test_a_users_line_breaks_where_she_was_absent_not_only_where_the_daemon_stopped():
    """The audit: --plot drew straight lines across the hours a user was away, because a gap was
    3 of her own median steps — inflated when she comes and goes. Now: more than ~2 of the
    daemon's recording intervals (its ticks table), or a missing hour among hourly points."""
    from governor.cli.history import _gaps, _recording_step

    ticks = np.arange(0, 3600, 60)
    assert _recording_step(ticks) == 60.0 and _recording_step(ticks[:1]) is None
    # present 0–540, one record missed (a busy lock) at 600, present to 1200, away 1260–1740, back
    t = np.array([*range(0, 600, 60), *range(660, 1260, 60), *range(1800, 2400, 60)])
    ones = np.ones(len(t), dtype=int)
    assert list(_gaps(t, ones, 60.0)) == [int(np.flatnonzero(t == 1800)[0])]
    sporadic = np.array([0, 60, 600, 660, 1500, 1560, 2400, 2460])  # her own median step is 540 s
    assert list(_gaps(sporadic, np.ones(8, dtype=int), 60.0)) == [2, 4, 6]
    hours = np.array([0, 3600, 3 * 3600, 4 * 3600])  # hourly points: the hour 7200 missing
    assert list(_gaps(hours, np.full(4, 60), 60.0)) == [2]


def test_parse_time_forms():
    from governor.cli.history import parse_time

    now = 1_790_000_000.0
    assert parse_time("6h", now, "--since") == now - 6 * 3600
    assert parse_time("1h30m", now, "--since") == now - 5400
    assert parse_time("90s", now, "--since") == now - 90
    assert parse_time("1w", now, "--since") == now - 7 * 86400
    assert parse_time("now", now, "--until") == now
    assert parse_time("@1700000000", now, "--since") == 1_700_000_000
    assert parse_time("2025-06-01T12:00:00+00:00", now, "--since") == 1_748_779_200
    for bad in ("", "6", "h", "-6h", "@x", "@inf", "2025-13-45", "1e400h"):
        with pytest.raises(ValueError, match="--since"):
            parse_time(bad, now, "--since")
    assert np.isfinite(parse_time("2025-06-01", now, "--since"))


def test_plot_without_matplotlib_says_how_to_get_it(history_db, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('No module named matplotlib')\n")
    exe = str(Path(sys.executable).parent / "drfgov")
    out = subprocess.run([exe, "history", "--db", str(history_db), "--plot", str(tmp_path / "x.png")],
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(shadow.parent)})
    assert out.returncode == 1 and "pip install 'drf-governor[plot]'" in _error_line(out)
    assert not (tmp_path / "x.png").exists()


HOSTILE_NAMES = {2001: "[/]x", 2002: "evil\x1b]0;PWNED\x07\x1b[2J", 2003: "[bold red]boss[/]"}


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory):
    """Login names a user may choose (useradd takes them; an LDAP directory takes anything):
    rich markup, and a terminal's title and clear-screen sequences."""
    path = tmp_path_factory.mktemp("hostile") / "history.db"
    h = History(path, retention_days=14, every_s=0, background=False)
    now = time.time() - 600
    for k in range(3):
        h.record({"time_unix_s": now + 60 * k, "capacity": {"cpu": 4.0, "memory": 2.0**33}, "saturated": [],
                  "users": [{**_entry(1000, k), "uid": uid, "name": name, "dominant_resource": "[red]cpu"}
                            for uid, name in HOSTILE_NAMES.items()]})
    h.close()
    return path


def test_names_are_shown_as_written_never_as_markup_or_terminal_codes(drfgov, hostile_db):
    out = drfgov("history", "--db", hostile_db, "--since", "1h")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr  # '[/]x' was a MarkupError
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "[/]x" in out.stdout and "[bold red]boss[/]" in out.stdout  # not styled away
    assert r"evil\x1b]0;PWNED\x07\x1b[2J" in out.stdout
    assert out.stdout.count("[red]cpu") == 3  # the dominant resource too


def test_an_unknown_user_is_told_the_known_names_printable(drfgov, hostile_db):
    out = drfgov("history", "dave", "--db", hostile_db, "--since", "1h")
    line = _error_line(out)
    assert out.returncode == 2 and "dave: no such user" in line
    assert "\x1b" not in out.stderr and r"evil\x1b]0;PWNED\x07\x1b[2J" in line


def test_a_damaged_database_is_one_line_and_exit_2(drfgov, hostile_db, tmp_path):
    """Pages 2 and 3 zeroed (a disk error, a copy cut short): the reader's first look at the
    resources table fails inside the constructor."""
    import shutil

    bad = tmp_path / "bad.db"
    shutil.copyfile(hostile_db, bad)
    with bad.open("r+b") as f:
        f.seek(4096)
        f.write(bytes(8192))
    out = drfgov("history", "--db", bad, "--since", "1h")
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"{bad}: cannot read the history: database disk image is malformed" in _error_line(out)
