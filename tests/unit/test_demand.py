"""Demand from the kernel's evidence: bounded by what it supports, right in direction, quick to
follow a user who starts or stops (governor/control/demand.py)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.control.demand import (
    DemandParams, cpu_evidence, disk_evidence, estimate_demand, memory_evidence, net_evidence,
)
from governor.control.resources import CPU, MEMORY, Resource

DISK = Resource.disk("8:0")
LINK = Resource.link("eth0", "tx")
CAP = {CPU: 2.0, MEMORY: 2.0 * 2**30, DISK: 1.0, LINK: 100e6}
MiB = 2**20


def settle(evidence_per_tick, ticks=12, ceiling=None):
    state = None
    for _ in range(ticks):
        state = estimate_demand(state, evidence_per_tick(state), CAP, ceiling=ceiling)
    return state.demand


def test_a_throttled_thread_demands_one_core_not_the_host():
    """The issue's runaway: one thread held at 0.5 core by cpu.max, throttled the rest of the
    time on one run queue, tick after tick. Its demand is 1 core, not 2 (the CPUs there are)."""
    ev = cpu_evidence(0.5, throttled_cores=0.5, stall_fraction=0.5, capacity_cores=2.0)
    assert ev.held and ev.wanted == pytest.approx(1.0)
    assert settle(lambda _: {CPU: ev}, ticks=50)[CPU] == pytest.approx(1.0)


def test_two_throttled_threads_demand_two_cores():
    # quota 0.5 with two runnable threads: both run queues throttled, 1.5 core-seconds a second
    assert cpu_evidence(0.5, 1.5, 1.0, 2.0).wanted == pytest.approx(2.0)
    assert cpu_evidence(0.5, 3.5, 1.0, 2.0).wanted == 2.0  # never above the CPUs there are


def test_an_uncapped_user_waiting_for_a_cpu_wants_more_than_she_gets():
    ev = cpu_evidence(0.7, throttled_cores=0.0, stall_fraction=0.9, capacity_cores=2.0)
    assert ev.held and ev.wanted == pytest.approx(1.6)
    quiet = cpu_evidence(0.7, throttled_cores=0.0, stall_fraction=0.02, capacity_cores=2.0)
    assert not quiet.held and quiet.wanted == pytest.approx(0.7)  # a little waiting is not being held back


@pytest.mark.parametrize("used, stalled, wanted", [
    (0.5, 1.0, 1.0),  # always waiting on the disk: she would take all of it
    (0.5, 0.95, 0.5 / (0.05 + 0.475)),
    (0.5, 0.0, 0.5),  # at her cap but never waiting: her cap is no constraint
    (0.25, 0.5, 0.25 / (0.5 + 0.125)),
])
def test_disk_demand_by_amdahls_law(used, stalled, wanted):
    ev = disk_evidence({DISK: used}, stalled, {DISK: True})[DISK]
    assert ev.held and ev.wanted == pytest.approx(wanted)


def test_a_disk_user_not_held_back_wants_what_she_uses():
    ev = disk_evidence({DISK: 0.3}, 0.05, {DISK: False})[DISK]
    assert not ev.held and ev.wanted == 0.3


def test_memory_demand_projects_growth_and_keeps_headroom():
    growing = memory_evidence(500 * MiB, 100 * MiB, None, None, None)
    assert growing.wanted == 500 * MiB + 2 * 100 * MiB  # two seconds ahead
    still = memory_evidence(500 * MiB, 0.0, None, None, None)
    assert still.wanted == 500 * MiB + 64 * MiB  # headroom: room to start before the next tick
    held = memory_evidence(400 * MiB, 0.0, 12, None, high_in_force_bytes=400 * MiB)
    assert held.held and held.wanted == 400 * MiB + 64 * MiB
    # over 640 MiB a tenth of it: a raise of 64 MiB would fall inside the 5% band, never written
    held = memory_evidence(8000 * MiB, 0.0, 12, None, high_in_force_bytes=8000 * MiB)
    assert held.wanted == 8800 * MiB


def test_a_grower_held_at_her_memory_high_wants_what_she_wanted_before():
    """The cap hides her growth: held at a memory.high in force, what she wanted the tick
    before stands; without a memory.high of ours holding her, or not held, it does not."""
    held = memory_evidence(600 * MiB, 0.0, 3, None, 600 * MiB, wanted_before_bytes=1400 * MiB)
    assert held.held and held.wanted == 1400 * MiB
    assert memory_evidence(600 * MiB, 0.0, 3, None, 600 * MiB, wanted_before_bytes=100 * MiB).wanted == 664 * MiB
    assert memory_evidence(600 * MiB, 0.0, 0, None, 600 * MiB, wanted_before_bytes=1400 * MiB).wanted == 664 * MiB
    stalled = memory_evidence(600 * MiB, 0.0, None, 0.5, None, wanted_before_bytes=1400 * MiB)
    assert stalled.held and stalled.wanted == 664 * MiB
    # read well below it: she pressed on it within the interval and freed (a jumper at her guard)
    freed = memory_evidence(300 * MiB, 0.0, 3, None, 600 * MiB, wanted_before_bytes=1400 * MiB)
    assert freed.held and freed.wanted == 364 * MiB


def test_memory_demand_drops_at_once_when_she_frees():
    state = estimate_demand(None, {MEMORY: memory_evidence(1500 * MiB, 100 * MiB, None, None, None)}, CAP)
    state = estimate_demand(state, {MEMORY: memory_evidence(100 * MiB, -700 * MiB, None, None, None)}, CAP)
    assert state.demand[MEMORY] == 100 * MiB + 64 * MiB  # a stock: no smoothing of what she no longer holds


def test_the_network_is_probed_while_held_and_bounded_by_the_link():
    # held at 40 Mbit/s tick after tick (her share of a contended link, or a class that goes
    # over its rate once a tick): a step above what she sends, not a ratchet to the link
    demand = settle(lambda _: {LINK: net_evidence(40e6, held=True)}, ticks=20)
    assert demand[LINK] == pytest.approx(50e6)
    assert settle(lambda _: {LINK: net_evidence(90e6, held=True)})[LINK] == 100e6
    assert settle(lambda _: {LINK: net_evidence(40e6, held=False)})[LINK] == pytest.approx(40e6)


def test_at_her_ceil_the_network_is_probed_from_her_demand_before():
    """Held at her ceil on a contended link she sends her share, 40 Mbit/s, whatever she would
    send: probed from what she sent alone her demand stood at 50 for good (the scenario
    cpu-net-mixed); from her demand before it reaches the link, 15% a tick once smoothed."""
    def at_ceil(state):
        before = state.demand.get(LINK) if state is not None else None
        return {LINK: net_evidence(40e6, True, before)}
    demands = [settle(at_ceil, ticks=n)[LINK] for n in (1, 2, 3, 8)]
    assert demands[0] == pytest.approx(50e6)  # no demand before: a step over what she sent
    assert demands[1] == pytest.approx(50e6 * 1.15)  # held twice, steady: 1.25 over it, smoothed
    assert demands[2] == pytest.approx(50e6 * 1.15**2)
    assert demands[3] == 100e6  # the link bounds it
    # her rate above her demand before (a raise she used at once): the more of the two
    assert net_evidence(80e6, True, 40e6).wanted == pytest.approx(100e6)
    # and leaving a raise unused she is no longer at her ceil: her rate again
    state = estimate_demand(None, {LINK: net_evidence(40e6, True, 100e6)}, CAP)
    assert estimate_demand(state, {LINK: net_evidence(30e6, False)}, CAP).demand[LINK] == pytest.approx(30e6)


def test_a_user_who_stops_drops_to_her_use_at_once():
    busy = {CPU: cpu_evidence(1.0, 1.0, 1.0, 2.0)}
    state = estimate_demand(None, busy, CAP)
    state = estimate_demand(state, {CPU: cpu_evidence(0.01, 0.0, 0.0, 2.0)}, CAP)
    assert state.demand[CPU] == pytest.approx(0.01)


def test_a_user_who_starts_counts_at_once_when_new_and_smoothly_after():
    state = estimate_demand(None, {CPU: cpu_evidence(1.0, 1.0, 1.0, 2.0)}, CAP)
    assert state.demand[CPU] == 2.0  # first sight: the evidence as it is
    state = estimate_demand(state, {CPU: cpu_evidence(0.5, 0.5, 0.5, 2.0)}, CAP)
    assert state.demand[CPU] == pytest.approx(0.6 * 1.0 + 0.4 * 2.0)  # smoothed, both ways


def test_an_admins_own_limit_bounds_her_demand():
    ev = {CPU: cpu_evidence(0.5, 1.5, 1.0, 2.0)}
    assert estimate_demand(None, ev, CAP, ceiling={CPU: 0.75}).demand[CPU] == 0.75


def test_new_and_vanished_resources():
    other = Resource.disk("8:16")
    state = estimate_demand(None, {CPU: cpu_evidence(1.0, 0, 0, 2.0), DISK: disk_evidence({DISK: 0.3}, 0, {})[DISK]}, CAP)
    state = estimate_demand(state, {CPU: cpu_evidence(1.0, 0, 0, 2.0)}, CAP)
    assert set(state.demand) == {CPU}
    state = estimate_demand(state, {CPU: cpu_evidence(1.0, 0, 0, 2.0), other: disk_evidence({other: 0.1}, 0, {})[other]}, CAP)
    assert state.demand[other] == pytest.approx(0.1)


fraction = st.floats(0, 1, allow_nan=False)
cores = st.floats(0, 2, allow_nan=False)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(cores, st.floats(0, 4), fraction, fraction, fraction, fraction, fraction, st.booleans()),
                min_size=1, max_size=30))
def test_demand_never_exceeds_what_the_evidence_bounds_and_never_falls_below_use(ticks):
    """For any sequence of evidence, each demand stays within the most any tick's evidence
    supported: a resource she is held back on, its own bound (CPU: used + max(throttled,
    waiting), at most the CPUs; disk: Amdahl's, at most 1); one she is not, her use times the
    speedup PSI full gave for the one that holds her (at most 20×, at most capacity) — and is
    at least this tick's use (within capacity)."""
    state, bound = None, {CPU: 0.0, DISK: 0.0}
    for used, throttled, waiting, cpu_full, disk_used, stalled, io_full, at_cap in ticks:
        cpu = cpu_evidence(used, throttled, waiting, 2.0, full_stall_fraction=cpu_full)
        disk = disk_evidence({DISK: disk_used}, stalled, {DISK: at_cap}, full_stall_fraction=io_full)[DISK]
        own = {CPU: min(2.0, used + max(throttled, waiting)),
               DISK: min(1.0, disk_used / max((1 - stalled) + stalled * disk_used, 1e-9)) if disk_used else 0.0}
        speedup = min(20.0, max([1.0] + [ev.speedup for ev in (cpu, disk) if ev.held]))
        for resource, ev in ((CPU, cpu), (DISK, disk)):
            cap = CAP[resource]
            tick_bound = min(cap, max(ev.used, own[resource] if ev.held else ev.used * speedup))
            bound[resource] = max(bound[resource], tick_bound)
        state = estimate_demand(state, {CPU: cpu, DISK: disk}, CAP)
        assert min(used, 2.0) - 1e-9 <= state.demand[CPU] <= bound[CPU] + 1e-9
        assert min(disk_used, 1.0) - 1e-9 <= state.demand[DISK] <= bound[DISK] + 1e-9 <= 1.0 + 1e-9


def test_use_beside_a_bottleneck_is_scaled_only_as_far_as_psi_full_says_her_work_is_coupled():
    """A reader alone in her slice (all her tasks wait on the disk: io full = some) wants the
    CPU her reading costs at her full rate; a CPU loop beside a reader (io full 0) does not."""
    disk = disk_evidence({DISK: 0.5}, 0.95, {DISK: True}, full_stall_fraction=0.95)[DISK]
    reader = estimate_demand(None, {CPU: cpu_evidence(0.05, 0, 0, 2.0), DISK: disk}, CAP).demand
    assert reader[CPU] == pytest.approx(0.05 / (0.05 + 0.95 * 0.5))  # 0.095: the CPU of her reads at full speed
    beside = disk_evidence({DISK: 0.5}, 0.95, {DISK: True}, full_stall_fraction=0.0)[DISK]
    mixed = estimate_demand(None, {CPU: cpu_evidence(1.05, 0, 0, 2.0), DISK: beside}, CAP).demand
    assert mixed[CPU] == pytest.approx(1.05)


@given(st.floats(0, 8 * 2**30), st.floats(-2**30, 2**30), st.one_of(st.none(), st.integers(0, 100)),
       st.one_of(st.none(), st.integers(0, 8 * 2**30)))
def test_memory_demand_is_at_least_use_plus_headroom_and_at_most_capacity(used, growth, events, high):
    ev = memory_evidence(used, growth, events, None, high)
    assert ev.wanted >= used + DemandParams().memory_headroom_bytes
    demand = estimate_demand(None, {MEMORY: ev}, CAP).demand[MEMORY]
    assert min(used, CAP[MEMORY]) <= demand <= CAP[MEMORY]


def test_a_user_not_held_back_wants_exactly_what_she_used_at_once():
    """Not held back, her use is what she wanted: no smoothing in either direction, so a user
    who stops (even to a non-negligible use) frees her share in the next tick."""
    state = estimate_demand(None, {CPU: cpu_evidence(1.0, 1.0, 1.0, 2.0)}, CAP)
    state = estimate_demand(state, {CPU: cpu_evidence(1.0, 1.0, 1.0, 2.0)}, CAP)
    state = estimate_demand(state, {CPU: cpu_evidence(0.4, 0.0, 0.0, 2.0)}, CAP)
    assert state.demand[CPU] == pytest.approx(0.4)


def test_the_first_tick_held_back_takes_the_evidence_as_it_is():
    """An idle user who starts: held back for the first time, her evidence is not averaged with
    the idle tick before (which cost a tick of reaction on the real kernel)."""
    state = estimate_demand(None, {CPU: cpu_evidence(0.0, 0.0, 0.0, 2.0)}, CAP)
    state = estimate_demand(state, {CPU: cpu_evidence(0.9, 0.0, 0.9, 2.0)}, CAP)
    assert state.demand[CPU] == pytest.approx(1.8)
    assert CPU in state.held


@pytest.mark.parametrize("io_some, cpu_wait, wanted", [
    (0.5, 0.45, 1.0),  # her reader waits for a CPU behind her own throttled loop: alone it would read
    (0.5, 0.0, 0.5 / (0.5 + 0.25)),  # no CPU wait: Amdahl as before
    (0.9, 0.5, 0.5 / (0.0 + 0.45)),  # the CPU wait is bounded by the time not stalled on I/O
])
def test_time_waiting_for_a_cpu_is_not_her_readers_own_work(io_some, cpu_wait, wanted):
    ev = disk_evidence({DISK: 0.5}, io_some, {DISK: True}, cpu_wait_fraction=cpu_wait)[DISK]
    assert ev.held and ev.wanted == pytest.approx(min(1.0, wanted))


def test_a_bursty_task_throttled_below_her_quota_wants_what_amdahl_allows_not_its_waiting_time():
    """A reader's dd under cpu.max 0.2 core, using 0.09 on average: throttled at the end of some
    periods (0.63 core-seconds a second on the real kernel) and waiting to run 69% of the time.
    Below her quota, throttled time is not CPU she would use; her waiting is bounded by
    Amdahl's law: used / (1 − waiting), not used + waiting."""
    ev = cpu_evidence(0.09, throttled_cores=0.63, stall_fraction=0.69, capacity_cores=1.75, quota_cores=0.2)
    assert ev.held and ev.wanted == pytest.approx(0.09 / 0.31)
    quiet = cpu_evidence(0.09, throttled_cores=0.63, stall_fraction=0.05, capacity_cores=1.75, quota_cores=0.2)
    assert not quiet.held and quiet.wanted == pytest.approx(0.09)


def test_at_her_quota_throttled_time_is_what_her_threads_would_run():
    """A loop beside a reader at cpu.max 0.26: she uses her quota, throttled 0.64 core-seconds a
    second, waiting to run (PSI some, which does not count throttling on 6.1) 40%: she wants
    0.9 core, not the 0.48 Amdahl's law over her waiting share would say (that spiralled down
    on the real kernel: 0.62 → 0.49 cores in five ticks, her cap following)."""
    ev = cpu_evidence(0.26, throttled_cores=0.64, stall_fraction=0.40, capacity_cores=1.75, quota_cores=0.26)
    assert ev.held and ev.wanted == pytest.approx(0.90)


@pytest.mark.parametrize("before, now", [(1.43, 0.09), (0.1, 1.2)])
def test_a_step_while_held_back_is_taken_at_once(before, now):
    """Held back both ticks, but the estimate moved by more than half: she stopped (killed a
    tenth of a second into the interval, throttled in it) or started — not noise."""
    state = estimate_demand(None, {CPU: cpu_evidence(before, 0.5, 0.5, 2.0)}, CAP)
    state = estimate_demand(state, {CPU: cpu_evidence(now, 0.5 * now, 0.5, 2.0)}, CAP)
    assert state.demand[CPU] == pytest.approx(cpu_evidence(now, 0.5 * now, 0.5, 2.0).wanted)


def test_coupled_work_speeds_up_no_more_than_her_admins_limit_allows():
    """Held at her admin's 1 core, which she uses in full (throttled as much again, PSI full
    0.5): her reads (0.3 of the disk) were scaled by the speedup of a CPU she cannot get — a
    disk demand of 0.6, twice what she could ever read (the DRF audit)."""
    cpu = cpu_evidence(1.0, throttled_cores=1.0, stall_fraction=0.6, capacity_cores=2.0, full_stall_fraction=0.5,
                       quota_cores=1.0)
    disk = disk_evidence({DISK: 0.3}, 0.0, {})[DISK]
    state = estimate_demand(None, {CPU: cpu, DISK: disk}, CAP, ceiling={CPU: 1.0})
    assert state.demand == {CPU: 1.0, DISK: 0.3}
    # without the limit she could run 2 cores: her reads would double with them
    assert estimate_demand(None, {CPU: cpu, DISK: disk}, CAP).demand == {CPU: 2.0, DISK: 0.6}
    # within a bound of 1.5 cores, the speedup of 2 (PSI full 0.5) is 1.5 at most: her reads scale by as much
    state = estimate_demand(None, {CPU: cpu, DISK: disk}, CAP, ceiling={CPU: 1.5})
    assert state.demand[CPU] == 1.5 and state.demand[DISK] == pytest.approx(0.3 * 1.5)
