"""Demand estimation: usage when free, probing upward when held back, decay, bounds."""

from hypothesis import given
from hypothesis import strategies as st

from governor.control.demand import DemandParams, estimate_demand, held_back

CAP = {"cpu": 8.0}


def run(usages, helds, params=DemandParams()):
    state, out = None, []
    for used, held in zip(usages, helds):
        state = estimate_demand(state, {"cpu": used}, {"cpu": held}, CAP, params)
        out.append(state.demand["cpu"])
    return out


def test_free_user_demand_converges_to_usage():
    demands = run([2.0] * 20, [False] * 20)
    assert demands[0] == 2.0 and abs(demands[-1] - 2.0) < 1e-9


def test_held_back_user_is_probed_upward_geometrically_to_capacity():
    demands = run([1.0] * 12, [True] * 12)
    assert demands[0] == 1.25 and demands[1] == 1.25 ** 2
    assert all(b >= a for a, b in zip(demands, demands[1:]))
    assert demands[-1] == 8.0  # bounded by capacity


def test_demand_decays_toward_usage_once_released():
    demands = run([4.0] * 3 + [1.0] * 15, [True] * 3 + [False] * 15)
    assert demands[:4] == [5.0, 6.25, 7.8125, 6.25]  # probed 1.25× per tick, then decays 0.8× per tick
    assert abs(demands[-1] - 1.0) < 0.05


def test_new_and_vanished_resources():
    state = estimate_demand(None, {"cpu": 1.0, "disk:8:0": 0.3}, {}, CAP)
    state = estimate_demand(state, {"cpu": 1.0}, {}, CAP)
    assert set(state.demand) == {"cpu"}
    state = estimate_demand(state, {"cpu": 1.0, "disk:8:16": 0.1}, {}, CAP)
    assert state.demand["disk:8:16"] == 0.1


@given(st.lists(st.tuples(st.floats(0, 100), st.booleans()), min_size=1, max_size=40))
def test_bounded_and_at_least_smoothed_usage(seq):
    state = None
    for used, held in seq:
        state = estimate_demand(state, {"cpu": used}, {"cpu": held}, CAP)
        assert 0 <= state.demand["cpu"] <= 8.0
        assert state.demand["cpu"] >= min(state.smoothed["cpu"], 8.0) - 1e-9


def test_held_back_signals():
    assert not held_back()
    assert held_back(throttled_fraction=0.1)
    assert held_back(memory_high_events=3)
    assert not held_back(psi_some_avg10_pct=5.0) and held_back(psi_some_avg10_pct=15.0)
    assert held_back(at_cap=True)
