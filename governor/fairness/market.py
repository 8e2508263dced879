"""CEEI's market: the Nash bargaining allocation through its prices (paper §5.2).

CEEI (Competitive Equilibrium from Equal Incomes) gives each user a budget — her weight — and
finds prices at which every user buying what she can afford clears the market. With Leontief
users that is the Nash bargaining solution, the convex programme ::

    maximise  Σ_i w_i log y_i   subject to  Σ_i y_i a_i ≤ 1  (each resource's free capacity),
                                            0 < y_i ≤ ū_i   (her cap)

(the Eisenberg–Gale programme of a Fisher market). Its dual has one price ``p_r ≥ 0`` per
resource. At prices ``p`` user ``i`` buys ``y_i(p) = min(ū_i, w_i / a_i·p)`` — her budget over the
price of her unit — and the dual function ::

    g(p) = Σ_r p_r + Σ_i (w_i log y_i(p) − y_i(p) a_i·p)

is convex and once differentiable, with gradient ``1 − Σ_i y_i(p) a_i`` (each resource's capacity
left over) and Hessian ``Σ_{i below her cap} (w_i / (a_i·p)²) a_i a_iᵀ``. Strong duality holds
(Slater: small ``y`` is strictly feasible), so ``y(p*)`` is the allocation. We minimise ``g`` by
damped projected Newton steps (Levenberg–Marquardt, with Bertsekas' ε-active set) and a
backtracking line search — with a quasi-Newton pass (L-BFGS-B) in between where users switch
between their cap and their budget at every step and Newton crawls: the search runs in as many dimensions as
there are resources and each step is one pass over users × resources, so the cost grows linearly
with users (a general solver over the primal's n variables grows with their cube, and SLSQP failed
to converge on ordinary 20-user problems).
"""

from __future__ import annotations

import numpy as np

__all__ = ["STATIONARITY_TOLERANCE", "nash_bargaining"]

#: The prices are settled when the projected gradient — capacity over- or (at a positive price)
#: under-used, as a share of the resource — is at most this: far below the 1e-5 the property
#: checks (:mod:`governor.fairness.properties`) allow.
STATIONARITY_TOLERANCE = 1e-7
MAX_STEPS = 500
MIN_DAMPING, MAX_DAMPING = 1e-12, 1e8  # Levenberg–Marquardt, relative to the mean curvature
_ARMIJO = 1e-4


def nash_bargaining(A_units: np.ndarray, w: np.ndarray, upper: np.ndarray, free: np.ndarray) -> np.ndarray:
    """``argmax Σ w_i log y_i`` s.t. ``Σ_i y_i A_i ≤ free``, ``0 < y ≤ upper``.

    Args:
        A_units: (n, m) resources one unit of each user takes; every row uses some resource
            whose ``free`` is positive.
        w: (n,) budgets (weights), > 0.
        upper: (n,) caps on units, > 0 (inf = none).
        free: (m,) capacity left to share, ≥ 0 (resources at 0 are not priced: nobody in
            ``A_units`` may need them).

    Returns:
        (n,) units ``y``, within capacity.

    Raises:
        ArithmeticError: the prices did not settle within :data:`MAX_STEPS` Newton steps
            (projected gradient above :data:`STATIONARITY_TOLERANCE`).
    """
    keep = free > 0
    A = A_units[:, keep] / free[keep]  # (n, k): a unit's share of each resource's free capacity
    ceiling = np.minimum(upper, 1.0 / A.max(axis=1))  # more than all of her scarcest resource cannot fit

    def buy(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Units bought at prices ``p``, their cost per unit, and who is below her ceiling."""
        cost = A @ p
        with np.errstate(divide="ignore"):
            budget_units = np.where(cost > 0, w / np.where(cost > 0, cost, 1.0), np.inf)
        below = budget_units < ceiling
        return np.where(below, budget_units, ceiling), cost, below

    def dual(p: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        y, cost, below = buy(p)
        return float(p.sum() + (w * np.log(y) - y * cost).sum()), 1.0 - y @ A, cost, below

    # Every price is at most the budgets' sum (Σ_r p_r = Σ_i y_i a_i·p ≤ Σ_i w_i at the
    # optimum): searching the box [0, 2·Σw] finds it, and no step can run off to infinity.
    top = 2.0 * float(w.sum())
    p = np.full(A.shape[1], w.sum() / A.shape[1])
    p, gradient = _newton(A, w, dual, p, top)
    if _projected(p, gradient, top) > STATIONARITY_TOLERANCE:
        # Newton can crawl where users switch between their ceiling and their budget at every
        # step (the dual is only once differentiable there): a quasi-Newton run over the same
        # box takes it past those kinks, and Newton finishes from there
        from scipy.optimize import minimize

        result = minimize(lambda q: dual(q)[:2], p, jac=True, method="L-BFGS-B", bounds=[(0.0, top)] * p.size,
                          options={"ftol": 0.0, "gtol": 1e-12, "maxiter": 10_000})
        p, gradient = _newton(A, w, dual, np.clip(result.x, 0.0, top), top)
    stationarity = _projected(p, gradient, top)
    if not np.isfinite(stationarity) or stationarity > STATIONARITY_TOLERANCE:
        raise ArithmeticError(f"CEEI: the prices did not settle (projected gradient {stationarity:.3g})")
    y, _, _ = buy(p)
    return y / max(1.0, (y @ A).max(initial=0.0))  # clip rounding past capacity


def _newton(A, w, dual, p: np.ndarray, top: float) -> tuple[np.ndarray, np.ndarray]:
    """Damped projected Newton steps from ``p`` until the projected gradient is 1000 times
    below :data:`STATIONARITY_TOLERANCE`, no step helps, or :data:`MAX_STEPS`; returns the
    prices and the dual's gradient there."""
    value, gradient, cost, below = dual(p)
    damping = MIN_DAMPING
    for _ in range(MAX_STEPS):
        size = _projected(p, gradient, top)
        if size <= STATIONARITY_TOLERANCE * 1e-3:
            break
        step = _newton_direction(A, w, p, gradient, cost, below, damping, near_zero=min(size, 1e-3 * p.mean()), top=top)
        step *= min(1.0, top / max(float(np.abs(step).max(initial=0.0)), 1e-300))  # within the box's width
        p, value, gradient, cost, below, t = _backtrack(dual, p, value, gradient, step, top)
        if t == 0.0 and damping >= MAX_DAMPING:
            break
        # a full step taken: trust the curvature more; a shortened one or none: less
        damping = max(damping / 10, MIN_DAMPING) if t == 1.0 else min(damping * 100, MAX_DAMPING)
    return p, gradient


def _projected(p: np.ndarray, gradient: np.ndarray, top: float) -> float:
    """The projected gradient's largest entry: 0 exactly at the optimum over the box [0, top]."""
    return float(np.abs(p - np.clip(p - gradient, 0.0, top)).max(initial=0.0))


def _newton_direction(A, w, p, gradient, cost, below, damping: float, near_zero: float, top: float) -> np.ndarray:
    """A damped Newton step (Levenberg–Marquardt: ``damping`` × the mean curvature added to the
    diagonal) on the prices not held at zero; a price at or within ``near_zero`` of 0 whose
    resource is under-used is held and sent to 0 (Bertsekas' ε-active set, which keeps the
    projection from undoing the step of the others)."""
    held = (p <= near_zero) & (gradient > 0)
    free = ~held
    step = np.where(held, -p, 0.0)
    if not free.any():
        return step
    Af = A[below][:, free]
    curvature = w[below] / cost[below] ** 2
    hessian = (Af * curvature[:, None]).T @ Af
    ridge = damping * max(float(np.trace(hessian)) / hessian.shape[0], 1e-300)
    try:
        step[free] = -np.linalg.solve(hessian + ridge * np.eye(hessian.shape[0]), gradient[free])
    except np.linalg.LinAlgError:
        step[free] = np.nan
    if not np.isfinite(step).all() or not gradient[free] @ step[free] < 0:
        # no curvature to go by (everyone at her ceiling: the dual is linear there) or no descent
        # numerically: steepest descent across the whole box, which the line search shortens
        # to where the dual curves up again
        step[free] = -gradient[free] * (top / max(float(np.abs(gradient[free]).max()), 1e-300))
    return step


def _backtrack(dual, p, value, gradient, step, top: float):
    """Armijo backtracking along the projected path ``clip(p + t·step, 0, top)``; returns the new
    point with its dual value, gradient, costs and below-ceiling set, and the ``t`` taken (0:
    no step decreased the dual). Near the optimum a budget far smaller than the others moves
    the dual by less than its rounding: a step whose value is equal within rounding and whose
    projected gradient is smaller is taken too."""
    t = 1.0
    here = _projected(p, gradient, top)
    for _ in range(60):
        trial = np.clip(p + t * step, 0.0, top)
        if not np.array_equal(trial, p):
            trial_value, trial_gradient, cost, below = dual(trial)
            if (trial_value <= value + _ARMIJO * float(gradient @ (trial - p))
                    or (trial_value <= value + 1e-13 * abs(value) and _projected(trial, trial_gradient, top) < here)):
                return trial, trial_value, trial_gradient, cost, below, t
        t *= 0.5
    value, gradient, cost, below = dual(p)
    return p, value, gradient, cost, below, 0.0
