"""Names, paths and messages reach the terminal as written, never read as rich markup (the
audit: a user '[/x]' was a MarkupError traceback in allocate, compare and simulate; 'team[b]'
and 'team[a]' both printed as 'team'; a state_path with '[/x]' crashed doctor's table)."""

import json

NAMES = ("[/x]", "team[b]", "team[a]")


def _problem(tmp_path):
    path = tmp_path / "problem.json"
    path.write_text(json.dumps({"capacity": {"cpu": 9, "mem[/]": 18},
                                "users": {name: {"demand": {"cpu": 1 + i, "mem[/]": 1}} for i, name in enumerate(NAMES)}}))
    return path


def _shown(out, names=(*NAMES, "mem[/]")):
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    for name in names:
        assert name in out.stdout, (name, out.stdout)


def test_allocate_and_compare_show_names_as_written(drfgov, tmp_path):
    _shown(drfgov("allocate", _problem(tmp_path)))
    _shown(drfgov("compare", _problem(tmp_path)), NAMES)


def test_simulate_shows_resource_names_as_written(drfgov, tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps({"cluster": {"machines": 2, "capacity": {"cpu": 4, "[/x]": 4}}, "duration_s": 50}) + "\n"
                     + json.dumps({"submit_s": 0, "user": "team[b]", "tasks": 2, "duration_s": 10,
                                   "demand": {"cpu": 1, "[/x]": 1}}) + "\n")
    out = drfgov("simulate", trace, "-p", "drf")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "[/x] util." in out.stdout and "'[/x]': 4" in out.stdout, out.stdout


def test_doctor_shows_a_state_path_with_brackets_as_written(drfgov, tmp_path):
    policy = tmp_path / "p.yaml"
    # short paths (a cell of the table is not wrapped), judged by "/", never made by doctor
    policy.write_text('state_path: "/drfgov-test-[/x]/state.json"\nhistory: {path: "/drfgov-test-h[b]/history.db"}\n')
    out = drfgov("doctor", "--config", policy)
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr, out.stderr
    assert "/drfgov-test-[/x] is writable" in out.stdout and "/drfgov-test-h[b] is writable" in out.stdout, out.stdout
