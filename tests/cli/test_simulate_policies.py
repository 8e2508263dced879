"""`drfgov simulate`'s policies: each once (the audit: -p drf -p drf was accepted; the JSON
collapsed the two into one entry and the table said "drf ties with drf")."""

import json


def test_a_policy_given_twice_is_refused(drfgov, tmp_path):
    for twice in (["-p", "drf", "-p", "drf"], ["-p", "slots:4", "-p", "asset", "-p", "slots:04"]):
        out = drfgov("simulate", "configs/paper-7.2.jsonl", *twice, "--duration-s", "1")
        assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1, out.stderr
        assert "given twice" in out.stderr and "expected each policy once" in out.stderr
    trace = tmp_path / "t.jsonl"
    trace.write_text(json.dumps({"cluster": {"machines": 1, "capacity": {"cpu": 2}}, "policies": ["drf", "drf"]}) + "\n"
                     + json.dumps({"user": "a", "tasks": 1, "duration_s": 1, "demand": {"cpu": 1}}) + "\n")
    out = drfgov("simulate", trace)
    assert out.returncode == 2 and out.stderr.startswith(f"drfgov: error: {trace}: policies: drf given twice")
    once = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "-p", "asset", "--duration-s", "1", "--json")
    assert once.returncode == 0 and set(json.loads(once.stdout)["policies"]) == {"drf", "asset"}
