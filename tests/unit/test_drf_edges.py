"""Progressive filling on the corner cases the issue names."""

import numpy as np
import pytest

from governor.fairness.drf import progressive_filling


def test_no_users():
    fill = progressive_filling([9, 18], np.zeros((0, 2)))
    assert fill.units.shape == (0,) and list(fill.consumed) == [0, 0]


def test_user_with_no_demand_gets_nothing_and_others_are_unaffected():
    fill = progressive_filling([10, 10], [[0, 0], [1, 2]])
    assert fill.units == pytest.approx([0, 5])
    assert fill.dominant_resource[0] == -1 and fill.dominant_share[0] == 0


def test_zero_demand_on_one_resource():
    fill = progressive_filling([10, 10], [[1, 0], [0, 1]])
    assert fill.units == pytest.approx([10, 10])
    assert list(fill.saturated) == [True, True]


def test_zero_capacity_resource_blocks_only_its_users():
    fill = progressive_filling([0, 10], [[1, 1], [0, 1]])
    assert fill.units == pytest.approx([0, 10])
    assert fill.saturated[0]
    assert fill.dominant_share[1] == pytest.approx(1.0)


def test_zero_cap_receives_nothing_but_keeps_holdings_in_shares():
    fill = progressive_filling([10, 10], [[1, 1], [1, 1]], max_units=[0, np.inf], holdings=[[2, 0], [0, 0]])
    assert fill.units == pytest.approx([0, 8])
    assert fill.dominant_share[0] == pytest.approx(0.2)


def test_ties_split_evenly():
    fill = progressive_filling([7], [[1], [1], [1]])
    assert fill.units == pytest.approx([7 / 3] * 3)


def test_everyone_satisfied_leaves_capacity_free_and_nothing_saturated():
    fill = progressive_filling([10, 10], [[1, 1], [2, 1]], max_units=[1, 2])
    assert fill.units == pytest.approx([1, 2])
    assert not fill.saturated.any()


def test_holdings_above_fair_share_are_kept_and_others_get_the_rest():
    # user 0 already holds 8 of 10 CPUs (above her fair half); user 1 gets the other 2.
    fill = progressive_filling([10], [[1], [1]], holdings=[[8], [0]])
    assert fill.units == pytest.approx([0, 2])
    assert fill.allocation[:, 0] == pytest.approx([8, 2])


def test_holdings_exceeding_capacity_saturate_from_the_start():
    fill = progressive_filling([10, 10], [[1, 0], [0, 1]], holdings=[[6, 0], [6, 0]])
    assert fill.units == pytest.approx([0, 10])
    assert fill.saturated[0]


def test_holding_on_a_resource_no_longer_demanded_delays_then_jumps():
    # user 0 holds 5 of 10 memory (weighted share 0.5) and wants CPU only; user 1 wants CPU.
    # Below level 0.5 only user 1 grows; at 0.5 user 0 may take CPU up to share 0.5 at once.
    fill = progressive_filling([10, 10], [[1, 0], [1, 0]], holdings=[[0, 5], [0, 0]])
    assert fill.units == pytest.approx([5, 5])
    assert fill.weighted_share == pytest.approx([0.5, 0.5])


def test_jump_that_would_overfill_gets_the_remainder():
    # user 0 holds 6 memory (share 0.6) and wants CPU; user 1 wants CPU alone: at level 0.6
    # user 1 has 6 CPUs and user 0's jump to 6 CPUs finds only 4 left.
    fill = progressive_filling([10, 10], [[1, 0], [1, 0]], holdings=[[0, 6], [0, 0]])
    assert fill.units == pytest.approx([4, 6])
    assert fill.consumed[0] == pytest.approx(10)


def test_a_jump_at_the_saturation_level_is_not_granted_past_capacity():
    """Found by hypothesis: user 1's holdings put her start level (her weighted share 39/91 ÷ 0.5)
    exactly where user 0 saturates resource 3; rounding put the crossing an ulp past her start,
    and her whole jump (22 units) was granted on top of a full resource (88 of 66 free)."""
    fill = progressive_filling([2.0, 1.0, 91.0, 77.0], [[0, 0, 0, 1.0], [0, 0, 0, 1.0]], [1.0, 0.5],
                               holdings=[[1.0, 0, 0, 0], [0, 0, 39.0, 11.0]])
    assert fill.units == pytest.approx([66.0, 0.0])
    assert fill.weighted_share == pytest.approx([6 / 7, 6 / 7])


def test_a_steep_line_handing_over_to_a_flat_one_does_not_stall_the_filling():
    """Found by a fuzz run (7 of 3,000 instances with amounts in 1e-3..1e3): the slope after a
    steep line (57 units per level) hands over to a flat one (3e-6) was summed from events, lost
    its digits to cancellation, and put the saturation level short by more than the tolerance:
    nobody froze and the solver gave up. The level is now refined along the exact slopes."""
    C = [1.0823480282603541e+01, 2.5384317226318557e-03, 1.7360513258679586e+02, 0.0]
    D = [[2.0011503237332553e+00, 7.7807425397772594e+00, 1.2731940704106410e+00, 2.6469755496704366e+01],
         [0, 0, 0, 3.2596261466640829e+02], [1.8912336913810271e-01, 8.4954915126124786e+02, 0, 0],
         [1.0239104771245697e-03, 0, 0, 4.8684404221959222e-03]]
    H = [[0, 5.6027753360393577e-06, 0, 0], [2.2932717269014634e-04, 0, 0, 0],
         [7.4232090421673586e-02, 0, 0, 0], [0, 5.0768634452637111e-04, 0, 0]]
    fill = progressive_filling(C, D, max_units=[np.inf, np.inf, 0.3008404334584354, np.inf], holdings=H)
    free = C[1] - (H[0][1] + H[3][1])
    assert fill.units[2] == pytest.approx(free / D[2][1], rel=1e-9)  # the only one who can grow fills resource 1
    assert fill.saturated[1] and fill.consumed[1] <= C[1] * (1 + 1e-9)
    assert list(fill.units[[0, 1, 3]]) == [0, 0, 0]  # they need resource 3, which has no capacity


def test_holdings_bend_the_curve():
    # user 0 holds 3 CPU and wants <1,1>; user 1 wants <1,0>: CPU 3 + (10t-3) + 10t = 10 at t = 0.5.
    fill = progressive_filling([10, 10], [[1, 1], [1, 0]], holdings=[[3, 0], [0, 0]])
    assert fill.units == pytest.approx([2, 5])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(capacity=[-1], demand=[[1]]), "capacity"),
        (dict(capacity=[1], demand=[[-1]]), "demand"),
        (dict(capacity=[1], demand=[[1]], weight=[0]), "weight"),
        (dict(capacity=[1], demand=[[1]], max_units=[-1]), "max_units"),
        (dict(capacity=[1], demand=[[1]], holdings=[[np.nan]]), "holdings"),
        (dict(capacity=[[1]], demand=[[1]]), "capacity"),
        (dict(capacity=[1, 1], demand=[[1, 1, 1], [1, 1, 1]]), "demand must be"),  # (2, 3) for 2 resources
        (dict(capacity=[1, 1], demand=[1, 1]), "demand must be"),  # a vector, not (users, resources)
        (dict(capacity=[1, 1], demand=[[1, 1]], weight=[1, 1]), "weight must be"),
    ],
)
def test_invalid_input_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        progressive_filling(**kwargs)


def test_weights_far_apart_never_fill_past_a_capacity():
    """Weights 10^12 apart (each within its 10^-6 … 10^6 bound): a steep user's slope and its end
    at her cap cancelled in the event sums, the level passed the saturation, and 3.00014 units
    of 3 were handed out (the DRF audit of 2026-11-26). The level is stepped back to it now."""
    fill = progressive_filling(np.array([3.0]), np.array([[1.0], [1.0]]), np.array([1e6, 1e-6]), np.array([1.0, np.inf]))
    assert fill.units[0] == 1.0 and fill.consumed[0] <= 3.0 * (1 + 1e-9)
    rng = np.random.default_rng(20261126)
    worst = 0.0
    for _ in range(300):
        n, m = int(rng.integers(2, 6)), int(rng.integers(1, 4))
        capacity = rng.uniform(1.0, 10.0, m)
        demand = rng.uniform(0.0, 2.0, (n, m)) * (rng.random((n, m)) < 0.8)
        demand[:, 0] = np.maximum(demand[:, 0], 0.1)
        weight = 10.0 ** rng.uniform(-6, 6, n)
        max_units = np.where(rng.random(n) < 0.5, rng.uniform(0.1, 3.0, n), np.inf)
        fill = progressive_filling(capacity, demand, weight, max_units)
        worst = max(worst, float(np.max(fill.consumed / capacity)) - 1.0)
    assert worst <= 1e-9, f"a fill passed a capacity by {worst:.3g} of it"


# The DRF audit of 2026-11-28: valid problems with holdings that were filled past a capacity,
# or stalled; each the minimal instance it found, with the exact answer.

def test_lines_apart_near_zero_are_no_tie_however_small():
    """A user's CPU line worth 5e-13 units at her base (10^12 CPU a unit) and her memory line at
    0 there: an absolute 1e-12 tied them, she followed the flatter line past the CPU's
    capacity — 6× it, dominant share 6."""
    fill = progressive_filling([0.1, 1.0], [[1e12, 1.0]], [[1.0, 0.1]], None, [[0.0, 0.5]])
    assert fill.units == pytest.approx([1e-13], rel=1e-9)
    assert fill.consumed[0] <= 0.1 * (1 + 1e-9) and fill.dominant_share[0] == pytest.approx(1.0)


def test_lines_far_apart_against_a_large_line_are_no_tie():
    """Her memory line, 10^11 a level, at 0 at her base, and her CPU line 4e-4 above it: a
    tolerance of 64 ε of the large line tied them, the events never saw the CPU fill and she
    was given her cap: 110% of the CPU."""
    fill = progressive_filling([1.0, 1e5], [[1000.0, 1e-6]], None, [1e-3], [[0.1, 5e4]])
    assert fill.units == pytest.approx([9e-4], rel=1e-9) and fill.consumed[0] <= 1.0 * (1 + 1e-9)


def test_a_resource_smaller_than_the_tolerance_unit_is_not_full_at_the_start():
    """1e-9 of a resource, a holding of an eighth of it: measured against at least 1, it was
    full at level 0, and both users were given the whole CPU."""
    fill = progressive_filling([1.0, 1e-9], [[1, 0], [1, 0]], None, [1, 1], [[0, 1.25e-10], [0, 0]])
    assert fill.units == pytest.approx([0.5, 0.5]) and fill.consumed[0] == pytest.approx(1.0)


@pytest.mark.parametrize("args, units, full", [
    # a steep line offset by a large holding: units read from the level kept too few digits
    (([10.0, 1.0], [[1e-6, 1e6]], [[1, 10]], None, [[5.0, 0.5]]), 5e-7, 1),  # was 0.1% past memory
    (([1, 1], [[20000, 1e-4]], [[10, 1]], None, [[0, 0.125]]), 5e-5, 0),  # was "stalled"
], ids=["past-capacity", "stalled"])
def test_a_holding_far_larger_than_her_units_loses_no_precision(args, units, full):
    fill = progressive_filling(*args)
    assert fill.units == pytest.approx([units], rel=1e-9)
    assert fill.consumed[full] == pytest.approx(args[0][full], rel=1e-9)
    assert np.all(fill.consumed <= np.asarray(args[0]) * (1 + 1e-9))


def test_a_rounding_residue_at_her_base_is_no_jump():
    """Her lowest line at her base is 0 but for one ulp of its 7.5e6 offset (9.3e-10 units): taken
    for a jump, she was a jumper polish does not move, and the filling stalled (the review of
    2026-11-28)."""
    fill = progressive_filling([3346443439.3465443, 5.119526722918321e-12],
                               [[0.28842550967518016, 0.0003530872607724979]],
                               [[0.0048573859699118024, 29.74384132016905]], None,
                               [[2177204.7821467514, 3.657518858287462e-13]])
    assert fill.units == pytest.approx([1.34634561e-8], rel=1e-6)


def test_users_of_no_resource_keep_their_rows():
    fill = progressive_filling([], [[], []])
    assert fill.units.shape == (2,) and fill.allocation.shape == (2, 0)
