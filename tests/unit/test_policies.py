"""DRF's alternatives (paper §5) and the property checks (§3): the paper's numbers exactly,
and the guarantees the paper proves, as properties over random instances."""

from functools import partial

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from governor.fairness.alternatives import ALLOCATORS, AllocatorError, allocate_with, asset_fairness, ceei, cpu_fair, slot_fair
from governor.fairness.properties import check_all, envy_free, pareto_efficient, sharing_incentive, strategy_proof

PAPER = ([9.0, 18.0], [[1.0, 4.0], [3.0, 1.0]])  # §4.1: A ⟨1 CPU, 4 GB⟩, B ⟨3 CPU, 1 GB⟩


def arrays(C, D, W=None):
    C, D = np.array(C, float), np.array(D, float)
    return C, D, np.ones_like(D) if W is None else np.array(W, float), np.full(len(D), np.inf)


def test_asset_fairness_gives_the_papers_2_52_and_2_16_tasks():
    assert asset_fairness(*PAPER).units == pytest.approx([2.52, 2.16], abs=1e-12)


def test_ceei_gives_the_papers_45_11_and_18_11_tasks():
    assert ceei(*PAPER).units == pytest.approx([45 / 11, 18 / 11], rel=1e-7)


def test_ceei_population_monotonicity_example_of_theorem_5():
    assert ceei([100, 100], [[4, 1], [1, 16], [16, 1]]).units == pytest.approx([11.28, 5.35, 3.09], abs=0.01)


def test_asset_fairness_violates_sharing_incentive_on_30_30():
    C, D, W, M = arrays([30, 30], [[1, 3], [1, 1]])
    fill = asset_fairness(C, D)
    assert fill.units == pytest.approx([6, 12])
    check = sharing_incentive(C, D, W, M, fill, ["1", "2"])
    assert not check.holds and check.worst[0] == 1 and check.worst[2] == pytest.approx(15)


def test_ceei_is_not_strategy_proof_on_100_100():
    C, D, W, M = arrays([100, 100], [[16, 1], [1, 2]])
    fill = ceei(C, D)
    check = strategy_proof(ceei, C, D, W, M, fill, ["1", "2"])
    assert not check.holds
    user, lie, honest, gained = check.worst
    assert user == 0 and lie[0] == 16 and lie[1] > 1 and gained > honest * 1.05
    assert "reporting ⟨16, " in check.witness


def test_drf_meets_all_four_on_the_papers_example_and_slots_do_not():
    C, D, W, M = arrays(*PAPER)
    for policy, expected in (("drf", [True] * 4), ("slots", [False, False, True, False])):
        run = partial(allocate_with, policy, slots=4)
        assert [c.holds for c in check_all(run, C, D, W, M, run(C, D, W, M), ["A", "B"])] == expected


def test_slots_and_cpu_fair_by_hand():
    assert slot_fair(*PAPER, slots=4).units == pytest.approx([2, 1])  # slots ⟨2.25, 4.5⟩: A needs 1, B 2
    assert cpu_fair(*PAPER).units == pytest.approx([54 / 13, 18 / 13])  # equal CPU, memory runs out


def test_unknown_policy_and_bad_slots_are_clear_errors():
    with pytest.raises(AllocatorError, match="expected one of: drf, asset"):
        allocate_with("lottery", *PAPER)
    with pytest.raises(AllocatorError, match="slots"):
        slot_fair(*PAPER, slots=0)
    with pytest.raises(AllocatorError, match="cpu"):
        allocate_with("cpu-fair", *PAPER)


instances = st.integers(1, 5).flatmap(lambda n: st.integers(1, 3).flatmap(lambda m: st.tuples(
    st.lists(st.floats(1, 100), min_size=m, max_size=m),
    st.lists(st.lists(st.one_of(st.just(0.0), st.floats(0.1, 10)), min_size=m, max_size=m), min_size=n, max_size=n),
    st.lists(st.floats(0.5, 4), min_size=n, max_size=n),
    st.lists(st.one_of(st.just(float("inf")), st.floats(0, 50)), min_size=n, max_size=n),
)))


@settings(max_examples=60, deadline=None)
@given(instances, st.sampled_from(ALLOCATORS))
def test_every_policy_is_feasible_and_respects_caps(instance, policy):
    C, D, w, M = (np.array(v, float) for v in instance)
    fill = allocate_with(policy, C, D, w, M, slots=3, cpu=0)
    assert np.all(fill.consumed <= C * (1 + 1e-7) + 1e-9)
    assert np.all(fill.units <= M * (1 + 1e-9) + 1e-12) and np.all(fill.units >= 0)


@settings(max_examples=40, deadline=None)
@given(instances)
def test_weighted_drf_is_sharing_incentive_envy_free_pareto_and_no_lie_pays(instance):
    C, D, w, M = (np.array(v, float) for v in instance)
    W = np.repeat(w[:, None], len(C), axis=1)
    fill = allocate_with("drf", C, D, W, M)
    names = [str(i) for i in range(len(D))]
    for check in check_all(partial(allocate_with, "drf"), C, D, W, M, fill, names):
        assert check.holds, check.witness


@settings(max_examples=40, deadline=None)
@given(instances)
def test_ceei_is_envy_free_and_pareto_efficient(instance):
    C, D, _, M = (np.array(v, float) for v in instance)
    W = np.ones_like(D)
    M = np.full(len(D), np.inf)  # the classic result is for users without caps
    fill = ceei(C, D, W, M)
    names = [str(i) for i in range(len(D))]
    assert envy_free(C, D, W, M, fill, names).holds
    assert pareto_efficient(C, D, W, M, fill, names).holds


def _nash_objective(D, w, units):
    return float(np.sum(w * np.log(np.maximum(units, 1e-300))))


@settings(max_examples=60, deadline=None)
@given(instances)
def test_ceei_is_the_nash_bargaining_optimum_a_general_solver_finds(instance):
    """The market's prices give the programme's optimum: no feasible allocation SLSQP (a
    general solver over the units themselves) finds has a higher Σ w log x."""
    from scipy.optimize import LinearConstraint, minimize

    C, D, w, M = (np.array(v, float) for v in instance)
    fill = ceei(C, D, w, M)
    active = (D > 0).any(axis=1) & (M > 0)
    if not active.any():
        return
    Da, wa, Ma = D[active], w[active], M[active]
    upper = np.minimum(Ma, (C[None, :] / np.where(Da > 0, Da, np.nan)).min(axis=1, initial=np.inf,
                                                                            where=Da > 0))
    general = minimize(lambda x: -_nash_objective(Da, wa, x), x0=upper / (2 * len(wa)),
                       jac=lambda x: -wa / np.maximum(x, 1e-300), bounds=[(min(1e-12, u / 2), u) for u in upper],
                       constraints=[LinearConstraint(Da.T / C[:, None], -np.inf, 1.0)], method="SLSQP",
                       options={"ftol": 1e-12, "maxiter": 2000})
    assume(general.success)  # the general solver's own trouble (what the market method replaced)
    assert _nash_objective(Da, wa, fill.units[active]) >= _nash_objective(Da, wa, general.x) - 1e-6


def test_ceei_settles_a_twenty_user_problem_the_general_solver_could_not():
    """SLSQP over the units stopped at 'Positive directional derivative for linesearch' on this
    misreport (so drfgov compare reported a bug after 81 s); the market's prices settle it."""
    import json
    from pathlib import Path

    doc = json.loads((Path(__file__).parents[1] / "fixtures" / "ceei-slsqp-failure.json").read_text())
    C, D, w = (np.array(doc[k], float) for k in ("capacity", "demand", "weight"))
    fill = ceei(C, D, w)
    W = np.repeat(w[:, None], len(C), axis=1)
    M = np.full(len(D), np.inf)
    names = [str(i) for i in range(len(D))]
    assert envy_free(C, D, W, M, fill, names).holds and pareto_efficient(C, D, W, M, fill, names).holds
    assert np.all(fill.consumed <= C * (1 + 1e-9))


def test_ceei_takes_ten_thousand_users():
    """One price per resource: the work grows with users × resources, not with users cubed."""
    rng = np.random.default_rng(7)
    n = 10_000
    D = rng.uniform(0.1, 3, (n, 4)) * (rng.random((n, 4)) < 0.8)
    D[~(D > 0).any(axis=1), 0] = 1.0
    C = np.array([100.0, 400.0, 50.0, 80.0])
    w = rng.choice([1.0, 2.0, 3.0], n)
    M = np.where(rng.random(n) < 0.2, rng.uniform(0.001, 0.05, n), np.inf)
    fill = ceei(C, D, w, M)
    W = np.repeat(w[:, None], 4, axis=1)
    names = [str(i) for i in range(n)]
    assert np.all(fill.consumed <= C * (1 + 1e-9)) and np.all(fill.units <= M * (1 + 1e-9))
    assert pareto_efficient(C, D, W, M, fill, names).holds


def test_a_bounded_misreport_search_says_how_much_it_tried():
    C, D, W, M = arrays([9, 18], [[1, 4], [3, 1]])
    run = partial(allocate_with, "drf")
    full = strategy_proof(run, C, D, W, M, run(C, D, W, M), ["A", "B"])
    assert full.holds and full.searched == (48, 48)  # 2 users × 2 resources × 12 factors
    few = strategy_proof(run, C, D, W, M, run(C, D, W, M), ["A", "B"], budget=5)
    assert few.holds and few.searched == (5, 48)
    C, D, W, M = arrays([100, 100], [[4, 1], [1, 16]])  # CEEI's lie pays (paper §5.2): found within a budget too
    assert not strategy_proof(ceei, C, D, W, M, ceei(C, D, W, M), ["1", "2"], budget=24).holds


wide_instances = st.integers(1, 10).flatmap(lambda n: st.integers(1, 4).flatmap(lambda m: st.tuples(
    st.lists(st.floats(1, 1e9), min_size=m, max_size=m),
    st.lists(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 1)), min_size=m, max_size=m), min_size=n, max_size=n),
    st.lists(st.floats(1e-3, 100), min_size=n, max_size=n),
    st.lists(st.one_of(st.just(float("inf")), st.floats(1e-7, 1e5)), min_size=n, max_size=n),
)))


@settings(max_examples=200, deadline=None)
@given(wide_instances)
def test_ceei_prices_settle_across_budgets_and_capacities_far_apart(instance):
    """Budgets 10^5 apart, capacities 10^9 apart, caps from 10^-7: the prices settle (no
    ArithmeticError) and the allocation fits."""
    C, D, w, M = (np.array(v, float) for v in instance)
    fill = ceei(C, D, w, M)
    assert np.all(fill.consumed <= C * (1 + 1e-7) + 1e-9) and np.all(fill.units <= M * (1 + 1e-9) + 1e-12)


@pytest.mark.parametrize("C, D, w, M", [
    # budgets 10^4 apart: users switch between ceiling and budget at each Newton step (the
    # quasi-Newton pass takes the prices past those kinks)
    ([4.9523200669034258e7, 954.81989615906934, 152402.16175956596],
     [[.7230085525551375, .9699631118370216, .03548467991672966], [.6131088761474557, 0, .1725748592400862],
      [.931192068121252, .25585650767263035, .01779632101251205]],
     [21.481068583361019, .0019030482825562877, .076986447900155089], [np.inf] * 3),
    # a cap of 7.7e-7 units beside 10^8 of capacity: the last steps move the dual by less than
    # its rounding (a step that shrinks the projected gradient is taken)
    ([2.56e8, 1.22e5], [[1, 2], [1, 2], [2, 2]], [2, 2, 1], [np.inf, 7.7e-7, .053]),
    # both users at their ceilings: the dual is linear with a slope of 2·10^-4, and steepest
    # descent scaled by the prices crawled (hypothesis found it; the step now spans the box)
    ([1.0, 1.0, 124069473.0], [[0, 0, 0], [0, 0, 1], [0, 0, 1]], [1, .5, 1], [np.inf, 24305.0, np.inf]),
])
def test_ceei_settles_the_reviews_two_stalls(C, D, w, M):
    fill = ceei(C, D, w, M)
    assert np.all(fill.consumed <= np.array(C) * (1 + 1e-9))
