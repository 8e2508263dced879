"""The DRF paper's own numbers (Ghodsi et al., NSDI 2011)."""

from fractions import Fraction as F

import numpy as np
import pytest

from governor.fairness.discrete import DiscreteDRF
from governor.fairness.drf import progressive_filling

PAPER_CAPACITY = [9, 18]  # §4.1: 9 CPUs, 18 GB
A_TASK, B_TASK = [1, 4], [3, 1]


def test_section_4_1_progressive_filling_gives_3_and_2_tasks():
    fill = progressive_filling(PAPER_CAPACITY, [A_TASK, B_TASK])
    assert fill.units == pytest.approx([3, 2])
    assert fill.allocation == pytest.approx(np.array([[3, 12], [6, 2]]))
    assert fill.dominant_share == pytest.approx([2 / 3, 2 / 3])
    assert list(fill.dominant_resource) == [1, 0]  # A: memory, B: CPU
    assert list(fill.saturated) == [True, False]


def test_table_1_algorithm_1_step_by_step():
    """Each row of Table 1: who is picked, both users' resource shares and the totals."""
    drf = DiscreteDRF(PAPER_CAPACITY)
    drf.add_user("B", B_TASK)  # the paper's tie at 0 goes to B; ties go to the user added first
    drf.add_user("A", A_TASK)
    table = [  # pick, A's shares, A's dominant share, B's shares, B's dominant share, CPU total, RAM total
        ("B", (0, 0), 0, (F(3, 9), F(1, 18)), F(1, 3), F(3, 9), F(1, 18)),
        ("A", (F(1, 9), F(4, 18)), F(2, 9), (F(3, 9), F(1, 18)), F(1, 3), F(4, 9), F(5, 18)),
        ("A", (F(2, 9), F(8, 18)), F(4, 9), (F(3, 9), F(1, 18)), F(1, 3), F(5, 9), F(9, 18)),
        ("B", (F(2, 9), F(8, 18)), F(4, 9), (F(6, 9), F(2, 18)), F(2, 3), F(8, 9), F(10, 18)),
        ("A", (F(3, 9), F(12, 18)), F(2, 3), (F(6, 9), F(2, 18)), F(2, 3), 1, F(14, 18)),
    ]
    for pick, a_shares, a_dom, b_shares, b_dom, cpu_total, ram_total in table:
        assert drf.schedule_one() == pick
        for user, shares, dom in (("A", a_shares, a_dom), ("B", b_shares, b_dom)):
            alloc = drf.allocation(user)
            assert [alloc[0] / 9, alloc[1] / 18] == pytest.approx([float(s) for s in shares])
            assert drf.dominant_share(user) == pytest.approx(float(dom))
        assert drf.consumed == pytest.approx([float(cpu_total) * 9, float(ram_total) * 18])
    assert drf.schedule_one() is None  # CPU is saturated: nothing else fits
    assert (drf.tasks("A"), drf.tasks("B")) == (3, 2)


def test_section_4_3_equal_per_resource_weights_give_share_ratio_w_i_over_w_j():
    # A weight 2, B weight 1: x/9 = y/3 (weighted shares equal) until memory saturates at
    # 4x + y = 13y = 18  =>  y = 18/13, x = 54/13 (CPU: 6y < 9); dominant shares 12/13 and
    # 6/13, ratio 2 = w_A/w_B.
    fill = progressive_filling(PAPER_CAPACITY, [A_TASK, B_TASK], weight=[2, 1])
    assert fill.units == pytest.approx([54 / 13, 18 / 13])
    assert fill.dominant_share == pytest.approx([12 / 13, 6 / 13])
    assert fill.dominant_share[0] / fill.dominant_share[1] == pytest.approx(2.0)
    assert fill.weighted_share == pytest.approx([6 / 13, 6 / 13])
    per_resource = progressive_filling(PAPER_CAPACITY, [A_TASK, B_TASK], weight=[[2, 2], [1, 1]])
    assert per_resource.units == pytest.approx(fill.units)


def test_per_resource_weight_only_on_non_dominant_resource_changes_nothing():
    # §4.3: s_i = max_j u_ij / w_ij. Raising A's CPU weight (not her dominant resource, and
    # never her maximum) leaves the unweighted result unchanged.
    fill = progressive_filling(PAPER_CAPACITY, [A_TASK, B_TASK], weight=[[2, 1], [1, 1]])
    assert fill.units == pytest.approx([3, 2])


def test_when_a_resource_is_exhausted_users_not_needing_it_keep_growing():
    # §4.1: "if a resource gets exhausted, users that do not need that resource can still
    # continue receiving higher shares of the other resources".
    fill = progressive_filling([10, 10], [[1, 1], [1, 0], [0, 1]])
    # level t: x0 = 10t, x1 = 10t, x2 = 10t; CPU: 20t = 10 at t = 0.5 freezes users 0 and 1;
    # user 2 then takes the remaining 5 of memory.
    assert fill.units == pytest.approx([5, 5, 5])
    fill = progressive_filling([10, 20], [[1, 1], [1, 0], [0, 1]])
    # CPU saturates at t = 0.5 (x0 = x1 = 5); memory: 5 used by user 0, user 2 takes 15.
    assert fill.units == pytest.approx([5, 5, 15])


def test_demand_met_users_release_the_rest_like_max_min():
    # §4.1: "when a user's total demand is met ... the excess resources will be split among
    # the other users, much like in max-min fairness".
    fill = progressive_filling([12], [[1], [1], [1]], max_units=[2, np.inf, np.inf])
    assert fill.units == pytest.approx([2, 5, 5])
