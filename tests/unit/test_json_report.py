"""``allocate --json`` written from the arrays is the text ``json.dumps(to_json(), indent=2)`` gives."""

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.fairness.drf import fill_from_units, progressive_filling
from governor.offline.allocate import named_result, solve_fill
from governor.offline.json_report import allocation_json
from governor.offline.problem import load_problem

REPO = Path(__file__).resolve().parents[2]


def slow_path(resources, names, fill, discrete=False):
    return json.dumps(named_result(resources, names, fill, discrete).to_json(), indent=2)


@pytest.mark.parametrize("discrete", [False, True], ids=["filling", "discrete"])
def test_the_paper_example_as_the_slow_path_writes_it(discrete):
    problem = load_problem(REPO / "configs" / "paper-example.yaml")
    fill = solve_fill(problem, discrete=discrete)
    names = [u.name for u in problem.users]
    assert allocation_json(problem.resources, names, fill, discrete) == slow_path(problem.resources, names, fill, discrete)


def test_names_that_need_escaping_an_idle_user_and_no_saturation():
    resources = ["cpu", 'disk "a"', "réseau"]
    names = ["alice", "bob\n", "zoë", "\u2603"]
    demand = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [3.0, 1.0, 0.0], [1e-12, 1e18, 0.5]])
    fill = progressive_filling([1e3, 2e18, 7.0], demand, max_units=[1, np.inf, 2, 1e-3])
    assert allocation_json(resources, names, fill) == slow_path(resources, names, fill)


def test_no_users():
    fill = progressive_filling([4.0], np.zeros((0, 1)))
    assert allocation_json(["cpu"], [], fill) == slow_path(["cpu"], [], fill)


def test_numbers_json_writes_in_their_own_notation():
    """Rounded to 12 digits: whole numbers, 10^12…10^16 (positional in repr, not in %g), the
    edges of both notations, tiny, huge, and what json.dumps names (Infinity, NaN)."""
    units = np.array([3.0, 2.9999999999999996, 1e12 + 0.5, 123456789012345.6, 1e16, 1.5e-5, 0.1 + 0.2, -0.0, 0.0,
                      999999999999.7, 9999999999999999.0, 1e15, 1.2345678901234e17, 1e-4, 9.99999999999999e-5, 1e-5,
                      5e-324, 1.7976931348623157e308, 123456.7890123456, np.inf, np.nan])
    n = units.size
    fill = fill_from_units([1e30, 1e30], np.ones((n, 2)), np.ones(n), np.zeros((n, 2)), units)
    names = [f"u{i}" for i in range(n)]
    assert allocation_json(["a", "b"], names, fill) == slow_path(["a", "b"], names, fill)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 8), st.integers(1, 4), st.integers(0, 2**32 - 1), st.booleans())
def test_random_problems(n, m, seed, discrete):
    rng = np.random.default_rng(seed)
    demand = rng.uniform(0, 10, (n, m)) * (rng.random((n, m)) > 0.3)
    capacity = rng.uniform(0, 100, m) * (rng.random(m) > 0.1)
    weight = rng.choice([0.5, 1.0, 3.0], (n, m))
    fill = progressive_filling(capacity, demand, weight, rng.choice([1.0, 7.0, np.inf], n))
    if discrete:
        fill = fill_from_units(capacity, demand, weight, np.zeros((n, m)), np.floor(fill.units))
    resources = [f"r{j}" for j in range(m)]
    names = [f"user{i}" for i in range(n)]
    assert allocation_json(resources, names, fill, discrete) == slow_path(resources, names, fill, discrete)
