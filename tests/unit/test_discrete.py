"""The online Algorithm 1 scheduler: skipping, releases, membership and weight changes."""

import numpy as np
import pytest
from hypothesis import given, settings

from governor.fairness.discrete import DiscreteDRF, UnknownUser
from governor.fairness.drf import progressive_filling
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


@pytest.mark.parametrize("k", [1, 2, 5, 7])
def test_matches_progressive_filling_where_the_divisible_answer_is_whole_tasks(k):
    """The paper's example scaled by k: DRF's divisible answer (3k, 2k) is integral, and
    Algorithm 1 reaches exactly it."""
    drf = DiscreteDRF([9 * k, 18 * k])
    drf.add_user("A", [1, 4])
    drf.add_user("B", [3, 1])
    drf.schedule()
    divisible = progressive_filling([9 * k, 18 * k], [[1, 4], [3, 1]]).units
    assert [drf.tasks("A"), drf.tasks("B")] == list(divisible) == [3 * k, 2 * k]


@settings(max_examples=200, deadline=None)
@given(instances(max_users=5))
def test_schedule_stops_only_when_no_unsatisfied_users_next_task_fits(inst):
    """The skipping variant never stops early (the paper's pseudo-code returns at the first
    task that does not fit); and it never overfills a resource."""
    drf = DiscreteDRF(inst.capacity)
    caps = [None if np.isinf(m) else int(m) for m in inst.max_units]
    for i, (d, w, cap) in enumerate(zip(inst.demand, inst.weight, caps)):
        drf.add_user(i, d, weight=w, max_tasks=cap)
    drf.schedule(max_decisions=20_000)
    consumed = np.array(drf.consumed)
    assert np.all(consumed <= inst.capacity + 1e-9)
    for i, (d, cap) in enumerate(zip(inst.demand, caps)):
        if cap is not None and drf.tasks(i) >= cap:
            continue
        assert np.any(consumed + d > inst.capacity + 1e-9), f"user {i}'s next task still fits"


def test_a_user_removed_and_added_again_is_picked_at_her_new_share():
    """Her old heap entry (version 0, like the new account's) was taken for the new account's:
    back holding half, she was picked at the share she had before (the DRF audit)."""
    s = DiscreteDRF([10.0])
    s.add_user("B", [1.0])
    s.add_user("A", [1.0])
    s.remove_user("A")
    s.add_user("A", [1.0], holdings=[5.0])
    assert s.schedule(4) == ["B", "B", "B", "B"]


def test_tasks_that_fit_but_for_float_drift_are_launched():
    """0.1 + 0.1 + 0.1 > 0.3 in floats: the third task was refused (the DRF audit)."""
    s = DiscreteDRF([0.3])
    s.add_user("u", [0.1])
    assert len(s.schedule()) == 3
