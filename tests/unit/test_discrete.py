"""The online Algorithm 1 scheduler: skipping, releases, membership and weight changes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.discrete import DiscreteDRF, UnknownUser
from governor.drf import progressive_filling
from tests.unit.drf_instances import instances


def test_a_user_whose_task_does_not_fit_is_skipped_not_a_reason_to_stop():
    drf = DiscreteDRF([10])
    drf.add_user("big", [6])
    drf.add_user("small", [1])
    picks = drf.schedule()
    # big takes 6 first (tie → added first); her second task never fits, small fills the rest
    assert picks[0] == "big" and drf.tasks("big") == 1 and drf.tasks("small") == 4
    assert drf.consumed == [10]


def test_release_wakes_skipped_users():
    drf = DiscreteDRF([10])
    drf.add_user("big", [6])
    drf.add_user("small", [1])
    drf.schedule()
    drf.release("small", 4)
    assert drf.schedule_one() == "small"  # lowest weighted share first (0.0 < 0.6)
    drf.release("big")
    picks = drf.schedule()
    assert drf.tasks("big") == 1 and drf.consumed == [10], picks


def test_max_tasks_and_zero_demand():
    drf = DiscreteDRF([10, 10])
    drf.add_user("capped", [1, 1], max_tasks=2)
    drf.add_user("idle", [0, 0])
    drf.add_user("rest", [1, 0])
    drf.schedule()
    assert (drf.tasks("capped"), drf.tasks("idle"), drf.tasks("rest")) == (2, 0, 8)


def test_weights_change_the_split_and_can_be_changed_online():
    drf = DiscreteDRF([12])
    drf.add_user("a", [1], weight=2)
    drf.add_user("b", [1])
    drf.schedule()
    assert (drf.tasks("a"), drf.tasks("b")) == (8, 4)
    drf.set_weight("b", 2)
    drf.release("a", 2)
    drf.schedule()
    assert (drf.tasks("a"), drf.tasks("b")) == (6, 6)


def test_remove_user_releases_her_resources():
    drf = DiscreteDRF([4])
    drf.add_user("a", [1], holdings=[1])
    drf.add_user("b", [1])
    drf.schedule()
    assert drf.consumed == [4] and drf.weighted_share("a") == pytest.approx(0.5)
    drf.remove_user("a")
    assert drf.consumed == [2]
    drf.schedule()
    assert drf.tasks("b") == 4
    with pytest.raises(UnknownUser):
        drf.tasks("a")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda d: d.add_user("a", [1]), "already"),
        (lambda d: d.add_user("x", [1, 2]), "entries"),
        (lambda d: d.add_user("x", [-1]), "≥ 0"),
        (lambda d: d.add_user("x", [1], weight=0), "weight"),
        (lambda d: d.release("a", 1), "runs 0"),
    ],
)
def test_bad_calls_are_refused(call, message):
    drf = DiscreteDRF([4])
    drf.add_user("a", [1])
    with pytest.raises(ValueError, match=message):
        call(drf)


@settings(max_examples=100, deadline=None)
@given(instances(max_users=4, capped=False))
def test_small_tasks_converge_to_progressive_filling(inst):
    """With tasks 1/200 the size, Algorithm 1's allocation approaches the divisible one."""
    k = 200
    drf = DiscreteDRF(inst.capacity)
    for i, (d, w) in enumerate(zip(inst.demand, inst.weight)):
        drf.add_user(i, d / k, weight=w)
    drf.schedule()
    discrete = np.array([drf.weighted_share(i) for i in range(len(inst.weight))])
    divisible = progressive_filling(inst.capacity, inst.demand, inst.weight).weighted_share
    # Skipping leaves at most about one task per user unplaced, and any user may absorb that
    # leftover: her weighted share moves by at most n largest tasks (as a capacity fraction) / w_i.
    largest_task = (inst.demand / k / inst.capacity).max()
    bound = 2 * len(inst.weight) * largest_task / inst.weight
    assert np.all(np.abs(discrete - divisible) <= bound + 1e-9), (discrete, divisible)
