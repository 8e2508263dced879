"""DRF's alternatives, behind the same interface as :func:`governor.fairness.drf.progressive_filling`.

Every allocator (an "allocation policy" in the paper's words; ``--policy`` on the command line)
takes ``(capacity (m,), demand (n, m), weight (n,) or (n, m), max_units (n,),
holdings (n, m))`` and returns a :class:`governor.fairness.drf.Fill`, so ``drfgov allocate --policy``
and ``drfgov compare`` summarise them all alike. Units are divisible; holdings are consumed
capacity that is never taken back.

* ``drf`` — weighted DRF (paper §4, :mod:`governor.fairness.drf`).
* ``asset`` — Asset Fairness (§5.1): equalise each user's *sum* of resource shares
  ``Σ_r x·d_r/C_r`` (divided by her weight), by progressive filling.
* ``ceei`` — Competitive Equilibrium from Equal Incomes as the Nash bargaining solution
  (§5.2): maximise ``Σ_i w_i·log x_i`` subject to capacity, through its prices (:mod:`governor.fairness.market`).
* ``slots`` — slot-based fair sharing, as the Hadoop Fair Scheduler: the capacity is cut into
  ``slots`` equal slots (each ``C/slots`` of every resource); a unit takes as many whole slots
  as its largest resource needs, and slots are shared max-min fairly (weighted).
* ``cpu-fair`` — max-min fairness on CPU alone (the resource named ``cpu``); users who demand
  no CPU are filled by their dominant share.

Weights for the scalar policies (slots, ceei): the user's weight on her dominant resource.
"""

from __future__ import annotations

import math
import numpy as np
from numpy.typing import ArrayLike

from governor.fairness.drf import Fill, fill_from_units, progressive_filling, validate_problem
from governor.fairness.market import nash_bargaining

__all__ = ["ALLOCATORS", "AllocatorError", "allocate_with", "asset_fairness", "ceei", "cpu_fair", "scalar_filling", "slot_fair"]

ALLOCATORS = ("drf", "asset", "ceei", "slots", "cpu-fair")
DEFAULT_SLOTS = 4
_EPS = 1e-12


class AllocatorError(ValueError):
    """An allocator cannot run on this problem (e.g. cpu-fair without a ``cpu`` resource)."""


class UnknownAllocator(AllocatorError):
    """No allocator of that name (:data:`ALLOCATORS`): the caller's choice, not the problem's."""


def scalar_filling(capacity: np.ndarray, demand: np.ndarray, rate: np.ndarray, max_units: np.ndarray,
                   start: np.ndarray | None = None) -> np.ndarray:
    """Progressive filling by a scalar share: user ``i`` holds share ``start_i + rate_i·x_i``;
    the level rises for every user not yet frozen, and a user freezes when a resource she
    demands saturates or she reaches ``max_units``. Exact, event by event. Returns units ``(n,)``.

    ``rate`` ``(n,)`` must be > 0 for users that demand anything; users demanding nothing get 0.
    """
    n, m = demand.shape
    start = np.zeros(n) if start is None else start
    x = np.zeros(n)
    free = capacity.astype(float).copy()
    uses = demand > 0
    active = uses.any(axis=1) & (max_units > 0) & (rate > 0)
    active &= ~(uses & (free <= _EPS * np.maximum(capacity, 1))[None, :]).any(axis=1)
    level = float(start[active].min()) if active.any() else 0.0
    finite_cap = np.isfinite(max_units)
    cap_at = np.where(finite_cap, max_units - _EPS * np.maximum(np.where(finite_cap, max_units, 0), 1), np.inf)
    while active.any():
        growing = active & (start <= level + _EPS)
        speed = np.where(growing, 1.0 / np.where(rate > 0, rate, 1.0), 0.0)  # dx/dlevel
        slope = speed @ demand  # resource use per unit of level
        with np.errstate(divide="ignore", invalid="ignore"):
            to_saturate = np.where(slope > 0, free / slope, np.inf)
            to_cap = np.where(growing, (max_units - x) * rate, np.inf)
        to_start = np.where(active & ~growing, start - level, np.inf)
        step = min(to_saturate.min(), to_cap.min(), to_start.min())
        if not math.isfinite(step):
            raise ArithmeticError("scalar filling: unbounded (a user with no cap uses no capacity)")
        x += speed * step
        free -= slope * step
        level += step
        saturated = free <= _EPS * np.maximum(capacity, 1)
        capped = growing & (x >= cap_at)
        x[capped] = np.minimum(x[capped], max_units[capped])
        blocked = (uses & saturated[None, :]).any(axis=1)
        frozen = active & (capped | blocked)
        if not frozen.any() and not np.isfinite(to_start.min()):
            raise ArithmeticError(f"scalar filling stalled at level {level!r}")
        active &= ~frozen
    return x


def _shares_of(C: np.ndarray, amounts: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(C > 0, amounts / np.where(C > 0, C, 1.0), 0.0)


def asset_fairness(capacity: ArrayLike, demand: ArrayLike, weight: ArrayLike | None = None,
                   max_units: ArrayLike | None = None, holdings: ArrayLike | None = None) -> Fill:
    """Asset Fairness (paper §5.1): equal weighted sums of shares, ``Σ_r s_ir / w_ir``."""
    C, D, W, M, H = validate_problem(capacity, demand, weight, max_units, holdings)  # W: (n, m)
    rate = (_shares_of(C, D) / W).sum(axis=1)
    start = (_shares_of(C, H) / W).sum(axis=1)
    units = scalar_filling(C - H.sum(axis=0), D, rate, M, start)
    return fill_from_units(C, D, W, H, units)


def cpu_fair(capacity: ArrayLike, demand: ArrayLike, weight: ArrayLike | None = None,
             max_units: ArrayLike | None = None, holdings: ArrayLike | None = None, cpu: int = 0) -> Fill:
    """Max-min fairness on resource ``cpu`` (an index) alone, weighted by the CPU weight."""
    C, D, W, M, H = validate_problem(capacity, demand, weight, max_units, holdings)  # W: (n, m)
    s = _shares_of(C, D)
    dominant = s.max(axis=1)
    rate = np.where(s[:, cpu] > 0, s[:, cpu], dominant) / W[:, cpu]
    held = _shares_of(C, H)
    start = np.where(s[:, cpu] > 0, held[:, cpu], held.max(axis=1)) / W[:, cpu]
    units = scalar_filling(C - H.sum(axis=0), D, rate, M, start)
    return fill_from_units(C, D, W, H, units)


def _scalar_weight(D: np.ndarray, W2: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Each user's weight on her dominant resource (by demand)."""
    j = _shares_of(C, D).argmax(axis=1)
    return W2[np.arange(D.shape[0]), j]


def slot_fair(capacity: ArrayLike, demand: ArrayLike, weight: ArrayLike | None = None,
              max_units: ArrayLike | None = None, holdings: ArrayLike | None = None,
              slots: int = DEFAULT_SLOTS) -> Fill:
    """Slot-based fair sharing with ``slots`` equal slots (see the module docstring)."""
    if not isinstance(slots, int) or slots < 1:
        raise AllocatorError(f"slots: expected a whole number ≥ 1, got {slots!r}")
    C, D, W, M, H = validate_problem(capacity, demand, weight, max_units, holdings)
    slot_share = _shares_of(C, D) * slots  # slots per unit, before rounding up
    per_unit = np.where(slot_share.max(axis=1) > 0, np.ceil(slot_share.max(axis=1) - 1e-9), 0.0)
    held = np.ceil(_shares_of(C, H).max(axis=1) * slots - 1e-9) if H.any() else np.zeros(D.shape[0])
    w = _scalar_weight(D, W, C)
    free = np.array([max(0.0, slots - held.sum())])
    units = scalar_filling(free, per_unit[:, None], per_unit / slots / w, M, held / slots / w)
    return fill_from_units(C, D, W, H, units)


def ceei(capacity: ArrayLike, demand: ArrayLike, weight: ArrayLike | None = None,
         max_units: ArrayLike | None = None, holdings: ArrayLike | None = None) -> Fill:
    """CEEI as the Nash bargaining solution (paper §5.2): maximise ``Σ w_i log x_i``.

    Solved through its prices (:func:`governor.fairness.market.nash_bargaining`); users who demand nothing, have
    ``max_units`` 0 or need a resource already exhausted get 0.
    """
    C, D, W, M, H = validate_problem(capacity, demand, weight, max_units, holdings)
    free = C - H.sum(axis=0)
    w_all = _scalar_weight(D, W, C)
    uses = D > 0
    exhausted = free <= _EPS * np.maximum(C, 1)
    idx = np.flatnonzero(uses.any(axis=1) & (M > 0) & ~(uses & exhausted[None, :]).any(axis=1))
    units = np.zeros(D.shape[0])
    if idx.size:
        # per-user unit of measure: her DRF units without caps, or her cap when smaller
        scale = np.maximum(progressive_filling(free, D[idx], None, np.full(idx.size, np.inf)).units, 1e-9)
        tiny = M[idx] < 1e-6 * scale  # a cap far below her fair units: she simply gets it
        units[idx[tiny]] = M[idx[tiny]]
        free = free - M[idx[tiny]] @ D[idx[tiny]]
        idx, scale = idx[~tiny], np.minimum(scale[~tiny], M[idx[~tiny]])
    if idx.size:
        units[idx] = nash_bargaining(D[idx] * scale[:, None], w_all[idx], M[idx] / scale, free) * scale
    return fill_from_units(C, D, W, H, units)


def allocate_with(allocator: str, capacity, demand, weight=None, max_units=None, holdings=None, *,
                  slots: int = DEFAULT_SLOTS, cpu: int | None = None) -> Fill:
    """Run ``allocator`` (one of :data:`ALLOCATORS`). ``cpu`` is the CPU resource's index (cpu-fair).

    Raises:
        UnknownAllocator: no allocator of that name.
        AllocatorError: cpu-fair without a CPU resource.
    """
    if allocator == "drf":
        return progressive_filling(capacity, demand, weight, max_units, holdings)
    if allocator == "asset":
        return asset_fairness(capacity, demand, weight, max_units, holdings)
    if allocator == "ceei":
        return ceei(capacity, demand, weight, max_units, holdings)
    if allocator == "slots":
        return slot_fair(capacity, demand, weight, max_units, holdings, slots=slots)
    if allocator == "cpu-fair":
        if cpu is None:
            raise AllocatorError("cpu-fair needs a resource named cpu")
        return cpu_fair(capacity, demand, weight, max_units, holdings, cpu=cpu)
    check_allocator(allocator)
    raise AssertionError(f"allocator {allocator!r} is listed but has no branch here")


def check_allocator(allocator: str) -> None:
    """Raises :class:`UnknownAllocator` unless ``allocator`` is one of :data:`ALLOCATORS`."""
    if allocator not in ALLOCATORS:
        raise UnknownAllocator(f"unknown policy {allocator!r}; expected one of: {', '.join(ALLOCATORS)}")
