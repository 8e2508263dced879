"""Property tests of progressive filling: the DRF guarantees of paper §3 and §6 on random instances."""

import os

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from governor.fairness.drf import progressive_filling
from tests.unit.drf_instances import Instance, instances, tasks_from

RTOL = 1e-7
# DRF_EXAMPLES=5000 for a longer hunt; the default keeps the suite quick. These tests' own
# settings, over the profile in force (in CI hypothesis's "ci": derandomized): a profile
# loaded here would be every later test's, CI's derandomizing undone for the whole tier.
DRF = settings(max_examples=int(os.environ.get("DRF_EXAMPLES", "300")), deadline=None)


def tol(x):
    return RTOL * max(1.0, abs(float(x)))


def fill(inst: Instance):
    return progressive_filling(*inst.args)


def unmet(inst, units):
    finite_cap = np.where(np.isinf(inst.max_units), 0.0, inst.max_units)
    return np.isinf(inst.max_units) | (units < finite_cap - 1e-7 * np.maximum(1, finite_cap))


@DRF
@given(instances())
def test_feasible_and_caps_respected(inst):
    f = fill(inst)
    assert np.all(f.units >= 0)
    assert np.all(f.units <= inst.max_units * (1 + RTOL))
    assert np.all(f.consumed <= inst.capacity * (1 + RTOL))
    assert np.allclose(f.allocation, f.units[:, None] * inst.demand)


@DRF
@given(instances(holding=True))
def test_with_holdings_feasible_and_pareto(inst):
    """Holdings are kept; new units only go where capacity is free; unmet users hit a saturated resource."""
    f = fill(inst)
    assert np.all(f.allocation >= inst.holdings)
    granted = f.units[:, None] * inst.demand
    assert np.all(granted.sum(axis=0) <= np.maximum(0, inst.capacity - inst.holdings.sum(axis=0)) + 1e-7 * inst.capacity)
    for i in np.flatnonzero(unmet(inst, f.units)):
        assert np.any(f.saturated & (inst.demand[i] > 0)), (i, f.units, f.consumed)


@DRF
@given(instances())
def test_sharing_incentive_weighted(inst):
    """Each user gets at least what her weighted static partition w_i/Σw of every resource runs."""
    f = fill(inst)
    fraction = inst.weight / inst.weight.sum()
    for i in range(len(inst.weight)):
        alone = min(inst.max_units[i], tasks_from(fraction[i] * inst.capacity, inst.demand[i]))
        assert f.units[i] >= alone - tol(alone)


@DRF
@given(instances(weighted=False))
def test_envy_free(inst):
    """No user could run more of her own tasks with another user's allocation (unit weights)."""
    f = fill(inst)
    for i in range(len(inst.weight)):
        if not unmet(inst, f.units)[i]:
            continue  # her demand is met: she envies nobody
        for j in range(len(inst.weight)):
            assert tasks_from(f.allocation[j], inst.demand[i]) <= f.units[i] + tol(f.units[i])


@DRF
@given(instances(weighted=True))
def test_envy_free_weighted(inst):
    """Weighted: i does not prefer j's allocation scaled by w_i / w_j."""
    f = fill(inst)
    for i in np.flatnonzero(unmet(inst, f.units)):
        for j in range(len(inst.weight)):
            scaled = f.allocation[j] * inst.weight[i] / inst.weight[j]
            assert tasks_from(scaled, inst.demand[i]) <= f.units[i] + tol(f.units[i])


@DRF
@given(instances())
def test_pareto_efficient(inst):
    """Every user whose demand is not met uses some saturated resource (paper §6 Lemma 8)."""
    f = fill(inst)
    for i in np.flatnonzero(unmet(inst, f.units)):
        assert np.any(f.saturated & (inst.demand[i] > 0)), (i, f.units, f.consumed)


@DRF
@given(instances(max_users=4), st.data())
def test_strategy_proof(inst, data):
    """Misreporting her demand never lets a user run more of her true tasks."""
    i = data.draw(st.integers(0, len(inst.weight) - 1))
    m = len(inst.capacity)
    lie = np.array(data.draw(st.lists(st.integers(0, 20).map(float), min_size=m, max_size=m).filter(any)))
    truthful = fill(inst).units[i]
    reported = inst.demand.copy()
    reported[i] = lie
    lied = progressive_filling(inst.capacity, reported, inst.weight, inst.max_units)
    # she receives lied.units[i] units of the reported vector; her true utility is capped too
    gained = min(inst.max_units[i], tasks_from(lied.units[i] * lie, inst.demand[i]))
    assert gained <= truthful + tol(truthful)


@DRF
@given(instances(max_resources=1))
def test_single_resource_is_weighted_max_min(inst):
    """One resource: every unsatisfied user has the same, largest, allocation/weight."""
    f = fill(inst)
    per_weight = f.allocation[:, 0] / inst.weight
    open_ = unmet(inst, f.units)
    if open_.any():
        level = per_weight[open_]
        assert np.allclose(level, level[0], rtol=1e-7)
        assert np.all(per_weight <= level[0] * (1 + 1e-7) + 1e-9)
        assert f.consumed[0] >= inst.capacity[0] * (1 - 1e-7)


@DRF
@given(instances(strictly_positive=True))
def test_bottleneck_fairness(inst):
    """If one resource is every user's most demanded (relative to capacity), it is shared max-min."""
    rel = inst.demand / inst.capacity
    r = int(np.argmax(rel[0]))
    assume(np.all(rel[:, r] >= rel.max(axis=1) - 1e-12))
    f = fill(inst)
    open_ = unmet(inst, f.units)
    if open_.any():
        level = f.allocation[open_, r] / inst.weight[open_]
        assert np.allclose(level, level[0], rtol=1e-7)
        assert f.consumed[r] >= inst.capacity[r] * (1 - 1e-7)


@DRF
@given(instances(min_users=2, strictly_positive=True), st.data())
def test_population_monotone(inst, data):
    """A user leaving never lowers anyone else's units (strictly positive demands)."""
    leaver = data.draw(st.integers(0, len(inst.weight) - 1))
    before = fill(inst).units
    keep = np.arange(len(inst.weight)) != leaver
    after = progressive_filling(inst.capacity, inst.demand[keep], inst.weight[keep], inst.max_units[keep]).units
    assert np.all(after >= before[keep] - 1e-7 * np.maximum(1, before[keep]))


@DRF
@given(instances(), st.randoms(use_true_random=False))
def test_invariant_to_user_order(inst, rnd):
    perm = list(range(len(inst.weight)))
    rnd.shuffle(perm)
    perm = np.array(perm)
    base = fill(inst).units
    shuffled = progressive_filling(inst.capacity, inst.demand[perm], inst.weight[perm], inst.max_units[perm]).units
    assert np.allclose(shuffled, base[perm], rtol=1e-9, atol=1e-9)


@DRF
@given(instances(), st.sampled_from([0.001, 0.5, 3.0, 1000.0]))
def test_invariant_to_scaling_all_weights(inst, k):
    base = fill(inst).units
    scaled = progressive_filling(inst.capacity, inst.demand, inst.weight * k, inst.max_units).units
    assert np.allclose(scaled, base, rtol=1e-9, atol=1e-9)


@DRF
@given(instances(max_users=4, capped=False), st.data())
def test_holdings_equal_to_a_fill_change_nothing(inst, data):
    """Handing a user part of her DRF allocation as holdings first yields the same allocation."""
    f = fill(inst)
    i = data.draw(st.integers(0, len(inst.weight) - 1))
    part = data.draw(st.sampled_from([0.25, 0.5, 1.0]))
    holdings = np.zeros_like(inst.demand)
    holdings[i] = part * f.allocation[i]
    again = progressive_filling(inst.capacity, inst.demand, inst.weight, inst.max_units, holdings)
    assert np.allclose(again.allocation, f.allocation, rtol=1e-7, atol=1e-7)
