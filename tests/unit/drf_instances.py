"""Hypothesis strategies for random DRF instances (shared by the property tests)."""

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st


@dataclass
class Instance:
    capacity: np.ndarray  # (m,)
    demand: np.ndarray  # (n, m)
    weight: np.ndarray  # (n,)
    max_units: np.ndarray  # (n,), inf = unbounded
    holdings: np.ndarray | None = None  # (n, m)

    @property
    def args(self):
        return self.capacity, self.demand, self.weight, self.max_units, self.holdings


amount = st.integers(0, 20).map(float)
positive = st.integers(1, 20).map(float)


@st.composite
def instances(draw, min_users=1, max_users=6, max_resources=4, weighted=True, capped=True, strictly_positive=False, holding=False):
    m = draw(st.integers(1, max_resources))
    n = draw(st.integers(min_users, max_users))
    capacity = np.array(draw(st.lists(st.integers(1, 100).map(float), min_size=m, max_size=m)))
    cell = positive if strictly_positive else amount
    rows = draw(st.lists(st.lists(cell, min_size=m, max_size=m).filter(any), min_size=n, max_size=n))
    demand = np.array(rows).reshape(n, m)
    weight = np.array(draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=n, max_size=n))) if weighted else np.ones(n)
    caps = st.one_of(st.just(np.inf), st.integers(0, 30).map(float)) if capped else st.just(np.inf)
    max_units = np.array(draw(st.lists(caps, min_size=n, max_size=n)))
    holdings = None
    if holding:
        cells = st.one_of(st.just(0.0), st.just(0.0), st.integers(0, 40).map(float))
        holdings = np.array(draw(st.lists(cells, min_size=n * m, max_size=n * m))).reshape(n, m)
    return Instance(capacity, demand, weight, max_units, holdings)


def tasks_from(allocation: np.ndarray, demand: np.ndarray) -> float:
    """Units of ``demand`` an allocation can run (Leontief utility)."""
    pos = demand > 0
    return float(np.min(allocation[pos] / demand[pos])) if pos.any() else float("inf")
