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

In floating point a level is one float: where a holding is far larger than the units it leaves
room for, no float level fills a resource within :data:`SATURATION_RTOL`, and the units are
moved along the curves instead (:meth:`_Curves.polish`); a round that is still past a capacity
— the sums' digits lost to cancellation, amounts 10^10 and more apart — is scaled back to fit
(:func:`_within`): a Fill never exceeds a capacity beyond the tolerance, but at such ranges
it may not be an exact DRF one (the DRF audit and review of 2026-11-28).

Conventions: a resource with zero capacity (or whose capacity is used up by holdings) is
saturated from the start; resources with zero capacity are left out of shares (0/0). A user
whose demand vector is all zero, or whose cap is 0, receives no units.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["Fill", "fill_from_units", "progressive_filling", "shares", "validate_problem"]

#: Relative tolerance used to decide that a resource is saturated (rounding, not stepping).
SATURATION_RTOL = 1e-9
#: Steps of Newton refinement of a saturation level the event sums put short of it.
REFINE_STEPS = 4
#: Lines of a user that bind together at a level (a tie, to rounding): apart by no more than
#: the rounding of the terms each was computed from, ``|a·t| + |c|`` (``a = C·W/D`` two
#: roundings, ``c`` one, ``a·t`` and ``a·t − c`` one more each: within 8 ε), or than a few of the
#: smallest floats (a holding of 6e-323 has no relative precision left). Not an absolute
#: amount: lines worth 1e-13 units (a demand of 10^12 per unit) are apart however close to 0,
#: and an absolute 1e-12 tied them — she took the flatter line and 6× the capacity (the DRF
#: audit of 2026-11-28); nor a generous multiple: 64 ε of a line of 10^11 tied one 4e-4 above it.
TIE_RTOL = 8 * float(np.finfo(float).eps)
TIE_ATOL = 8 * float(np.finfo(float).smallest_subnormal)
#: The largest step of level that :meth:`_Curves.polish` takes in units, in ulps of
#: ``max(|level|, 1)``.
POLISH_ULPS = 64

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
        ArithmeticError: no level froze anyone, to rounding (amounts 10^10 and more apart
            with holdings: 7 of 40,945 random instances over 1e-12 … 1e12 in the review of
            2026-11-28, 2 of ~38,000 with its fix of the jump's residue; none in narrower ranges).
    """
    C, D, W, M, H = validate_problem(capacity, demand, weight, max_units, holdings)
    n, m = D.shape
    units = np.zeros(n)
    free = C - H.sum(axis=0) if holdings is not None else C.copy()  # (no holdings: H is zeros)
    saturated = (free <= SATURATION_RTOL * C) | (C <= 0)
    demands = D > 0
    active = _rows(np.logical_or, demands) & (M > 0) & ~_rows(np.logical_or, demands & saturated)
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return fill_from_units(C, D, W, H, units)
    everyone = idx.size == n  # (then no copies of the inputs)
    # the curves divide by zero and multiply inf by 0 on purpose (lines that never bind): one
    # errstate for all of it, not one per step (each costs microseconds; issue 16)
    with np.errstate(divide="ignore", invalid="ignore"):
        curve = _Curves(C, *(v if everyone else v[idx] for v in (D, W, M, H)), saturated)
        level = 0.0
        for _ in range(2 * m + 2):  # each round saturates a resource (or settles a jump)
            if idx.size == 0:
                break
            t_star = max(curve.first_saturation(free, saturated, C), level)
            if not math.isfinite(t_star):  # nobody left can saturate anything: all reach their caps
                units[idx] = _within(curve.M, np.ones(idx.size, dtype=bool), curve.D, free, C)
                break
            # the events' level is exact but for rounding: within an ulp of it the units move,
            # before any step of the level
            x, frozen, newly_saturated = curve.polish(t_star, *curve.settle(t_star, free, saturated, C),
                                                      free, saturated, C)
            settled = (t_star, x, frozen, newly_saturated) if frozen.any() else None
            for _ in range(REFINE_STEPS):
                if frozen.any() and not curve.overfull(x, free, C):
                    break
                # The level came from slopes summed over events: a steep line handing over to a
                # nearly flat one cancels most digits, and t* can fall short of the saturation by
                # more than the tolerance — or pass it, where a steep user's slope and its end at
                # her cap cancel (weights 10^12 apart: 3.0001 units of 3). Step to it along the
                # exact local slopes of the curves.
                t_star = max(curve.refine(t_star, x, free, saturated), level)
                x, frozen, newly_saturated = curve.settle(t_star, free, saturated, C)
                if frozen.any():
                    settled = (t_star, x, frozen, newly_saturated)
            if not frozen.any() and settled is not None:  # stepped back too far: the last level that froze
                t_star, x, frozen, newly_saturated = settled
            x, frozen, newly_saturated = curve.polish(t_star, x, frozen, newly_saturated, free, saturated, C)
            if not frozen.any():  # cannot happen in exact arithmetic; never loop on rounding
                raise ArithmeticError(f"progressive filling stalled at level {t_star!r}")
            level = t_star
            x = _within(x, frozen, curve.D, free, C)
            units[idx[frozen]] = x[frozen]
            free -= x[frozen] @ curve.D[frozen]
            saturated |= newly_saturated
            if frozen.all():
                break
            curve.freeze(frozen)
            idx = idx[~frozen]
        else:
            raise ArithmeticError("progressive filling did not finish")
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
    positive = C > 0
    safe_c = np.where(positive, C, 1.0)
    share = A / safe_c if positive.all() else np.where(positive, A / safe_c, 0.0)  # (the same where every C > 0)
    weighted = share / W
    dominant = _rows(np.maximum, share, 0.0)
    resource = np.where(dominant > 0, share.argmax(axis=1) if A.shape[1] else -1, -1)
    return dominant, _rows(np.maximum, weighted, 0.0), resource.astype(np.intp)


class _Curves:
    """The piecewise-linear functions ``x_i(t)`` of the users still rising, as sorted events.

    Each user contributes events at her breakpoints ``t``: a jump in units (only at ``b_i``)
    and a change of slope ``dx/dt``. Summing ``event · D_i`` over users gives each resource's
    use as a function of the level in closed form. Users who freeze leave (:meth:`freeze`):
    each round works on the users still rising only. Lines that never bind are ``inf`` (and
    ``inf · 0`` is NaN, which ``fmin`` skips): use the curves under
    ``np.errstate(divide="ignore", invalid="ignore")``, as :func:`progressive_filling` does.
    """

    def __init__(self, C: Array, D: Array, W: Array, M: Array, H: Array, saturated: NDArray[np.bool_]):
        self.D, self.M = D, M
        usable = (C > 0) & ~saturated
        pos = (D > 0) & usable
        # line r of user i: x = a_ir · t − c_ir; resources she does not demand never bind
        self.a = np.where(pos, C * W / np.where(pos, D, 1.0), np.inf)
        self.holds = bool(H.any())
        if self.holds:
            self.c = np.where(pos, H / np.where(pos, D, 1.0), 0.0)
            held = np.where(C > 0, H / (np.where(C > 0, C, 1.0) * W), 0.0)
            self.base = _rows(np.maximum, held, 0.0)  # b_i: weighted share of holdings alone
            self._events(*self._envelope())
        else:  # nobody holds anything: every line starts at the origin
            self.c, self.base = np.zeros(D.shape), np.zeros(D.shape[0])
            self._events_from_origin()
        self.demanded = (D > 0).any(axis=0)  # (m,) resources anyone here demands (at the start)

    def freeze(self, frozen: NDArray[np.bool_]) -> None:
        """Drop ``frozen`` users (``(n,)`` mask) and their events: the others keep their order,
        renumbered ``0 … n − 1 − frozen.sum()``."""
        rising = ~frozen
        keep = rising[self.ev_user]
        renumber = rising.cumsum() - 1
        self.ev_t, self.ev_user = self.ev_t[keep], renumber[self.ev_user[keep]]
        self.ev_dslope, self.ev_jump = self.ev_dslope[keep], self.ev_jump[keep]
        self.D, self.M, self.a, self.c = self.D[rising], self.M[rising], self.a[rising], self.c[rising]
        self.base, self.jump = self.base[rising], self.jump[rising]

    def value(self, t: Array | float) -> Array:
        """``x_i(t)`` for levels ``t`` ``(n,)`` with ``t ≥ b_i`` (or one level for all)."""
        lines = self.a * (t[:, None] if isinstance(t, np.ndarray) else t) - self.c  # NaN (inf·0) where a line never binds: fmin skips it
        return np.minimum(np.maximum(_rows(np.fmin, lines), 0.0), self.M)  # ≥ 0 also against rounding at b_i

    def _events_from_origin(self) -> None:
        """:meth:`_events` of :meth:`_envelope` when nobody holds anything: all of a user's lines
        start at the origin, so the flattest, ``min_r a_ir``, binds from level 0 until her cap,
        at ``M_i / min_r a_ir``: a start at level 0 for everyone, then the caps in order."""
        n = self.a.shape[0]
        slope = _rows(np.minimum, self.a)
        t_cap = self.M / slope
        capped = np.flatnonzero(t_cap < np.inf)
        order = capped[t_cap[capped].argsort(kind="stable")]
        self.jump = np.zeros(n)
        self.ev_t = np.concatenate((self.jump, t_cap[order]))
        self.ev_user = np.concatenate((np.arange(n), order))
        self.ev_dslope = np.concatenate((slope, -slope[order]))
        self.ev_jump = np.zeros(self.ev_t.size)

    def _envelope(self) -> tuple[Array, Array, Array]:
        """Walk each user's lower envelope ``min_r line_r`` from ``b_i`` up to her cap.

        Returns event times ``(n, k)`` (inf-padded), slope changes ``(n, k)`` and the jump
        ``x_i(b_i)`` ``(n,)``. The envelope of ``m`` lines has at most ``m − 1`` breakpoints;
        between them the slope is the binding line's ``a_ir`` exactly.
        """
        a, c, M = self.a, self.c, self.M
        rows = np.arange(a.shape[0])
        t = self.base.copy()
        low, rounding, ties = _binding(a, c, t[:, None])
        # her units at b_i: 0 where her lowest line is 0 but for its rounding — a residue of one
        # ulp of a large offset taken for a jump made her a jumper, whom polish does not move
        # (a stall: the review of 2026-11-28)
        jump = np.where(low <= rounding, 0.0, np.clip(low, 0.0, M))
        r = _row_argmin(np.where(ties, a, np.inf))  # of the lines binding at b_i, the flattest
        slope = np.where(jump >= M, 0.0, a[rows, r])
        times, dslopes = [t.copy()], [slope.copy()]
        open_ = slope > 0
        for _ in range(a.shape[1]):
            if not open_.any():
                break
            ar, cr = a[rows, r], c[rows, r]
            cross = (cr[:, None] - c) / (ar[:, None] - a)  # a flatter line takes over here
            # (at once where rounding puts the crossing at or before t: a flatter line below the
            # binding one there is a tie the tolerance missed, never a line passed by)
            cross = np.where((a < ar[:, None]) & ~np.isnan(cross), np.maximum(cross, t[:, None]), np.inf)
            s = _row_argmin(cross)
            t_cross = cross[rows, s]
            t_cap = (M + cr) / ar
            capped = t_cap <= t_cross
            t_next = np.where(capped, t_cap, t_cross)
            moving = open_ & np.isfinite(t_next)
            new_slope = np.where(capped, 0.0, a[rows, s])
            times.append(np.where(moving, t_next, np.inf))
            dslopes.append(np.where(moving, new_slope - slope, 0.0))
            t = np.where(moving, t_next, t)
            slope = np.where(moving, new_slope, slope)
            r = np.where(moving & ~capped, s, r)
            open_ = moving & ~capped
        return np.stack(times, axis=1), np.stack(dslopes, axis=1), jump

    def _events(self, times: Array, dslope: Array, jump: Array) -> None:
        """Sort the finite breakpoints ``times`` ``(n, k)`` (user-major; ties keep that order)."""
        self.jump = jump
        k = times.shape[1]
        times, dslope = times.ravel(), dslope.ravel()
        finite = np.flatnonzero(np.isfinite(times))
        order = finite[np.argsort(times[finite], kind="stable")]  # into the (n·k) breakpoints
        self.ev_t, self.ev_dslope = times[order], dslope[order]
        self.ev_user = order // k
        self.ev_jump = np.where(order % k == 0, jump[self.ev_user], 0.0)  # her jump comes with her first breakpoint

    def first_saturation(self, free: Array, saturated: NDArray[np.bool_], C: Array) -> float:
        """Lowest level at which some unsaturated resource's free capacity ``free`` is used up
        (to :data:`SATURATION_RTOL` of its capacity ``C``)."""
        t = self.ev_t
        if t.size == 0:
            return np.inf
        demand = self.D[self.ev_user]  # (E, m)
        cum_slope = (self.ev_dslope[:, None] * demand).cumsum(axis=0)  # d(use)/dt just after each event
        cum_offset = ((self.ev_dslope * t)[:, None] * demand).cumsum(axis=0)
        used = t[:, None] * cum_slope
        if self.ev_jump.any():  # units granted at once: only where holdings put a user above level 0
            used = (self.ev_jump[:, None] * demand).cumsum(axis=0) + used
        used -= cum_offset  # use just after each event (E, m)
        return float(_crossings(t, used, cum_slope, free, SATURATION_RTOL * C)[~saturated].min(initial=np.inf))

    def refine(self, t: float, x: Array, free: Array, saturated: NDArray[np.bool_]) -> float:
        """The level where the first unsaturated resource fills, found from the use ``x @ D`` at
        level ``t`` and each curve's exact slope just above ``t`` (its binding line, or 0 at its
        cap): one Newton step, exact while no breakpoint lies in between — forward from a level
        short of it, back from one past it (:meth:`overfull`)."""
        slope = self._slopes(t, x)
        step = self._step(slope, x, free, saturated)
        return t + step if math.isfinite(step) else t  # back (step < 0) only from a resource overfilled

    def _slopes(self, t: float, x: Array) -> Array:
        """``dx_i/dt`` just above level ``t`` ``(n,)``: her binding line's (the flattest of those
        tied), 0 below her base or at her cap."""
        on = (self.base <= t) & (x < self.M)
        _, _, ties = _binding(self.a, self.c, t)
        slope = np.where(on, _rows(np.minimum, np.where(ties, self.a, np.inf), np.inf), 0.0)
        return np.where(np.isfinite(slope), slope, 0.0)

    def _step(self, slope: Array, x: Array, free: Array, saturated: NDArray[np.bool_]) -> float:
        """The change of level along ``slope`` that fills the first unsaturated resource from
        units ``x`` (negative: back from one overfilled); inf if none fills."""
        rate = slope @ self.D
        gap = free - x @ self.D
        steps = np.where((rate > 0) & ~saturated, gap / rate, np.inf)
        return float(steps.min(initial=np.inf))

    def polish(self, t: float, x: Array, frozen: NDArray[np.bool_], newly: NDArray[np.bool_], free: Array,
               saturated: NDArray[np.bool_], C: Array):
        """Units ``x`` at level ``t``, who freezes there (``frozen``) and what saturates
        (``newly``), as :meth:`settle` found them: kept if someone freezes and nothing is past
        a capacity; else the units moved along the curves' slopes to where the first
        unsaturated resource fills — in units, not in the level: a unit count ``x = a·t − c``
        read from the level keeps only the digits a holding ``c`` much larger than ``x``
        leaves, and no float level near ``t`` may fill a resource within the tolerance (the DRF
        audit of 2026-11-28: 0.1% to 4% past capacity, or a stall). Users jumping at ``t`` stay
        as :meth:`settle` left them. A step of more than ``POLISH_ULPS`` ulps of
        ``max(|t|, 1)`` is not taken: past a breakpoint the slopes are not the curves'.

        The slopes are the events' (summed over each user's breakpoints up to ``t``), not the
        lines' at ``t``: in the digits left there, a line 10^-14 units above the binding one
        reads as tied with it, and its slope (10^14 times flatter) asked for a step of the
        level no polish takes. Returns ``(x, frozen, newly_saturated)`` as :meth:`settle`."""
        if frozen.any() and not self.overfull(x, free, C):
            return x, frozen, newly
        upto = self.ev_t <= t
        slope = np.bincount(self.ev_user[upto], weights=self.ev_dslope[upto], minlength=x.size)
        slope = np.where((self.base <= t) & (x < self.M), np.maximum(slope, 0.0), 0.0)
        if self.holds:  # a jumper's units are her jump (or part of it), not a point on a line
            slope = np.where(self._at_base(t) & (self.jump > 0), 0.0, slope)
        step = self._step(slope, x, free, saturated)
        if math.isfinite(step) and abs(step) <= POLISH_ULPS * np.spacing(max(abs(t), 1.0)):
            x = np.minimum(np.maximum(x + slope * step, 0.0), self.M)
        return (x, *self._judge(x, free, saturated, C))

    def overfull(self, x: Array, free: Array, C: Array) -> bool:
        """Whether units ``x`` use more of some resource than is ``free`` beyond the tolerance."""
        return bool(((x @ self.D) > free + SATURATION_RTOL * C).any())

    def settle(self, t_star: float, free: Array, saturated: NDArray[np.bool_], C: Array):
        """Units at level ``t_star``, who freezes there, and which resources saturate.

        Users whose jump happens exactly at ``t_star`` share what is left of a resource that
        their jumps would overfill: they get the same fraction θ of their jump. Jumpers cut
        short freeze; jumpers that touch none of the resources that limit θ wait for the next
        round (their weighted share does not change during a jump).
        """
        if self.holds:
            at_level = self._at_base(t_star)
            on = (self.base <= t_star) | at_level
            x = np.where(on, self.value(np.maximum(self.base, t_star)), 0.0)
            jumper = on & at_level & (self.jump > 0)
        else:  # nobody holds anything: every curve has risen from level 0, none jumps
            x, jumper = self.value(t_star), None
        frozen_extra = np.zeros(x.shape, dtype=bool)
        if jumper is not None and jumper.any():
            steady = np.where(jumper, 0.0, x) @ self.D
            jumped = np.where(jumper, x, 0.0) @ self.D
            theta_r = np.where((jumped > 0) & ~saturated, (free - steady) / jumped, np.inf)
            theta = float(min(1.0, max(0.0, theta_r.min())))
            if theta < 1.0:
                limiting = (theta_r <= theta + SATURATION_RTOL) & (jumped > 0)
                hit = jumper & _rows(np.logical_or, self.D[:, limiting] > 0)
                x = np.where(hit, theta * x, np.where(jumper, 0.0, x))
                frozen_extra = hit
        frozen, newly = self._judge(x, free, saturated, C)
        return x, frozen_extra | frozen, newly

    def _at_base(self, t: float) -> NDArray[np.bool_]:
        """``(n,)``: whose base ``b_i`` is the level ``t``, to rounding (where she jumps)."""
        return np.abs(self.base - t) <= 4 * np.spacing(max(abs(t), 1.0))

    def _judge(self, x: Array, free: Array, saturated: NDArray[np.bool_], C: Array):
        """Which resources units ``x`` fill (to :data:`SATURATION_RTOL` of ``C``), and who
        freezes: those demanding one of them, and those at their cap. ``((n,), (m,))`` masks."""
        newly = (x @ self.D >= free - SATURATION_RTOL * C) & ~saturated & self.demanded
        return _rows(np.logical_or, self.D[:, newly] > 0) | (x >= self.M), newly


def _crossings(t: Array, used: Array, slope: Array, free: Array, tol: Array) -> Array:
    """Per resource, the level where its use (non-decreasing, piecewise linear with jumps,
    known just after each event ``t`` ``(E,)``) first reaches ``free`` ``(m,)`` within ``tol``
    ``(m,)``; inf if never. A use that never reaches it within the events goes on along its
    last slope to an event at level ∞. A slope of 0 divides by zero: under
    :func:`progressive_filling`'s errstate. ``tol`` is relative to the capacity, not to what
    is free, nor at least 1: a resource of 1e-9 with a holding in it was full at level 0, and
    the others went to 2× their capacity (the DRF audit of 2026-11-28)."""
    hit = used >= free - tol  # (E, m)
    cols = np.arange(used.shape[1])
    j = hit.argmax(axis=0)  # first event at or past the crossing
    j = np.where(hit[j, cols], j, t.size)  # never: the event at ∞
    prev = j - (j > 0)
    t_prev, used_prev, slope_prev = t[prev], used[prev, cols], slope[prev, cols]
    t_j = np.append(t, np.inf)[j]
    linear = t_prev + (free - used_prev) / slope_prev  # crossing inside the segment before j
    before_j = used_prev + slope_prev * (t_j - t_prev)  # use just before event j, no jump
    in_segment = (j > 0) & (slope_prev > 0) & (before_j >= free - tol)
    # inside the segment the crossing is at most t_j (rounding may put it an ulp past: the
    # jumps at t_j would then be granted whole and overfill); otherwise the jumps at t_j reach it
    return np.where(in_segment, np.minimum(linear, t_j), t_j)


def _binding(a: Array, c: Array, t) -> tuple[Array, Array, NDArray[np.bool_]]:
    """Each user's lowest line ``min_r a_ir·t − c_ir`` at her level ``t`` (a scalar, or a column
    ``(n, 1)``) ``(n,)``, its rounding ``(n,)`` (:data:`TIE_RTOL` of the terms it was computed
    from, and :data:`TIE_ATOL`), and which of her lines bind there ``(n, m)``: equal to it
    within both lines' rounding. Lines that never bind (``a`` inf) are inf, and bind only when
    all do. ``m ≥ 1`` (:func:`progressive_filling` builds no curves without a resource)."""
    finite = np.isfinite(a)
    at = a * t
    lines = np.where(finite, at - c, np.inf)
    scale = np.where(finite, np.abs(at) + np.abs(c), 0.0)
    rows = np.arange(a.shape[0])
    r = _row_argmin(lines)
    low = lines[rows, r]
    rounding = TIE_RTOL * scale[rows, r] + TIE_ATOL
    return low, rounding, lines <= (low + rounding)[:, None] + TIE_RTOL * scale


def _within(x: Array, frozen: NDArray[np.bool_], D: Array, free: Array, C: Array) -> Array:
    """Units ``x`` whose frozen users' (``frozen``) use fits in what is ``free``: if a round
    is left past a resource's capacity beyond :data:`SATURATION_RTOL` — the sweep's level in
    error where its lines or its summed slopes lost their digits to cancellation (amounts
    10^10 and more apart: the review of 2026-11-28 found such rounds in 122 of 40,945 random
    instances over 1e-12 … 1e12, none in 103,349 over narrower ranges) — the units of the
    frozen users who use it are scaled back together until it fits, as users jumping at one
    level are (:meth:`_Curves.settle`): a Fill within capacity, though then not an exact DRF
    one; nothing is taken from a user of none of the resources overfilled."""
    use = x[frozen] @ D[frozen]
    # (holdings alone may be past it: not this round's; an infinite use — a line that
    # overflowed, C·W/D past the floats, or units granted as unbounded where the summed slopes
    # lost a user's to cancellation — no scaling mends)
    over = (use > free + SATURATION_RTOL * C) & (use > 0) & (use < np.inf)
    if not over.any():
        return x
    theta = float(np.min(np.maximum(free[over], 0.0) / use[over]))
    return np.where(frozen & _rows(np.logical_or, D[:, over] > 0), x * theta, x)


def _rows(op: np.ufunc, a: NDArray, initial: float | None = None) -> NDArray:
    """``op.reduce(a, axis=1, initial=initial)`` for ``a`` of shape ``(n, m)``, combining its ``m``
    columns one at a time: the same values (max, min, fmin and or give one answer whatever the
    order; a tie of 0.0 and -0.0 may keep either sign, as numpy's own loops do), but numpy reduces an ``(n, 4)`` array along its short rows about 10× slower than it
    combines four columns of ``n`` (issue 16)."""
    if a.ndim != 2 or a.shape[1] == 0:
        return op.reduce(a, axis=1) if initial is None else op.reduce(a, axis=1, initial=initial)
    out = a[:, 0].copy()
    for j in range(1, a.shape[1]):
        op(out, a[:, j], out=out)
    if initial is not None:
        op(out, initial, out=out)
    return out


def _row_argmin(a: Array) -> NDArray[np.intp]:
    """``a.argmin(axis=1)`` (the first column of each row's least value) for ``(n, m)`` ``a`` with
    ``m ≥ 1`` and no NaN, one column at a time (see :func:`_rows`)."""
    best = a[:, 0].copy()
    at = np.zeros(a.shape[0], dtype=np.intp)
    for j in range(1, a.shape[1]):
        column = a[:, j]
        less = column < best  # strictly: a tie keeps the earlier column, as argmin does
        at[less] = j
        np.minimum(best, column, out=best)
    return at


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
    """``(n,)`` or ``(n, m)`` float weights as ``(n, m)``: a read-only view, not a copy (issue 16)."""
    if W.shape == shape:
        return W
    if W.ndim == 1:
        W = W[:, None]
    return np.broadcast_to(W, shape)


def validate_problem(capacity, demand, weight, max_units, holdings):
    C = np.asarray(capacity, dtype=float)
    if C.ndim != 1:
        raise ValueError(f"capacity must be a vector, got shape {C.shape}")
    m = C.shape[0]
    D = np.asarray(demand, dtype=float)
    if D.size == 0 and D.ndim != 2:  # no users ([]); users of no resource stay (n, 0)
        D = np.zeros((0, m))
    if D.ndim != 2 or D.shape[1] != m:
        raise ValueError(f"demand must be (users, {m} resources), got shape {D.shape}")
    n = D.shape[0]
    W = np.ones(n) if weight is None else np.asarray(weight, dtype=float)
    if W.shape not in ((n,), (n, m)):
        raise ValueError(f"weight must be ({n},) or ({n}, {m}), got shape {W.shape}")
    W = _broadcast_weight(W, (n, m))
    M = np.full(n, np.inf) if max_units is None else np.asarray(max_units, dtype=float)
    H = np.zeros((n, m)) if holdings is None else np.asarray(holdings, dtype=float)
    if M.shape != (n,) or H.shape != (n, m):
        raise ValueError(f"max_units must be ({n},) and holdings ({n}, {m}), got {M.shape} and {H.shape}")
    # (a NaN anywhere makes min and max NaN, and NaN passes no comparison)
    for name, arr in (("capacity", C), ("demand", D), ("holdings", H)):
        if not (arr.min(initial=0.0) >= 0 and arr.max(initial=0.0) < np.inf):
            raise ValueError(f"{name} must be finite and ≥ 0")
    if not (W.min(initial=1.0) > 0 and W.max(initial=1.0) < np.inf):
        raise ValueError("weight must be finite and > 0")
    if not M.min(initial=0.0) >= 0:
        raise ValueError("max_units must be ≥ 0 (inf for unbounded)")
    return C, D, W, M, H
