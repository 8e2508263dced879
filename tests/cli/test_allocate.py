"""`drfgov allocate` through the installed command."""

import json

EXPECTED_PAPER = {
    "users": {
        "A": {"units": 3.0, "allocation": {"cpu": 3.0, "memory": 12.0}, "dominant_resource": "memory",
              "dominant_share": 0.666666666667, "weighted_share": 0.666666666667},
        "B": {"units": 2.0, "allocation": {"cpu": 6.0, "memory": 2.0}, "dominant_resource": "cpu",
              "dominant_share": 0.666666666667, "weighted_share": 0.666666666667},
    },
    "consumed": {"cpu": 9.0, "memory": 14.0},
    "saturated": ["cpu"],
}


def test_json_output_is_exactly_the_documented_document(drfgov):
    out = drfgov("allocate", "configs/paper-example.yaml", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == EXPECTED_PAPER


def test_discrete_reports_integer_units(drfgov):
    out = drfgov("allocate", "configs/weighted-example.yaml", "--discrete", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    units = {name: u["units"] for name, u in doc["users"].items()}
    assert all(isinstance(v, int) for v in units.values()), units
    assert sum(doc["consumed"].values()) > 0


def test_table_output_names_users_resources_and_saturation(drfgov):
    out = drfgov("allocate", "configs/weighted-example.yaml")
    assert out.returncode == 0, out.stderr
    for word in ("A", "B", "C", "cpu", "memory", "dominant", "saturated: cpu"):
        assert word in out.stdout


def test_bad_file_is_one_error_line_exit_2_no_traceback(drfgov, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("capacity: {cpu: 9}\nusers:\n  A: {demand: {cpu: -1}}\n")
    out = drfgov("allocate", bad)
    assert out.returncode == 2
    assert out.stderr.strip() == f"drfgov: error: {bad}:3: users.A.demand.cpu: expected a number ≥ 0, got -1"
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_missing_file_exit_2(drfgov, tmp_path):
    out = drfgov("allocate", tmp_path / "none.yaml")
    assert out.returncode == 2 and "no such file" in out.stderr and "Traceback" not in out.stderr


PAPER_FILE = "capacity: {cpu: 9, memory: 18}\nusers:\n  A: {demand: {cpu: 1, memory: 4}}\n  B: {demand: {cpu: 3, memory: 1}}\n"


def test_allocate_with_another_policy(drfgov, tmp_path):
    problem = tmp_path / "p.yaml"
    problem.write_text(PAPER_FILE)
    doc = json.loads(drfgov("allocate", problem, "--policy", "asset", "--json").stdout)
    assert (doc["users"]["A"]["units"], doc["users"]["B"]["units"]) == (2.52, 2.16)
    ceei = json.loads(drfgov("allocate", problem, "--policy", "ceei", "--json").stdout)
    assert abs(ceei["users"]["A"]["units"] - 45 / 11) < 1e-6
    bad = drfgov("allocate", problem, "--policy", "ceei", "--discrete")  # the options' mistake, not the file's
    assert bad.returncode == 2 and bad.stderr.startswith("drfgov: error: --discrete is DRF's Algorithm 1"), bad.stderr
    both = drfgov("allocate", problem, "--policy", "bogus", "--discrete")  # the unknown policy is named first
    assert both.returncode == 2 and both.stderr.startswith("drfgov: error: --policy: unknown policy 'bogus'")
    unknown = drfgov("allocate", problem, "--policy", "lottery")
    assert unknown.returncode == 2 and "expected one of: drf, asset, ceei, slots, cpu-fair" in unknown.stderr
    # the option's mistake, not the file's (the CLI audit of 2026-11-27: "p.yaml: unknown policy")
    assert unknown.stderr.startswith("drfgov: error: --policy: unknown policy 'lottery'"), unknown.stderr
    slots = drfgov("allocate", problem, "--slots", "7")  # was silently ignored: the policy is drf
    assert slots.returncode == 2 and slots.stderr.strip() == "drfgov: error: --slots: only with --policy slots (the policy is drf)"
    assert drfgov("allocate", problem, "--policy", "slots", "--slots", "7").returncode == 0


def test_compare_shows_every_policy_and_the_properties(drfgov, tmp_path):
    problem = tmp_path / "p.yaml"
    problem.write_text(PAPER_FILE)
    doc = json.loads(drfgov("compare", problem, "--json").stdout)
    assert list(doc) == ["drf", "asset", "ceei", "slots", "cpu-fair"]
    assert all(p["holds"] for p in doc["drf"]["properties"].values())
    assert doc["ceei"]["properties"]["strategy-proofness"]["holds"] is False
    table = drfgov("compare", problem)
    assert table.returncode == 0 and "ceei violates strategy-proofness: B reporting" in table.stdout


def test_simulate_the_papers_workload_with_a_plot(drfgov, tmp_path):
    plot = tmp_path / "p.svg"
    out = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "-p", "slots:4", "--plot", plot, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["cluster"]["machines"] == 48 and list(doc["policies"]) == ["drf", "slots:4"]
    assert doc["policies"]["drf"]["jobs_completed"] > doc["policies"]["slots:4"]["jobs_completed"]
    assert plot.read_text().lstrip().startswith("<?xml") and "<svg" in plot.read_text()
    table = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "-p", "cpu-fair")
    assert "drf completes the most jobs" in table.stdout


def test_simulate_errors_are_one_clear_line(drfgov, tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("submit_s,user,tasks,duration_s,repeat,cpu,memory\n0,a,2,5,false,1,0.5\n")
    out = drfgov("simulate", csv)
    assert out.returncode == 2 and "no cluster" in out.stderr and "--machines" in out.stderr
    ok = drfgov("simulate", csv, "--machines", "2", "--capacity", "cpu=4,memory=4", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["policies"]["drf"]["jobs_completed"] == 1
    loop = tmp_path / "loop.jsonl"
    loop.write_text('{"cluster": {"machines": 1, "capacity": {"cpu": 1}}}\n'
                    '{"user": "a", "tasks": 1, "duration_s": 1, "demand": {"cpu": 1}, "repeat": true}\n')
    never = drfgov("simulate", loop)
    assert never.returncode == 2 and "never end" in never.stderr
    bad = drfgov("simulate", csv, "--machines", "2", "--capacity", "cpu=4,memory=4", "-p", "lottery")
    assert bad.returncode == 2 and "unknown policy 'lottery'" in bad.stderr and "Traceback" not in bad.stderr


def test_compare_at_its_bounds_answers_and_says_how_far_it_searched(drfgov, tmp_path):
    """200 users × 32 resources: the most compare takes (beyond: exit 2, tests/cli/hostile.py)."""
    resources = [f"r{j}" for j in range(31)] + ["cpu"]
    users = {f"u{i}": {"demand": {r: 1 + (i * 7 + j) % 5 for j, r in enumerate(resources)}, "weight": 1 + i % 3}
             for i in range(200)}
    problem = tmp_path / "p.json"
    problem.write_text(json.dumps({"capacity": {r: 5000 for r in resources}, "users": users}))
    out = drfgov("compare", problem, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["drf"]["properties"]["strategy-proofness"]["searched"] == {"tried": 400, "possible": 200 * 32 * 12}
    assert all(p["holds"] for name, p in doc["drf"]["properties"].items())
    table = drfgov("compare", problem)
    assert "400 of 76,800 misreports tried per policy" in table.stdout


def test_more_allocated_than_there_is_a_repeated_capacity_and_a_plot_of_no_known_kind_are_refused_first(drfgov, tmp_path):
    """The hostile-input audit's small ones: ``allocated`` summing past a capacity was taken, a
    resource given twice in --capacity kept its last amount, and --plot x.txt failed only after
    the whole simulation."""
    problem = tmp_path / "p.yaml"
    problem.write_text("capacity: {cpu: 9}\nusers:\n  A: {demand: {cpu: 1}, allocated: {cpu: 5}}\n"
                       "  B: {demand: {cpu: 1}, allocated: {cpu: 5}}\n")
    out = drfgov("allocate", problem)
    assert out.returncode == 2 and out.stderr.strip() == (
        f"drfgov: error: {problem}:4: users.B.allocated.cpu: the users' allocations reach 10 here, over the capacity 9")
    csv = tmp_path / "t.csv"
    csv.write_text("submit_s,user,tasks,duration_s,repeat,cpu\n0,a,2,5,false,1\n")
    twice = drfgov("simulate", csv, "--machines", "2", "--capacity", "cpu=4,cpu=8")
    assert twice.returncode == 2 and "'cpu' given twice" in twice.stderr
    plot = drfgov("simulate", csv, "--machines", "2", "--capacity", "cpu=4", "--plot", tmp_path / "x.txt")
    assert plot.returncode == 2 and "expected a file name ending in .png, .svg, .pdf" in plot.stderr
    assert "Traceback" not in twice.stderr + plot.stderr + out.stderr
