"""`drfgov simulate`'s policies: each once (the audit: -p drf -p drf was accepted; the JSON
collapsed the two into one entry and the table said "drf ties with drf"); and its other inputs:
the trace's resources against --capacity, --plot, and an option's mistake blamed on the option."""

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
    assert out.returncode == 2 and out.stderr.startswith(f"drfgov: error: {trace}:1: policies: drf given twice")
    once = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "-p", "asset", "--duration-s", "1", "--json")
    assert once.returncode == 0 and set(json.loads(once.stdout)["policies"]) == {"drf", "asset"}


# -- the trace's resources and the options (the simulate audit of 2026-11-27) ------------------------

JOB = {"submit_s": 0, "tasks": 5, "duration_s": 10}


def _jsonl(path, *lines):
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _error(out) -> str:
    assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, (out.returncode, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0].removeprefix("drfgov: error: ")


def test_capacity_is_matched_to_the_trace_by_name_not_order(drfgov):
    """--capacity memory=6,cpu=8 was refused: "the jobs use resources cpu, memory but the cluster
    has memory, cpu"."""
    swapped = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "--duration-s", "60", "--capacity",
                     "memory=6,cpu=8", "--json")
    assert swapped.returncode == 0, swapped.stderr
    doc = json.loads(swapped.stdout)
    assert doc["cluster"] == {"machines": 48, "capacity": {"cpu": 8, "memory": 6}}
    ordered = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "--duration-s", "60", "--capacity",
                     "cpu=8,memory=6", "--json")
    assert json.loads(ordered.stdout) == doc


def test_capacity_with_other_resources_than_the_trace_names_them_and_blames_the_option(drfgov):
    out = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "--capacity", "gpu=1,cpu=8")
    assert _error(out) == ("--capacity: missing: memory; not in the trace: gpu; "
                           "expected the trace's resources cpu, memory (in any order)")
    out = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "--capacity", "cpu=8", "--json")
    assert json.loads(out.stdout) == {"ok": False, "error": "--capacity: missing: memory; expected the trace's "
                                                           "resources cpu, memory (in any order)"}


def test_without_a_header_the_resources_are_every_one_a_job_names(drfgov, tmp_path):
    """The first job decided them: job 2 naming memory was "unknown resource; the cluster has: cpu"."""
    trace = _jsonl(tmp_path / "nh.jsonl", {**JOB, "user": "a", "demand": {"cpu": 1}},
                   {**JOB, "user": "b", "demand": {"cpu": 1, "memory": 1}})
    out = drfgov("simulate", trace, "-p", "drf", "--machines", "1", "--capacity", "memory=4,cpu=8", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["cluster"]["capacity"] == {"cpu": 8, "memory": 4}
    assert doc["policies"]["drf"]["jobs_completed"] == 2 and doc["policies"]["drf"]["tasks_completed"] == 10
    cpu_only = drfgov("simulate", trace, "-p", "drf", "--machines", "1", "--capacity", "cpu=8")
    assert _error(cpu_only) == "--capacity: missing: memory; expected the trace's resources cpu, memory (in any order)"


def test_a_plot_that_cannot_be_written_is_refused_before_the_simulation(drfgov, tmp_path):
    """--plot /nonexistdir/x.svg ran the whole simulation, then failed writing the plot."""
    (tmp_path / "dir.svg").mkdir()
    for plot, message in ((tmp_path / "none" / "x.svg", f"no directory {tmp_path / 'none'} to write it in"),
                          (tmp_path / "dir.svg", "a directory: expected a file to write the plot in")):
        out = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "--duration-s", "1", "--plot", plot)
        assert _error(out) == f"--plot {plot}: {message}"
    out = drfgov("simulate", "configs/paper-7.2.jsonl", "-p", "drf", "--plot", tmp_path / "none" / "x.svg", "--json")
    assert json.loads(out.stdout)["error"].startswith("--plot ")


def test_a_csv_column_named_twice_is_refused_naming_line_and_column(drfgov, tmp_path):
    """It was "the jobs use resources cpu, cpu but the cluster has cpu"."""
    csv = tmp_path / "c4.csv"
    csv.write_text("submit_s,user,tasks,duration_s,repeat,cpu,cpu\n0,a,5,10,0,1,1\n")
    out = drfgov("simulate", csv, "--machines", "2", "--capacity", "cpu=8")
    assert _error(out) == f"{csv}:1: cpu: column 7: listed twice (first as column 6); expected each column once"
    csv.write_text("submit_s,user,tasks,duration_s,repeat,cpu,tasks\n0,a,5,10,0,1,1\n")  # it overwrote the job's tasks
    out = drfgov("simulate", csv, "--machines", "2", "--capacity", "cpu=8,tasks=1")
    assert _error(out) == f"{csv}:1: tasks: column 7: listed twice (first as column 3); expected each column once"


def test_a_bad_policy_or_capacity_option_is_blamed_on_the_option_not_the_trace(drfgov, tmp_path):
    trace = _jsonl(tmp_path / "s1.jsonl", {"cluster": {"machines": 2, "capacity": {"cpu": 8}}},
                   {**JOB, "user": "a", "demand": {"cpu": 1}})
    assert _error(drfgov("simulate", trace, "-p", "slots:0")) == \
        "--policy: policy 'slots:0': expected slots:K with K a whole number ≥ 1"
    assert _error(drfgov("simulate", trace, "--capacity", "cpu=abc")) == \
        "--capacity: expected RES=AMOUNT[,RES=AMOUNT…] with amounts > 0 and ≤ 1e+18, got 'cpu=abc'"
    assert _error(drfgov("simulate", trace, "--capacity", "cpu=1,cpu=2")) == "--capacity: 'cpu' given twice"
    assert _error(drfgov("simulate", trace, "--machines", str(10**12))) == \
        "--machines: expected a whole number ≤ 100000, got 1000000000000"
    assert _error(drfgov("simulate", trace, "--duration-s", "inf")) == "--duration-s: expected a number ≤ 1e+09, got inf"
    out = drfgov("simulate", trace, "-p", "slots:0", "--json")
    assert json.loads(out.stdout)["error"].startswith("--policy: ")
    in_trace = _jsonl(tmp_path / "p.jsonl", {"cluster": {"machines": 2, "capacity": {"cpu": 8}}, "policies": ["slots:0"]},
                      {**JOB, "user": "a", "demand": {"cpu": 1}})
    assert _error(drfgov("simulate", in_trace)).startswith(f"{in_trace}:1: policies: policy 'slots:0'")


def test_an_empty_capacity_is_refused_not_ignored(drfgov, tmp_path):
    trace = _jsonl(tmp_path / "s1.jsonl", {"cluster": {"machines": 2, "capacity": {"cpu": 8}}},
                   {**JOB, "user": "a", "demand": {"cpu": 1}})
    for args in (["--capacity", ""], ["--capacity", "", "--machines", "1"]):
        assert _error(drfgov("simulate", trace, *args)) == \
            "--capacity: expected RES=AMOUNT[,RES=AMOUNT…] with amounts > 0 and ≤ 1e+18, got ''"


def test_the_traces_own_mistakes_name_its_line_and_field(drfgov, tmp_path):
    """A policy the header names, a task larger than a machine, a weight for nobody and an unknown
    cluster key: each named by line and field (the admin audit of 2026-11-27: the first two had no
    line, the second a Python dict, the last two were ignored)."""
    cluster = {"machines": 2, "capacity": {"cpu": 8, "memory": 6}}
    job = {**JOB, "user": "a", "demand": {"cpu": 1}}
    trace = _jsonl(tmp_path / "p.jsonl", {"cluster": cluster, "policies": ["drf", "fifo"]}, job)
    assert _error(drfgov("simulate", trace)) == \
        f"{trace}:1: policies: unknown policy 'fifo'; expected one of: drf, asset, ceei, cpu-fair, slots:K"
    trace = _jsonl(tmp_path / "big.jsonl", {"cluster": cluster}, job, {**job, "demand": {"cpu": 100}})
    assert _error(drfgov("simulate", trace, "-p", "drf")) == \
        f"{trace}:3: demand: a task of a's job needs cpu=100, memory=0: more than a whole machine (cpu=8, memory=6)"
    trace = _jsonl(tmp_path / "w.jsonl", {"cluster": cluster, "weights": {"a": 2, "zed": 2}}, job)
    assert _error(drfgov("simulate", trace)) == \
        f"{trace}:1: weights.zed: no job of user 'zed' in the trace; its users: a"
    trace = _jsonl(tmp_path / "k.jsonl", {"cluster": {**cluster, "extra": 1}}, job)
    assert _error(drfgov("simulate", trace)) == \
        f"{trace}:1: cluster.extra: unknown cluster key; expected one of: machines, capacity"
