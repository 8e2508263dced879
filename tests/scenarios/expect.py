"""The allocation weighted DRF defines for measured demand vectors, with the project's own solver.

Each running user wants at most one unit of her demand vector (what she used alone), exactly as
the governor asks progressive filling (governor/loop.py ``_allocate``), over the capacity the
governor uses. A resource is **contended** when DRF saturates it or the users together demand
at least its capacity (the governor's own test).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from governor.control.resources import Resource
# The one import of the solver (the project's own progressive filling).
from governor.fairness.drf import progressive_filling

__all__ = ["Expectation", "expected_drf", "weight_kind"]


def weight_kind(resource: str) -> str:
    """The weight that applies to a resource, as the governor has it: ``io`` for a disk, ``net``
    for a link, else the resource's own."""
    return Resource.parse(resource).weight_kind


@dataclass(frozen=True)
class Expectation:
    """Weighted DRF over ``capacity`` (resource → amount, the governor's units).

    ``allocation[user][resource]``; ``dominant[user]`` her dominant resource (by allocation,
    as a share of capacity); ``contended`` the contended resources.
    """

    capacity: Mapping[str, float]
    allocation: Mapping[str, Mapping[str, float]]
    dominant: Mapping[str, str]
    contended: frozenset[str]

    def to_json(self) -> dict:
        return {"capacity": dict(self.capacity), "allocation": {u: dict(a) for u, a in self.allocation.items()},
                "dominant": dict(self.dominant), "contended": sorted(self.contended)}


def expected_drf(capacity: Mapping[str, float], demand: Mapping[str, Mapping[str, float]],
                 weight: Mapping[str, Mapping[str, float]]) -> Expectation:
    """Weighted progressive filling of ``demand`` (user → resource → amount wanted alone) over
    ``capacity``; ``weight`` is user → kind (cpu, memory, io, net) → weight. Resources a user's
    vector leaves out count as 0; resources outside ``capacity`` are ignored."""
    resources = list(capacity)
    users = list(demand)
    if not users:
        return Expectation(dict(capacity), {}, {}, frozenset())
    cap = np.array([capacity[r] for r in resources], dtype=float)
    want = np.array([[max(0.0, demand[u].get(r, 0.0)) for r in resources] for u in users], dtype=float)
    w = np.array([[weight[u].get(weight_kind(r), 1.0) for r in resources] for u in users], dtype=float)
    fill = progressive_filling(cap, want, w, np.ones(len(users)))
    allocation = {u: {r: float(fill.allocation[i, j]) for j, r in enumerate(resources)} for i, u in enumerate(users)}
    dominant = {}
    for i, u in enumerate(users):
        shares = fill.allocation[i] / np.where(cap > 0, cap, np.inf)
        dominant[u] = resources[int(np.argmax(shares))]
    total = want.sum(axis=0)
    contended = frozenset(r for j, r in enumerate(resources) if fill.saturated[j] or total[j] >= cap[j])
    return Expectation(dict(capacity), allocation, dominant, contended)
