"""The files the daemon writes are judged before they are touched (governor/service/ownfiles.py):
the audit of 2026-11-27 — state_path aimed at the policy file had it replaced by state JSON,
even in a dry run; a text file as history.path was chmod-ed 0600 before SQLite refused it."""

import json
import os
import sqlite3
import stat

import pytest

from governor.config.metrics import MetricsExport
from governor.service.history import History
from governor.service.ownfiles import ForeignFile, check_ours, foreign_file
from governor.service.state import write_state

STATE = {"version": 1, "time_unix_s": 1795000000.0, "tick": 1, "interval_s": 1.0, "mode": "dry-run",
         "backend": "dry-run", "policy_file": "p.yaml", "capacity": {"cpu": 1.0}, "saturated": [], "users": [],
         "network_error": None}


def listing(directory):
    return sorted(os.listdir(directory))


@pytest.fixture
def files(tmp_path):
    """One file of each kind a policy might name by mistake, and drfgov's own."""
    made = {}
    made["policy"] = tmp_path / "drfgov.yaml"
    made["policy"].write_text(f"state_path: {tmp_path}/state.json\n")
    made["yaml"] = tmp_path / "other.yaml"
    made["yaml"].write_text("a: 1\n")
    made["text"] = tmp_path / "imp.txt"
    made["text"].write_text("precious\n")
    made["json"] = tmp_path / "package.json"
    made["json"].write_text('{"name": "x", "version": "1.0"}\n')
    made["binary"] = tmp_path / "blob"
    made["binary"].write_bytes(b"\x7fELF\x00\x01")
    made["empty"] = tmp_path / "empty"
    made["empty"].write_bytes(b"")
    made["directory"] = tmp_path / "adir"
    made["directory"].mkdir()
    made["symlink"] = tmp_path / "link"
    made["symlink"].symlink_to(made["text"])
    made["state"] = tmp_path / "state.json"
    write_state(made["state"], STATE)
    made["old-state"] = tmp_path / "old-state.json"  # the standard encoder's spacing, as early drfgovs wrote it
    made["old-state"].write_text(json.dumps(STATE) + "\n")
    made["snapshot"] = tmp_path / "originals.json"
    made["snapshot"].write_text(json.dumps({"version": 1, "backend": "cgroupfs", "slices": {}}, indent=1))
    made["history"] = tmp_path / "history.db"
    History(made["history"], retention_days=1, every_s=0, background=False).close()
    made["sqlite"] = tmp_path / "app.db"
    db = sqlite3.connect(made["sqlite"])
    db.execute("CREATE TABLE accounts (id INTEGER)")
    db.commit()
    db.close()
    made["textfile"] = tmp_path / "drfgov.prom"
    made["textfile"].write_text("# HELP drfgov_ticks_total Ticks run\n# TYPE drfgov_ticks_total counter\n")
    made["node-textfile"] = tmp_path / "node.prom"
    made["node-textfile"].write_text("# HELP node_thing A thing\nnode_thing 1\n")
    return made


@pytest.mark.parametrize("kind, accepted", [
    ("state", {"state", "old-state", "empty"}),
    ("history", {"history", "empty"}),
    ("textfile", {"textfile", "empty"}),
])
def test_only_drfgovs_own_file_of_its_kind_or_an_empty_one_is_accepted(files, kind, accepted):
    for name, path in files.items():
        why = foreign_file(kind, path, str(files["policy"]))
        assert (why is None) == (name in accepted), (kind, name, why)
    assert foreign_file(kind, files["policy"].parent / "not-there") is None


@pytest.mark.parametrize("name, said", [
    ("policy", "it is the policy file): point state_path elsewhere"),
    ("yaml", "it is a YAML file, 5 bytes): point state_path elsewhere or move the file away"),
    ("text", "it is a text file, 9 bytes)"),
    ("json", "it is a JSON document of another kind)"),
    ("binary", "it is binary data, 6 bytes)"),
    ("directory", "it is a directory)"),
    ("symlink", "it is a symlink to "),
    ("snapshot", "it is drfgov's snapshot of original limits): point state_path elsewhere"),
    ("history", "it is a drfgov history database)"),
    ("sqlite", "it is an SQLite database of something else (tables: accounts))"),
    ("textfile", "it is drfgov's metrics textfile)"),
])
def test_the_refusal_names_the_file_what_it_is_and_the_fix(files, name, said):
    why = foreign_file("state", files[name], str(files["policy"]))
    assert why.startswith(f"{files[name]} exists and is not a drfgov state document (") and said in why, why
    with pytest.raises(ForeignFile, match=r"^state_path: "):
        check_ours("state", files[name], str(files["policy"]))


def test_a_history_of_another_format_is_refused_saying_which(tmp_path):
    path = tmp_path / "history.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE samples (t INTEGER)")
    db.execute("PRAGMA user_version = 3")
    db.commit()
    db.close()
    assert "a drfgov history of format 3, this drfgov writes format 2" in foreign_file("history", path)


def test_an_unfinished_creation_is_ours_when_empty_and_refused_saying_so_when_not(tmp_path):
    path = tmp_path / "history.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE resources (id INTEGER PRIMARY KEY, name TEXT)")
    db.execute("CREATE TABLE samples (t INTEGER)")
    db.commit()
    assert foreign_file("history", path) is None
    db.execute("INSERT INTO samples VALUES (1)")
    db.commit()
    db.close()
    why = foreign_file("history", path)
    assert "whose creation was interrupted (format 0) yet holding rows" in why and "format 0, this drfgov" not in why


def test_judging_a_history_makes_nothing_beside_it_idle_or_open(files, tmp_path):
    """Read only: a read-only SQLite connection would make -wal and -shm (check-config must not)."""
    before = listing(tmp_path)
    assert foreign_file("history", files["history"]) is None
    assert foreign_file("history", files["sqlite"]) is not None
    assert listing(tmp_path) == before
    live = History(files["history"], retention_days=1, every_s=0, background=False)  # the daemon running
    try:
        live.record({**STATE, "users": [{"uid": 1000, "name": "a", "weight": {"cpu": 1.0}, "usage": {"cpu": 0.5},
                                         "demand": {"cpu": 0.5}, "allocation": {"cpu": 0.5}}]})
        during = listing(tmp_path)
        assert foreign_file("history", files["history"]) is None
        assert listing(tmp_path) == during
    finally:
        live.close()


def test_the_state_writer_leaves_a_file_that_is_not_a_state_document_as_it_is(files):
    for name in ("policy", "yaml", "history", "directory"):
        path = files[name]
        before = path.read_bytes() if path.is_file() else None
        with pytest.raises(ForeignFile, match="state_path: .* exists and is not a drfgov state document"):
            write_state(path, STATE)
        assert (path.read_bytes() if path.is_file() else None) == before
    write_state(files["old-state"], {**STATE, "tick": 2})  # an earlier state.json is replaced
    assert json.loads(files["old-state"].read_text())["tick"] == 2


def test_a_text_file_as_the_history_is_refused_and_keeps_its_mode_and_content(files):
    path = files["text"]
    path.chmod(0o644)
    with pytest.raises(ForeignFile, match=r"history.path: .*imp.txt exists and is not a drfgov history database "
                                          r"\(it is a text file, 9 bytes\)"):
        History(path, retention_days=1, every_s=0, background=False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644 and path.read_text() == "precious\n"
    assert not (path.parent / "imp.txt-wal").exists() and not (path.parent / "imp.txt-shm").exists()


def test_an_earlier_history_is_opened_again_and_kept_private(files):
    path = files["history"]
    path.chmod(0o644)  # as an older drfgov left it
    History(path, retention_days=1, every_s=0, background=False).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_textfile_writer_and_its_removal_at_stop_leave_another_file_alone(files):
    from governor.service.metrics import Metrics

    other = files["node-textfile"]
    metrics = Metrics(MetricsExport(None, None, str(other)))
    with pytest.raises(ForeignFile, match="metrics.textfile: .* exists and is not drfgov's metrics textfile"):
        metrics.write_textfile()
    with pytest.raises(ForeignFile):
        metrics.remove_textfile()
    assert other.read_text() == "# HELP node_thing A thing\nnode_thing 1\n"
    ours = Metrics(MetricsExport(None, None, str(files["textfile"])))
    ours.write_textfile()
    assert files["textfile"].read_text().startswith("# HELP drfgov_")
    ours.remove_textfile()
    assert not files["textfile"].exists()
