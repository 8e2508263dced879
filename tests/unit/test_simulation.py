"""drfgov simulate's parts: the trace format, the event engine's exact timing (including the
overcommit slow-down), and the paper's §7.2 finding."""

import json

import pytest

from governor.offline.simulation.engine import simulate
from governor.offline.simulation.schedulers import parse_scheduler
from governor.offline.simulation.trace import Cluster, Job, load_trace
from governor.config.source import InputError

CLUSTER = Cluster(1, {"cpu": 4.0, "memory": 4.0})


def job(user, tasks, duration, cpu, memory, submit=0.0, repeat=False):
    return Job(submit, user, tasks, duration, (cpu, memory), repeat)


def test_two_users_share_one_machine_in_two_waves():
    out = simulate(parse_scheduler("drf", ["cpu", "memory"]), CLUSTER, [job("a", 4, 10, 1, 1), job("b", 4, 10, 1, 1)])
    assert out.jobs_completed == 2 and out.mean_response_s == pytest.approx(20.0)
    assert out.tasks_completed == 8 and out.task_events == 16 and out.end_s == pytest.approx(20.0)
    assert out.mean_utilization == pytest.approx({"cpu": 1.0, "memory": 1.0})


def test_drf_gives_the_smaller_dominant_share_the_next_task():
    # a: ⟨1 cpu, 0.5 mem⟩ tasks, b: ⟨0.5, 1⟩; equal dominant shares → 8/3 tasks each on ⟨4, 4⟩
    out = simulate(parse_scheduler("drf", ["cpu", "memory"]), CLUSTER,
                   [job("a", 100, 10, 1, 0.5), job("b", 100, 10, 0.5, 1)], horizon_s=5.0, sample_s=1.0)
    shares = {u: s[-1] for u, s in out.series.dominant_share.items()}
    assert abs(shares["a"] - shares["b"]) <= 0.25 + 1e-9  # within one task's dominant share


def test_an_overcommitted_machine_slows_down_as_modelled():
    # slots:2 puts two ⟨1 cpu, 2 mem⟩ tasks on a ⟨2, 2⟩ machine: memory 2× over → rate ¼
    out = simulate(parse_scheduler("slots:2", ["cpu", "memory"]), Cluster(1, {"cpu": 2.0, "memory": 2.0}),
                   [job("a", 1, 10, 1, 2), job("b", 1, 10, 1, 2)])
    assert out.end_s == pytest.approx(40.0) and out.mean_response_s == pytest.approx(40.0)
    same = simulate(parse_scheduler("drf", ["cpu", "memory"]), Cluster(1, {"cpu": 2.0, "memory": 2.0}),
                    [job("a", 1, 10, 1, 2), job("b", 1, 10, 1, 2)])
    assert same.end_s == pytest.approx(20.0)  # DRF runs them one after the other at full speed


def test_repeat_jobs_resubmit_until_the_horizon():
    out = simulate(parse_scheduler("drf", ["cpu", "memory"]), CLUSTER, [job("a", 4, 10, 1, 1, repeat=True)], horizon_s=35)
    assert out.jobs_completed == 3 and out.jobs_completed_by_user == {"a": 3}


def test_every_policy_runs_and_a_task_larger_than_a_machine_is_refused():
    jobs = [job("a", 20, 5, 1, 0.5), job("b", 20, 5, 2, 2, submit=3)]
    for name in ("drf", "asset", "ceei", "cpu-fair", "slots:3"):
        out = simulate(parse_scheduler(name, ["cpu", "memory"]), Cluster(3, {"cpu": 4.0, "memory": 4.0}), jobs)
        assert out.jobs_completed == 2 and out.tasks_completed == 40, name
    with pytest.raises(ValueError, match="more than a whole machine"):
        simulate(parse_scheduler("drf", ["cpu", "memory"]), CLUSTER, [job("a", 1, 1, 8, 1)])
    with pytest.raises(ValueError, match="slots:K"):
        parse_scheduler("slots:0", ["cpu"])
    with pytest.raises(ValueError, match="cpu-fair needs a resource named cpu"):
        parse_scheduler("cpu-fair", ["memory"])


def test_the_papers_72_workload_drf_completes_more_jobs_than_slots_and_cpu_fair():
    trace = load_trace("configs/paper-7.2.jsonl")
    done = {p: simulate(parse_scheduler(p, trace.resources), trace.cluster, trace.jobs, trace.weights,
                        trace.duration_s).jobs_completed for p in trace.policies}
    print(f"\n§7.2 jobs completed in 600 s: {done}")
    assert set(done) == {"drf", "slots:3", "slots:4", "slots:5", "slots:6", "cpu-fair"}
    assert all(done["drf"] > n for p, n in done.items() if p != "drf")


def test_trace_formats_and_their_errors(tmp_path):
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"cluster": {"machines": 2, "capacity": {"cpu": 8, "memory": 6}}, "duration_s": 60}\n'
                     '# a comment\n{"user": "a", "tasks": 3, "duration_s": 5, "demand": {"cpu": 1}}\n')
    trace = load_trace(jsonl)
    assert trace.cluster == Cluster(2, {"cpu": 8.0, "memory": 6.0}) and trace.duration_s == 60
    assert trace.jobs == [Job(0.0, "a", 3, 5.0, (1.0, 0.0), False)]
    csv = tmp_path / "t.csv"
    csv.write_text("submit_s,user,tasks,duration_s,repeat,cpu,memory\n0,a,2,5,true,1,0.5\n")
    assert load_trace(csv).jobs == [Job(0.0, "a", 2, 5.0, (1.0, 0.5), True)]
    for text, message in (
        ('{"user": "a", "tasks": 0, "duration_s": 5, "demand": {"cpu": 1}}\n', "t.jsonl:1: tasks: expected a whole number > 0"),
        ('{"user": "a", "tasks": 2, "duration_s": 5, "demand": {"cpu": 1}, "prio": 1}\n', "t.jsonl:1: prio: unknown job key"),
        ('{"cluster": {"machines": 1, "capacity": {"cpu": 1}}}\n{"user": "a", "tasks": 1, "duration_s": 1, "demand": {"gpu": 1}}\n',
         "t.jsonl:2: demand.gpu: unknown resource; the cluster has: cpu"),
        ('{"user": "a", "tasks": 1, "duration_s": 1, "demand": {"cpu": 1}}\n{"cluster": {"machines": 1, "capacity": {"cpu": 1}}}\n',
         "t.jsonl:2: the header"),
        ("{nope\n", "t.jsonl:1: not JSON"),
    ):
        jsonl.write_text(text)
        with pytest.raises(InputError, match=message):
            load_trace(jsonl)
    csv.write_text("user,tasks\n")
    with pytest.raises(InputError, match="t.csv:1: expected the header"):
        load_trace(csv)


def test_shipped_trace_is_the_papers_workload():
    trace = load_trace("configs/paper-7.2.jsonl")
    assert trace.cluster == Cluster(48, {"cpu": 8.0, "memory": 6.0}) and trace.duration_s == 600
    shapes = sorted({(j.demand, j.tasks, j.repeat) for j in trace.jobs})
    assert shapes == [((1.0, 0.5), 80, True), ((2.0, 2.0), 80, True)]
    assert sum(j.demand == (1.0, 0.5) for j in trace.jobs) == 4 == sum(j.demand == (2.0, 2.0) for j in trace.jobs)
    assert json.loads(open("configs/paper-7.2.jsonl").read().splitlines()[4])["cluster"]["machines"] == 48


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

workloads = st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 12), st.floats(0.5, 20),
                               st.sampled_from([0.5, 1.0, 2.0, 4.0]), st.sampled_from([0.5, 1.0, 3.0]),
                               st.floats(0, 30)), min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(workloads, st.sampled_from(["drf", "asset", "ceei", "cpu-fair", "slots:2", "slots:5"]), st.integers(1, 4))
def test_every_job_finishes_and_resource_checking_policies_never_overcommit(spec, policy, machines):
    jobs = [job(u, n, d, c, m, submit=t) for u, n, d, c, m, t in spec]
    out = simulate(parse_scheduler(policy, ["cpu", "memory"]), Cluster(machines, {"cpu": 4.0, "memory": 3.0}), jobs,
                   sample_s=0.5)
    assert out.jobs_completed == len(jobs) and out.tasks_completed == sum(j.tasks for j in jobs)
    assert out.task_events == 2 * out.tasks_completed
    if policy in ("drf", "asset", "ceei"):
        assert max(max(v) for v in out.series.committed.values()) <= 1 + 1e-9


@pytest.mark.parametrize("flag, repeat", [("1", True), ("TRUE", True), (" yes ", True), ("0", False), ("false", False),
                                          ("No", False)])
def test_a_csv_repeat_is_one_of_the_six_spellings(tmp_path, flag, repeat):
    trace = tmp_path / "t.csv"
    trace.write_text(f"submit_s,user,tasks,duration_s,repeat,cpu\n0,a,2,5,{flag},1\n")
    assert load_trace(trace).jobs[0].repeat is repeat


@pytest.mark.parametrize("flag", ["ture", "2", "y", ""])
def test_a_csv_repeat_of_any_other_text_is_refused_naming_line_and_column(tmp_path, flag):
    """The audit: anything but 1/true/yes read as false, so a typo (ture) silently ran the job once."""
    trace = tmp_path / "t.csv"
    trace.write_text(f"submit_s,user,tasks,duration_s,repeat,cpu\n0,a,2,5,1,1\n0,b,2,5,{flag},1\n")
    with pytest.raises(InputError) as info:
        load_trace(trace)
    assert str(info.value) == f"{trace}:3: repeat: column 5: expected one of 1, 0, true, false, yes, no, got {flag!r}"
