"""The column-at-a-time row reductions of the DRF core give numpy's own answers: equal values,
NaN where numpy gives NaN, the same dtype and shape, argmin's ties to the first column (a tie of
0.0 and -0.0 may keep either sign: numpy's own SIMD and scalar loops differ there). Issue 16:
they replace ``a.max(axis=1)`` and friends, which numpy runs ~10× slower on the solver's
``(users, resources)`` arrays."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from governor.fairness.drf import _row_argmin, _rows

SPECIAL = st.sampled_from([0.0, -0.0, 1.0, 2.0, np.inf, -np.inf, np.nan, 1e-300, 1e300])
FLOATS = st.one_of(SPECIAL, st.floats(allow_nan=True, allow_infinity=True))
shapes = st.tuples(st.integers(0, 7), st.integers(0, 6))


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, shapes, elements=FLOATS), st.sampled_from([None, 0.0, np.inf]))
def test_rows_equal_numpy_reductions(a, initial):
    for op in (np.maximum, np.minimum, np.fmin):
        if initial is None and a.shape[1] == 0:
            with pytest.raises(ValueError):
                op.reduce(a, axis=1)
            with pytest.raises(ValueError):
                _rows(op, a)
            continue
        kw = {} if initial is None else {"initial": initial}
        expected, got = op.reduce(a, axis=1, **kw), _rows(op, a, initial)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.array_equal(got, expected, equal_nan=True)


@settings(max_examples=300, deadline=None)
@given(arrays(np.bool_, shapes))
def test_rows_any_equals_numpy(a):
    assert np.array_equal(_rows(np.logical_or, a), a.any(axis=1))


@settings(max_examples=300, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(0, 7), st.integers(1, 6)),
              elements=st.one_of(st.sampled_from([0.0, 1.0, 2.0, np.inf]), st.floats(allow_nan=False))))
def test_row_argmin_is_numpy_argmin_ties_to_the_first(a):
    assert np.array_equal(_row_argmin(a), a.argmin(axis=1))
