"""Weighted Dominant Resource Fairness by progressive filling (pure: no I/O, clock or logging).

Source: Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of Multiple Resource
Types", NSDI 2011 — §4 (DRF), §4.3 (weighted DRF with per-resource weights).

Model (divisible resources, Leontief preferences). There are ``n`` users and ``m`` resources.
User ``i`` has a demand vector ``D_i`` per *unit* (a unit is one "task"; it may be any
positive real amount), an optional cap ``M_i`` on units, a weight vector ``W_i`` and holdings
``H_i`` already allocated. Receiving ``x_i`` units gives her the allocation
``A_i = H_i + x_i · D_i``. Her

* dominant share is ``max_r A_ir / C_r`` (unweighted),
* weighted share is ``max_r A_ir / (C_r · W_ir)`` (paper §4.3).

Progressive filling raises the weighted share of every unsatisfied user at the same rate; a
user freezes when her demand is met (``x_i = M_i``) or when a resource she demands saturates.
At a common weighted-share *level* ``t`` user ``i`` holds the most units whose weighted share
stays ``≤ t``::

    x_i(t) = 0                                                  for t < b_i
    x_i(t) = min(M_i, min_{r: D_ir > 0} (t·C_r·W_ir − H_ir) / D_ir)  for t ≥ b_i

where ``b_i`` is the weighted share of her holdings alone. ``x_i`` is piecewise linear and
non-decreasing in ``t`` (it jumps at ``b_i`` when her holdings' weighted share comes from a
resource she demands no more of), so the total use of each resource is too. The solver is an
exact event-driven sweep: it collects every breakpoint of every ``x_i``, sorts them once, and
finds each saturation level in closed form from cumulative sums — no epsilon stepping and no
bisection. At most one round per resource is needed, each ``O(n·m²)`` plus one sort.

Conventions: a resource with zero capacity (or whose capacity is used up by holdings) is
saturated from the start; resources with zero capacity are left out of shares (0/0). A user
whose demand vector is all zero, or whose cap is 0, receives no units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Fill", "fill_from_units", "progressive_filling", "shares"]

#: Relative tolerance used to decide that a resource is saturated (rounding, not stepping).
SATURATION_RTOL = 1e-9

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Fill:
    """Result of :func:`progressive_filling`.

    Shapes: ``n`` users, ``m`` resources.

    Attributes:
        units: ``(n,)`` units granted by this fill (not counting holdings).
        allocation: ``(n, m)`` holdings plus ``units · demand``, in the resources' own units.
        consumed: ``(m,)`` total allocation per resource.
        saturated: ``(m,)`` bool, resource fully allocated (or zero capacity).
        dominant_share: ``(n,)`` ``max_r allocation_r / capacity_r``.
        weighted_share: ``(n,)`` ``max_r allocation_r / (capacity_r · weight_r)``.
        dominant_resource: ``(n,)`` index of the resource giving the dominant share, ``-1``
            for a user with no allocation.
    """

    units: Array
    allocation: Array
    consumed: Array
    saturated: NDArray[np.bool_]
    dominant_share: Array
    weighted_share: Array
    dominant_resource: NDArray[np.intp]


def progressive_filling(
    capacity: ArrayLike,
    demand: ArrayLike,
    weight: ArrayLike | None = None,
    max_units: ArrayLike | None = None,
    holdings: ArrayLike | None = None,
) -> Fill:
    """Weighted DRF allocation of divisible resources by progressive filling (paper §4, §4.3).

    Args:
        capacity: ``(m,)`` capacity ``C_r ≥ 0`` of each resource.
        demand: ``(n, m)`` demand vector per unit, ``≥ 0``.
        weight: ``(n,)`` scalar weights or ``(n, m)`` per-resource weights, ``> 0``;
            default 1.
        max_units: ``(n,)`` cap on units, ``≥ 0``; ``inf`` (the default) is unbounded.
        holdings: ``(n, m)`` amounts already allocated, ``≥ 0``; default 0. Holdings are
            never taken back, even when they exceed a fair share.

    Returns:
        A :class:`Fill`.

    Raises:
        ValueError: a shape mismatch, a negative or non-finite amount, a non-positive weight,
            or a NaN cap.
    """
    C, D, W, M, H = _validated(capacity, demand, weight, max_units, holdings)
    n, m = D.shape
    units = np.zeros(n)
    free = C - H.sum(axis=0)
    saturated = (free <= SATURATION_RTOL * C) | (C <= 0)
    demands = D > 0
    active = demands.any(axis=1) & (M > 0) & ~(demands & saturated).any(axis=1)
    level = 0.0
    while active.any():
        idx = np.flatnonzero(active)
        curve = _Curves(C, D[idx], W[idx], M[idx], H[idx], saturated)
        t_star = max(curve.first_saturation(free, saturated), level)
        if not np.isfinite(t_star):  # nobody left can saturate anything: all reach their caps
            units[idx] = M[idx]
            break
        level = t_star
        x, frozen, newly_saturated = curve.settle(t_star, free, saturated, C)
        if not frozen.any():  # cannot happen in exact arithmetic; never loop forever on rounding
            raise ArithmeticError(f"progressive filling stalled at level {t_star!r}")
        units[idx[frozen]] = x[frozen]
        free -= x[frozen] @ D[idx[frozen]]
        saturated |= newly_saturated
        active[idx[frozen]] = False
    return fill_from_units(C, D, W, H, units)


def shares(capacity: ArrayLike, weight: ArrayLike, allocation: ArrayLike) -> tuple[Array, Array, NDArray[np.intp]]:
    """Dominant share, weighted share and dominant resource of each allocation.

    Args:
        capacity: ``(m,)`` capacities; resources with zero capacity are ignored.
        weight: ``(n,)`` or ``(n, m)`` weights, ``> 0``.
        allocation: ``(n, m)`` allocations.

    Returns:
        ``(dominant_share (n,), weighted_share (n,), dominant_resource (n,))`` where the
        dominant resource is the index of the largest unweighted share, ``-1`` when the
        allocation is zero. Source: paper §4 (dominant share) and §4.3 (weighted).
    """
    C = np.asarray(capacity, dtype=float)
    A = np.atleast_2d(np.asarray(allocation, dtype=float))
    W = _broadcast_weight(np.asarray(weight, dtype=float), A.shape)
    safe_c = np.where(C > 0, C, 1.0)
    share = np.where(C > 0, A / safe_c, 0.0)
    weighted = share / W
    dominant = share.max(axis=1, initial=0.0)
    resource = np.where(dominant > 0, share.argmax(axis=1) if A.shape[1] else -1, -1)
    return dominant, weighted.max(axis=1, initial=0.0), resource.astype(np.intp)


class _Curves:
    """The piecewise-linear functions ``x_i(t)`` of the still-active users, as sorted events.

    Each user contributes events at her breakpoints ``t``: a jump in units (only at ``b_i``)
    and a change of slope ``dx/dt``. Summing ``event · D_i`` over users gives each resource's
    use as a function of the level in closed form.
    """

    def __init__(self, C: Array, D: Array, W: Array, M: Array, H: Array, saturated: NDArray[np.bool_]):
        self.D, self.M = D, M
        usable = (C > 0) & ~saturated
        pos = (D > 0) & usable
        with np.errstate(divide="ignore", invalid="ignore"):
            # line r of user i: x = a_ir · t − c_ir; resources she does not demand never bind
            self.a = np.where(pos, C * W / np.where(pos, D, 1.0), np.inf)
            self.c = np.where(pos, H / np.where(pos, D, 1.0), 0.0)
            held = np.where(C > 0, H / (np.where(C > 0, C, 1.0) * W), 0.0)
        self.base = held.max(axis=1, initial=0.0)  # b_i: weighted share of holdings alone
        self.times = self._breakpoints()
        self._events()

    def value(self, t: Array) -> Array:
        """``x_i(t)`` for ``t`` of shape ``(n,)`` or ``(n, k)`` (``t ≥ b_i`` assumed)."""
        t = np.asarray(t, dtype=float)
        extra = (slice(None),) + (None,) * (t.ndim - 1) + (slice(None),)
        a, c = self.a[extra], self.c[extra]
        with np.errstate(invalid="ignore"):
            lines = np.where(np.isfinite(a), a * t[..., None] - c, np.inf)
        x = lines.min(axis=-1)
        return np.minimum(x, self.M.reshape((-1,) + (1,) * (t.ndim - 1)))

    def slope(self, t: Array) -> Array:
        """``dx_i/dt`` just after level ``t`` (``(n, k)``): the binding line's slope, 0 if capped."""
        probe = t[..., None]
        with np.errstate(invalid="ignore"):
            lines = np.where(np.isfinite(self.a[:, None, :]), self.a[:, None, :] * probe - self.c[:, None, :], np.inf)
        binding = lines.argmin(axis=-1)
        capped = np.take_along_axis(lines, binding[..., None], axis=-1)[..., 0] >= self.M[:, None]
        a = np.take_along_axis(np.broadcast_to(self.a[:, None, :], lines.shape), binding[..., None], axis=-1)[..., 0]
        return np.where(capped, 0.0, a)

    def _breakpoints(self) -> Array:
        """Sorted, de-duplicated breakpoints per user ``(n, k)``, ``inf``-padded."""
        n, m = self.a.shape
        a, c, b = self.a, self.c, self.base[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            cap_hit = (self.M[:, None] + c) / a  # line r reaches the cap
            cand = [b, cap_hit]
            if m > 1 and np.any(c > 0):
                i, j = np.triu_indices(m, k=1)
                cross = (c[:, i] - c[:, j]) / (a[:, i] - a[:, j])  # lines r and s cross
                cand.append(cross)
        t = np.concatenate(cand, axis=1)
        t = np.where(np.isfinite(t) & (t > b), t, np.inf)
        t[:, 0] = self.base
        t.sort(axis=1)
        t[:, 1:][t[:, 1:] == t[:, :-1]] = np.inf  # drop duplicates
        t.sort(axis=1)
        keep = np.isfinite(t).any(axis=0)
        return t[:, keep]

    def _events(self) -> None:
        t = self.times
        n, k = t.shape
        nxt = np.concatenate([t[:, 1:], np.full((n, 1), np.inf)], axis=1)
        probe = np.where(np.isfinite(nxt), (t + nxt) / 2, t + 1.0)
        finite = np.isfinite(t)
        slope = np.where(finite, self.slope(np.where(finite, probe, 0.0)), 0.0)
        # slope persists past the last breakpoint of each user
        slope = np.where(finite, slope, np.take_along_axis(slope, (finite.sum(axis=1) - 1)[:, None], axis=1))
        dslope = np.diff(slope, axis=1, prepend=0.0)
        self.jump = self.value(self.base)  # units received at b_i
        jump = np.zeros_like(t)
        jump[:, 0] = self.jump
        user = np.broadcast_to(np.arange(n)[:, None], t.shape)
        order = np.argsort(t[finite], kind="stable")
        self.ev_t = t[finite][order]
        self.ev_user = user[finite][order]
        self.ev_dslope = dslope[finite][order]
        self.ev_jump = jump[finite][order]

    def first_saturation(self, free: Array, saturated: NDArray[np.bool_]) -> float:
        """Lowest level at which some unsaturated resource's free capacity is used up."""
        Dr = self.D[self.ev_user]  # (E, m)
        cum_jump = np.cumsum(self.ev_jump[:, None] * Dr, axis=0)
        cum_slope = np.cumsum(self.ev_dslope[:, None] * Dr, axis=0)
        cum_slope_t = np.cumsum((self.ev_dslope * self.ev_t)[:, None] * Dr, axis=0)
        t = self.ev_t[:, None]
        used = cum_jump + t * cum_slope - cum_slope_t  # use just after each event
        best = np.inf
        for r in np.flatnonzero(~saturated):
            best = min(best, _crossing(self.ev_t, used[:, r], cum_slope[:, r], free[r]))
        return best

    def settle(self, t_star: float, free: Array, saturated: NDArray[np.bool_], C: Array):
        """Units at level ``t_star``, who freezes there, and which resources saturate.

        Users whose jump happens exactly at ``t_star`` share what is left of a resource that
        their jumps would overfill: they get the same fraction θ of their jump. Jumpers cut
        short freeze; jumpers that touch none of the resources that limit θ wait for the next
        round (their weighted share does not change during a jump).
        """
        on = self.base <= t_star
        x = np.where(on, self.value(np.maximum(self.base, t_star)), 0.0)
        jumper = (self.base == t_star) & (self.jump > 0)
        steady = np.where(jumper, 0.0, x) @ self.D
        jumped = np.where(jumper, x, 0.0) @ self.D
        tol = SATURATION_RTOL * C
        frozen_extra = np.zeros(x.shape, dtype=bool)
        if jumper.any():
            with np.errstate(divide="ignore", invalid="ignore"):
                theta_r = np.where((jumped > 0) & ~saturated, (free - steady) / jumped, np.inf)
            theta = float(min(1.0, max(0.0, theta_r.min())))
            if theta < 1.0:
                limiting = (theta_r <= theta + SATURATION_RTOL) & (jumped > 0)
                hit = jumper & (self.D[:, limiting] > 0).any(axis=1)
                x = np.where(hit, theta * x, np.where(jumper, 0.0, x))
                frozen_extra = hit
        use = x @ self.D
        newly = (use >= free - tol) & ~saturated & (self.D > 0).any(axis=0)
        frozen = frozen_extra | (self.D[:, newly] > 0).any(axis=1) | (x >= self.M)
        return x, frozen, newly


def _crossing(t: Array, used: Array, slope: Array, free: float) -> float:
    """Level where a non-decreasing piecewise-linear use (with jumps) first reaches ``free``."""
    tol = SATURATION_RTOL * max(free, 1.0)
    hit = np.flatnonzero(used >= free - tol)
    if hit.size == 0:
        s = slope[-1]
        return t[-1] + (free - used[-1]) / s if s > 0 else np.inf
    j = hit[0]
    if j == 0:
        return float(t[0])
    before = used[j - 1] + slope[j - 1] * (t[j] - t[j - 1])  # just before event j (no jump)
    if before >= free - tol and slope[j - 1] > 0:
        return float(t[j - 1] + (free - used[j - 1]) / slope[j - 1])
    return float(t[j])


def fill_from_units(capacity: ArrayLike, demand: ArrayLike, weight: ArrayLike, holdings: ArrayLike, units: ArrayLike) -> Fill:
    """The :class:`Fill` that granting ``units`` ``(n,)`` on top of ``holdings`` amounts to.

    Shapes as in :func:`progressive_filling`; used for allocations made by other means
    (Algorithm 1, other policies) so that every result is summarised the same way.
    """
    C, D, H = (np.asarray(v, dtype=float) for v in (capacity, demand, holdings))
    units = np.asarray(units, dtype=float)
    W = _broadcast_weight(np.asarray(weight, dtype=float), D.shape)
    allocation = H + units[:, None] * D
    consumed = allocation.sum(axis=0)
    saturated = consumed >= C * (1 - SATURATION_RTOL)
    dominant, weighted, resource = shares(C, W, allocation)
    return Fill(units, allocation, consumed, saturated, dominant, weighted, resource)


def _broadcast_weight(W: Array, shape: tuple[int, int]) -> Array:
    if W.ndim == 1:
        W = W[:, None]
    return np.broadcast_to(W, shape).astype(float)


def _validated(capacity, demand, weight, max_units, holdings):
    C = np.asarray(capacity, dtype=float)
    if C.ndim != 1:
        raise ValueError(f"capacity must be a vector, got shape {C.shape}")
    m = C.shape[0]
    D = np.asarray(demand, dtype=float).reshape(-1, m) if np.size(demand) else np.zeros((0, m))
    n = D.shape[0]
    W = _broadcast_weight(np.ones(n) if weight is None else np.asarray(weight, dtype=float), (n, m))
    M = np.full(n, np.inf) if max_units is None else np.asarray(max_units, dtype=float).reshape(n)
    H = np.zeros((n, m)) if holdings is None else np.asarray(holdings, dtype=float).reshape(n, m)
    for name, arr in (("capacity", C), ("demand", D), ("holdings", H)):
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise ValueError(f"{name} must be finite and ≥ 0")
    if not np.all(np.isfinite(W)) or np.any(W <= 0):
        raise ValueError("weight must be finite and > 0")
    if np.any(np.isnan(M)) or np.any(M < 0):
        raise ValueError("max_units must be ≥ 0 (inf for unbounded)")
    return C, D, W, M, H
