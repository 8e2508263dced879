"""The sweep's shortcuts (issue 16) agree with its general path.

With no holdings, :class:`governor.fairness.drf._Curves` builds its events straight from the
origin (a start at level 0, then the caps) instead of walking each user's lower envelope;
frozen users leave the curves. Here the shortcut's events are held to the envelope walk's, and
a fill in which one user holds a negligible amount (the general path) to the fill in which
nobody holds anything (the shortcut).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.fairness.drf import _Curves, progressive_filling, validate_problem


def curves(C, D, W, M, H):
    with np.errstate(divide="ignore", invalid="ignore"):
        return _Curves(*validate_problem(C, D, W, M, H), np.zeros(len(C), bool))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_events_from_the_origin_are_the_envelope_walks(n, m, seed):
    rng = np.random.default_rng(seed)
    C = rng.uniform(1, 50, m)
    D = rng.choice([0.5, 1.0, 2.0, 3.7], (n, m)) * (rng.random((n, m)) > 0.3)
    D[:, 0] += 0.25  # everybody demands something
    W = rng.choice([0.5, 1.0, 2.0], (n, m))
    M = np.where(rng.random(n) < 0.5, rng.choice([1.0, 2.5, 7.0], n), np.inf)
    shortcut = curves(C, D, W, M, None)
    assert not shortcut.holds
    walked = curves(C, D, W, M, None)
    with np.errstate(divide="ignore", invalid="ignore"):
        walked._events(*walked._envelope())  # the general path, on the same (empty) holdings
    for name in ("ev_t", "ev_user", "ev_dslope", "ev_jump", "jump"):
        assert np.array_equal(getattr(shortcut, name), getattr(walked, name)), name


@pytest.mark.parametrize("seed", range(20))
def test_a_negligible_holding_changes_the_fill_negligibly(seed):
    """The general path (someone holds something) and the shortcut (nobody does) give the same
    allocation up to the holding itself."""
    rng = np.random.default_rng(seed)
    n, m = 40, 3
    C = rng.uniform(10, 100, m)
    D = rng.uniform(0, 5, (n, m)) * (rng.random((n, m)) > 0.2)
    D[:, 0] += 0.1
    M = np.where(rng.random(n) < 0.5, rng.uniform(1, 5, n), np.inf)
    H = np.zeros((n, m))
    H[0, 0] = 1e-9
    plain, held = progressive_filling(C, D, None, M), progressive_filling(C, D, None, M, H)
    assert held.units == pytest.approx(plain.units, rel=1e-6, abs=1e-6)
    assert list(held.saturated) == list(plain.saturated)
