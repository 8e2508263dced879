"""The paper's fairness properties (§3), checked on one instance and one allocation.

Users have Leontief utilities: the units of work an allocation ``a`` lets user ``i`` run are
``u_i(a) = min(max_units_i, min_{r: d_ir > 0} a_r / d_ir)``. Weights scale entitlements:
with weights ``w``, user ``i``'s static partition is ``w_ir / Σ_j w_jr`` of every resource, and
she compares her allocation with another's scaled by ``w_i / w_j``. Holdings are left out:
the properties speak of what the policy hands out.

* **Sharing incentive** — each user runs at least as much as on her static partition.
* **Envy-freeness** — no user could run more with another's (weight-scaled) allocation.
* **Pareto efficiency** — no user could run more without another running less. With Leontief
  utilities and allocations that are exactly ``units × demand``, that is: every user below
  her cap is blocked by a saturated resource she demands.
* **Strategy-proofness** — checked by search: each user in turn misreports her demand vector
  (each resource scaled by each of :data:`MISREPORT_FACTORS`, one resource at a time, and the
  whole vector skewed towards each resource), and we see whether what she is then given lets
  her run more of her *true* work. A found lie is a proof of violation; none found is evidence.
  Each lie costs one run of the policy, so the search tries at most ``budget`` of them
  (:data:`MISREPORT_BUDGET`), spread evenly over users and lies; the check says how many it
  tried of how many there were.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from governor.fairness.drf import Fill

__all__ = ["MISREPORT_BUDGET", "MISREPORT_FACTORS", "PropertyCheck", "check_all", "envy_free", "pareto_efficient", "sharing_incentive",
           "strategy_proof", "units_from"]

MISREPORT_FACTORS = (0.25, 0.5, 0.75, 0.9, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0)
MISREPORT_BUDGET = 400  # policy runs one strategy-proofness search may take
RTOL = 1e-5  # relative: CEEI's prices settle to 1e-7 of each resource (governor.fairness.market)


@dataclass(frozen=True)
class PropertyCheck:
    """Whether a property holds; when it does not, a witness in words (users by index)."""

    name: str
    holds: bool
    witness: str | None = None
    worst: tuple | None = None  # machine-readable witness, e.g. (user, other user, gain)
    searched: tuple[int, int] | None = None  # a search's (tried, possible) cases


def units_from(allocation: np.ndarray, demand: np.ndarray, max_units: float) -> float:
    """``u_i(a)``: units a Leontief user with ``demand`` runs on ``allocation`` (inf if she demands nothing)."""
    needs = demand > 0
    if not needs.any():
        return float("inf")
    return float(min(max_units, (allocation[needs] / demand[needs]).min()))


def _better(new: float, old: float) -> bool:
    return new > old * (1 + RTOL) + 1e-9  # envy_free applies the same test to arrays


def sharing_incentive(C, D, W, M, fill: Fill, names) -> PropertyCheck:
    partition = C[None, :] * W / W.sum(axis=0, keepdims=True)
    for i in range(D.shape[0]):
        alone = units_from(partition[i], D[i], M[i])
        if np.isfinite(alone) and _better(alone, fill.units[i]):
            return PropertyCheck("sharing incentive", False,
                                 f"{names[i]} runs {fill.units[i]:.4g} units, but {alone:.4g} on her static share",
                                 (i, float(fill.units[i]), alone))
    return PropertyCheck("sharing incentive", True)


def envy_free(C, D, W, M, fill: Fill, names) -> PropertyCheck:
    """The first user (in order) who would run more on another's weight-scaled allocation."""
    handed = fill.units[:, None] * D
    n = D.shape[0]
    for i in range(n):
        needs = D[i] > 0
        if not needs.any():
            continue
        scaled = handed[:, needs] * (W[i, needs] / W[:, needs]) / D[i, needs]  # (n, needs): per other user
        theirs = np.minimum(M[i], scaled.min(axis=1))
        envious = np.isfinite(theirs) & (theirs > fill.units[i] * (1 + RTOL) + 1e-9) & (np.arange(n) != i)  # _better
        if envious.any():
            j = int(np.flatnonzero(envious)[0])
            return PropertyCheck("envy-freeness", False,
                                 f"{names[i]} would run {theirs[j]:.4g} units on {names[j]}'s allocation, "
                                 f"not {fill.units[i]:.4g}", (i, j, float(fill.units[i]), float(theirs[j])))
    return PropertyCheck("envy-freeness", True)


def pareto_efficient(C, D, W, M, fill: Fill, names) -> PropertyCheck:
    slack = C - fill.consumed
    room = slack > RTOL * np.maximum(C, 1e-300)
    for i in range(D.shape[0]):
        needs = D[i] > 0
        if needs.any() and fill.units[i] < M[i] * (1 - RTOL) and room[needs].all():
            more = float((slack[needs] / D[i][needs]).min())
            return PropertyCheck("Pareto efficiency", False,
                                 f"{names[i]} could run {more:.4g} more units from idle capacity, hurting no one",
                                 (i, more))
    return PropertyCheck("Pareto efficiency", True)


def misreports(d: np.ndarray) -> np.ndarray:
    """Lies to try for true demand ``d`` (m,), as rows (k, m): one resource scaled at a time, by
    each factor (a resource she does not use is asked for at ``(factor − 1)·max(d)``); lies
    equal to the truth or asking for nothing are left out."""
    f = np.asarray(MISREPORT_FACTORS)
    m = d.size
    lies = np.repeat(d[None, :], m * f.size, axis=0)  # row r·F + k: resource r scaled by factor k
    scaled = np.where(d[:, None] > 0, d[:, None] * f[None, :], np.where(f > 1, d.max() * (f - 1), 0.0)[None, :])
    lies[np.arange(m * f.size), np.repeat(np.arange(m), f.size)] = scaled.ravel()
    return lies[(lies != d).any(axis=1) & lies.any(axis=1)]


def strategy_proof(policy: Callable[..., Fill], C, D, W, M, fill: Fill, names, H=None,
                   budget: int = MISREPORT_BUDGET) -> PropertyCheck:
    """Search for a misreport that pays (see the module docstring): at most ``budget`` of them,
    evenly spaced over every user's lies in turn when there are more."""
    lies = [(i, lie) for i in range(D.shape[0]) if (D[i] > 0).any() for lie in misreports(D[i])]  # rows: views
    if len(lies) > budget:
        lies_tried = np.unique(np.linspace(0, len(lies) - 1, budget).round().astype(int))
        chosen = [lies[k] for k in lies_tried]
    else:
        chosen = lies
    searched = (len(chosen), len(lies))
    best = None
    for i, lie in chosen:
        reported = D.copy()
        reported[i] = lie
        given = policy(C, reported, W, M, H).allocation[i] - (0 if H is None else H[i])
        gain = units_from(given, D[i], M[i])
        if _better(gain, fill.units[i]) and (best is None or gain / max(fill.units[i], 1e-300) > best[3]):
            best = (i, lie, gain, gain / max(fill.units[i], 1e-300))
    if best is None:
        return PropertyCheck("strategy-proofness", True, searched=searched)
    i, lie, gain, _ = best
    shown = ", ".join(f"{v:g}" for v in lie)
    true = ", ".join(f"{v:g}" for v in D[i])
    return PropertyCheck("strategy-proofness", False,
                         f"{names[i]} reporting ⟨{shown}⟩ instead of ⟨{true}⟩ runs {gain:.4g} units, not {fill.units[i]:.4g}",
                         (i, [float(v) for v in lie], float(fill.units[i]), gain), searched)


def check_all(policy: Callable[..., Fill], C, D, W, M, fill: Fill, names, H=None) -> list[PropertyCheck]:
    """All four, in the paper's order."""
    return [sharing_incentive(C, D, W, M, fill, names), strategy_proof(policy, C, D, W, M, fill, names, H),
            envy_free(C, D, W, M, fill, names), pareto_efficient(C, D, W, M, fill, names)]
