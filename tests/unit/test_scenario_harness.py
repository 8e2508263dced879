"""The scenario tier's pure parts, on the host: expectations, tolerances, reactions in ticks,
units, the declared scenarios and the policy the tier's daemon is given."""

from pathlib import Path

import pytest

from governor.config.policy import load_policy
from monitors.model import DEFAULT_MAX_UID, OVERFLOW_UID
from tests.scenarios.basepolicy import base_policy
from tests.scenarios.catalog import SCENARIOS
from tests.scenarios.daemon import TickRecord, merged, render_policy
from tests.scenarios.expect import expected_drf
from tests.scenarios.meter import Reading, rates_between
from tests.scenarios.safety import memory_events
from tests.scenarios.spec import CPU_LOOP, DIRECT_READER, Phase, Scenario, User, grower
from tests.scenarios.verdict import (
    Reaction, compare, held_ticks, interval_use, memory_capped, reaction_ticks, spike_ticks, within,
)
from tests.scenarios.workloads import workload_argv

DISK = "disk:254:16"
MiB = 2**20
CAP = {"cpu": 2.0, "memory": 1.7e9, DISK: 1.0}
ONES = {"cpu": 1.0, "memory": 1.0, "io": 1.0}
MIXED = {"cpu": {"cpu": 2.0, "memory": 1e6}, "reader": {"cpu": 0.16, "memory": 1e6, DISK: 1.0},
         "mixed": {"cpu": 1.16, "memory": 2e6, DISK: 1.0}}


def test_issue_14_mixed_users_expectation_follows_the_disk_not_an_equal_cpu_split():
    exp = expected_drf(CAP, MIXED, {u: ONES for u in MIXED})
    assert exp.allocation["reader"][DISK] == pytest.approx(0.5)
    assert exp.allocation["mixed"][DISK] == pytest.approx(0.5)
    assert exp.allocation["mixed"]["cpu"] == pytest.approx(0.58)
    assert exp.allocation["cpu"]["cpu"] == pytest.approx(2.0 - 0.58 - 0.08)
    assert exp.contended == {"cpu", DISK}
    assert exp.dominant == {"cpu": "cpu", "reader": DISK, "mixed": DISK}


def test_weight_2_moves_the_disk_split_and_the_cpu_that_follows_it():
    weights = {"cpu": ONES, "reader": ONES, "mixed": {"cpu": 2.0, "memory": 2.0, "io": 2.0}}
    exp = expected_drf(CAP, MIXED, weights)
    assert exp.allocation["mixed"][DISK] == pytest.approx(2 / 3)
    assert exp.allocation["mixed"]["cpu"] == pytest.approx(1.16 * 2 / 3)


def test_per_resource_weights_weigh_each_resource_on_its_own():
    # io weight 2 alone: her weighted share is max(cpu share / 1, disk share / 2) = 0.58·x, the
    # reader's x: x_mixed = x_reader / 0.58, and together they fill the disk
    weights = {"cpu": ONES, "reader": ONES, "mixed": {"cpu": 1.0, "memory": 1.0, "io": 2.0}}
    exp = expected_drf(CAP, MIXED, weights)
    assert exp.allocation["mixed"][DISK] == pytest.approx(1 / 1.58)


def test_uncontended_users_get_their_demand():
    exp = expected_drf(CAP, {"a": {"cpu": 0.5}, "b": {"cpu": 0.7}}, {"a": ONES, "b": ONES})
    assert exp.allocation["a"]["cpu"] == pytest.approx(0.5) and exp.allocation["b"]["cpu"] == pytest.approx(0.7)
    assert exp.contended == frozenset()


def test_within_uses_the_tolerance_or_the_noise_floor_whichever_is_larger():
    assert within(1.15, 1.0, 0.15, 2.0) and not within(1.16, 1.0, 0.15, 2.0)
    assert within(0.03, 0.01, 0.15, 2.0)  # 0.02 core of 2: noise floor
    assert not within(0.04, 0.01, 0.15, 2.0)


def test_compare_checks_dominant_and_significant_contended_resources_only():
    exp = expected_drf(CAP, MIXED, {u: ONES for u in MIXED})
    measured = {u: dict(a) for u, a in exp.allocation.items()}
    measured["cpu"]["memory"] = 5e8  # far off, but memory is neither contended nor her dominant resource
    measured["reader"]["cpu"] = 0.16  # twice her 0.08: contended, but 4% of the CPU is not a significant holding
    measured["mixed"]["cpu"] = 0.96
    out = {(c.user, c.resource): c for c in compare(exp.allocation, measured, CAP, exp.contended, exp.dominant, 0.15)}
    assert out[("cpu", "memory")].ok and not out[("cpu", "memory")].checked
    assert out[("reader", "cpu")].contended and not out[("reader", "cpu")].checked
    assert out[("reader", DISK)].checked and out[("reader", DISK)].ok
    assert not out[("mixed", "cpu")].ok
    assert out[("mixed", "cpu")].error_pct == pytest.approx(100 * (0.96 - 0.58) / 0.58)


def reading(t, usec, mem=0, rbytes=0, wbytes=0):
    return Reading(t, usec, mem, {"254:16": (rbytes, wbytes)})


def test_rates_are_cores_and_fractions_of_the_disk_time():
    disks = {"254:16": (20.0 * 2**20, 10.0 * 2**20)}
    use = rates_between(reading(0.0, 0, 1), reading(2.0, 3_000_000, 7, 20 * 2**20, 5 * 2**20), disks)
    assert use["cpu"] == pytest.approx(1.5)
    assert use[DISK] == pytest.approx(0.5 + 0.25)
    assert use["memory"] == 7


def records(cores_per_tick, start_tick=10):
    """TickRecords one second apart whose cgroup "u" used the given cores in each interval."""
    out, usec = [TickRecord(start_tick, 0.0, {}, {"u": reading(0.0, 0)})], 0
    for i, cores in enumerate(cores_per_tick, 1):
        usec += int(cores * 1e6)
        out.append(TickRecord(start_tick + i, float(i), {}, {"u": reading(float(i), usec)}))
    return out


def test_reaction_is_the_first_tick_from_which_use_stays_in_band():
    intervals = interval_use(records([0.1, 0.5, 1.0, 0.7, 1.0, 1.0, 1.0, 1.0]), "u", {})
    ticks, seconds = reaction_ticks(intervals, 10, 0.0, "cpu", 1.0, 0.15, 2.0)
    assert ticks == 5 and seconds == 5.0  # tick 13 is in band but tick 14 falls out


def test_reaction_in_the_first_interval_is_one_tick_and_never_is_none():
    intervals = interval_use(records([1.0] * 4), "u", {})
    assert reaction_ticks(intervals, 10, 0.0, "cpu", 1.0, 0.15, 2.0)[0] == 1
    assert reaction_ticks(interval_use(records([0.2] * 8), "u", {}), 10, 0.0, "cpu", 1.0, 0.15, 2.0) == (None, None)


def test_after_a_stop_more_of_a_resource_nobody_else_wants_is_reached_not_missed():
    # a reader whose DRF share of an uncontended disk is 0.9 reads all of it once the other stops
    intervals = interval_use(records([0.4, 1.08, 0.95, 1.06, 0.99, 1.0, 1.0]), "u", {})
    assert reaction_ticks(intervals, 10, 0.0, "cpu", 0.9, 0.15, 2.0)[0] == 5  # in band only from 0.99 on
    assert reaction_ticks(intervals, 10, 0.0, "cpu", 0.9, 0.15, 2.0, at_least=True)[0] == 2
    assert reaction_ticks(interval_use(records([0.4, 0.5, 0.6, 0.6]), "u", {}), 10, 0.0, "cpu", 0.9, 0.15, 2.0,
                          at_least=True) == (None, None)  # below is still a miss


def test_missed_ticks_count_in_ticks_not_in_records():
    recs = records([1.0] * 6)
    del recs[2]  # the harness did not see tick 12
    assert reaction_ticks(interval_use(recs, "u", {}), 10, 0.0, "cpu", 1.0, 0.15, 2.0)[0] == 1


def test_a_memory_reaction_counts_the_ticks_the_kernel_held_her_back():
    r = Reaction("late", "start", "memory", 8e8, 9, 9.0, 4, 20, (), held_ticks=2)
    assert r.delay_ticks == 2 and r.ok
    assert not Reaction("late", "start", "memory", 8e8, 12, 12.0, 4, 20, (), held_ticks=5).ok
    assert not Reaction("late", "start", "memory", 8e8, None, None, 4, 20, (), held_ticks=0).ok
    assert Reaction("a", "stop", "cpu", 1.0, 2, 2.0, 2, 20, ()).delay_ticks == 2


def test_held_ticks_count_intervals_below_the_band_with_the_kernel_holding_her():
    mib = 2**20

    def use(memory_mib, high=0.0, stall=0.0, throttled=0.0):
        return {"memory": memory_mib * mib, "memory_high_events": high, "memory_stall_fraction": stall,
                "cpu_throttled_fraction": throttled}

    intervals = [(10, 0.0, use(0, high=5)),  # before the event: not counted
                 (11, 1.0, use(100)), (12, 2.0, use(200, high=3)), (13, 3.0, use(300, stall=0.5)),
                 (14, 4.0, use(400, throttled=0.05)), (15, 5.0, use(500, throttled=0.3)),
                 (16, 6.0, use(800, high=9)),  # in band: over memory.high is where she should be
                 (17, 7.0, use(800, high=9))]
    assert held_ticks(intervals, 10, 6, "memory", 800 * mib, 0.25, 1e10) == 3
    assert held_ticks(intervals, 10, 4, "memory", 800 * mib, 0.25, 1e10) == 2


def test_rates_include_what_held_her_back():
    a = Reading(0.0, 0, 0, {}, memory_high_events=3, memory_stall_usec=0, throttled_usec=0)
    b = Reading(2.0, 0, 0, {}, memory_high_events=7, memory_stall_usec=500_000, throttled_usec=1_000_000)
    use = rates_between(a, b, {})
    assert use["memory_high_events"] == 4 and use["memory_stall_fraction"] == 0.25
    assert use["cpu_throttled_fraction"] == 0.5


def test_scenarios_have_unique_uids_so_the_one_daemon_meets_each_user_fresh():
    uids = [u.uid for s in SCENARIOS for u in s.users]
    assert len(uids) == len(set(uids)) and min(uids) >= 1000
    assert max(uids) <= DEFAULT_MAX_UID and OVERFLOW_UID not in uids  # governed under the base policy
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS)


def test_issue_14_scenarios_are_all_declared():
    names = {s.name for s in SCENARIOS}
    assert {"cpu-disk-mixed", "cpu-disk-mixed-weighted", "cpu-idle-starts", "disk-idle-starts", "cpu-user-stops",
            "memory-idle-starts", "memory-two-growers", "memory-three-growers"} <= names
    for s in SCENARIOS:
        if s.name.startswith("memory"):
            assert s.tolerance == 0.25


def test_scenario_rejects_unknown_users_in_a_phase_and_duplicate_uids():
    a = User("a", 60001, (CPU_LOOP,))
    with pytest.raises(ValueError):
        Scenario("x", "x", (a,), (Phase(frozenset({"b"}), settle_s=1),))
    with pytest.raises(ValueError):
        Scenario("x", "x", (a, User("b", 60001, (CPU_LOOP,))), (Phase(frozenset({"a"}), settle_s=1),))


def test_user_weights_and_workload_keys():
    u = User("a", 60001, (DIRECT_READER, CPU_LOOP), {"cpu": 2})
    assert u.weights() == {"cpu": 2.0, "memory": 1.0, "io": 1.0}
    assert u.workload_key() == User("b", 60002, (CPU_LOOP, DIRECT_READER)).workload_key()
    assert u.login == "uid60001" and u.describe() == "O_DIRECT reader + cpu loop"


def test_workload_command_lines():
    assert workload_argv(CPU_LOOP, "/dev/vdb") == ["sh", "-c", "while :; do :; done"]
    assert "iflag=direct" in workload_argv(DIRECT_READER, "/dev/vdb")[2]
    g = workload_argv(grower(2**30, 100 * 2**20), "/dev/vdb")
    assert g[-2:] == [str(2**30), repr(100.0 * 2**20)]
    compile(g[3], "grower", "exec")  # the grower's source is valid Python


def test_policy_overrides_merge_key_by_key():
    base = {"reserve": {"cpu_cores": 0.1, "memory_bytes": 1}, "interval_s": 1.0}
    assert merged(base, {"reserve": {"memory_bytes": 2}}) == {"reserve": {"cpu_cores": 0.1, "memory_bytes": 2},
                                                             "interval_s": 1.0}
    assert base["reserve"]["memory_bytes"] == 1


def test_the_tier_policy_is_one_the_governor_accepts(tmp_path: Path):
    for scenario in SCENARIOS:
        policy = merged(base_policy(SCENARIOS, "vdb", 20 * 2**20, tmp_path), scenario.policy)
        path = tmp_path / "drfgov.yaml"
        path.write_text(render_policy(policy))
        loaded, _ = load_policy(path)
        assert loaded.disks["vdb"].read_bytes_per_s == 20 * 2**20
        for user in scenario.users:
            assert loaded.user_weights[user.login] == user.weight


def test_memory_events_reads_the_kernel_format(tmp_path: Path):
    from cgroups import Cgroup

    (tmp_path / "memory.events").write_text("low 0\nhigh 12\nmax 0\noom 1\noom_kill 1\noom_group_kill 0\n")
    assert memory_events(Cgroup(tmp_path)) == {"low": 0, "high": 12, "max": 0, "oom": 1, "oom_kill": 1,
                                               "oom_group_kill": 0}
    assert memory_events(Cgroup(tmp_path / "gone")) == {}


def test_the_watchdog_speaks_when_a_thread_holds_the_gil():
    """A harness frozen whole (a thread holding the GIL while it waits) still gets its stacks
    printed: faulthandler's C timer needs no GIL, where the Python timer must wait its turn."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import ctypes, tempfile, time
        from pathlib import Path
        from types import SimpleNamespace
        import tests.scenarios.watchdog as w
        w.FROZEN_GRACE_S = 0.5
        empty = tempfile.mkdtemp()
        rig = SimpleNamespace(daemon=None, user_slice=empty, harness=SimpleNamespace(path=empty))
        libc = ctypes.PyDLL(None)  # a PyDLL call keeps the GIL, as vfork does until the exec
        with w.Watchdog("frozen", rig, budget_s=0.5):
            t0 = time.monotonic()
            libc.sleep(3)  # waits in the kernel, GIL held
            print(f"released after {time.monotonic() - t0:.1f} s", flush=True)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[2]).stdout
    held_at = next(n for n, line in enumerate(code.splitlines(), 1) if "libc.sleep" in line)
    assert "Timeout" in out and "released" in out and "=== watchdog: end of dump" in out, out
    # the C timer spoke during the call that held the GIL, and showed the thread inside it
    c_dump = out[out.index("Timeout"):out.index("released")]
    assert f'File "<string>", line {held_at} in <module>' in c_dump, out


def _memory_records(memory_mib, high_mib, saturated=()):
    """TickRecords whose daemon read users a (holder) and s (spiker) at the given MiB each tick,
    and whose harness found a's memory.high at ``high_mib[i]`` (None: max) after tick i."""
    out = []
    for i, ((a, s), high) in enumerate(zip(memory_mib, high_mib)):
        state = {"users": [{"uid": 1, "usage": {"memory": a * MiB}, "reasons": {"memory.high": "why"}},
                           {"uid": 2, "usage": {"memory": s * MiB}}],
                 "saturated": list(saturated) if high is not None else []}
        reading = Reading(float(i), 0, a * MiB, memory_high_bytes=None if high is None else high * MiB)
        out.append(TickRecord(i, float(i), state, {"a": reading}))
    return out


def test_a_never_capped_user_capped_after_a_one_reading_jump_is_caught_with_who_moved():
    names = {1: "a", 2: "s"}
    records = _memory_records([(500, 10), (500, 210), (500, 10), (500, 10)], [None, 480, None, None], ["memory"])
    assert spike_ticks(records, names, "s", 200 * MiB, after_tick=0) == [1]
    (capped,) = memory_capped(records, names, frozenset({"a"}), after_tick=0)
    assert capped.tick == 1 and capped.memory_high_bytes == 480 * MiB and not capped.regrown and capped.contended
    assert "while only s (+200 MiB) moved" in capped.describe() and "memory contended" in capped.describe()
    assert memory_capped(records, names, frozenset({"a"}), after_tick=1) == []


def test_a_cap_after_growth_in_two_readings_is_a_growers_pattern_not_counted():
    names = {1: "a", 2: "s"}
    records = _memory_records([(500, 10), (500, 110), (500, 210)], [None, None, 480])
    assert spike_ticks(records, names, "s", 200 * MiB, after_tick=0) == []  # never read whole in one reading
    (capped,) = memory_capped(records, names, frozenset({"a"}), after_tick=0)
    assert capped.regrown == frozenset({"s"})


def test_a_never_capped_user_whose_slice_was_not_read_is_not_shown_uncapped():
    records = _memory_records([(500, 10), (500, 10)], [None, None])
    records[1] = TickRecord(1, 1.0, records[1].state, {})
    (capped,) = memory_capped(records, {1: "a", 2: "s"}, frozenset({"a"}), after_tick=0)
    assert capped.unread and not capped.regrown and "could not be read after tick 1" in capped.describe()
