"""Estimating each user's demand vector from what she uses (pure: no I/O, no clock).

DRF needs the demand vector ``D_i`` — what she would use if alone — but a user never
declares it, and a capped user's usage understates it. So per resource:

* ``smoothed = α·usage + (1 − α)·smoothed_before`` (exponential smoothing of usage);
* while she is **held back** on that resource (CPU throttled by cpu.max, memory.events
  ``high`` rising, PSI ``some`` above target, disk time at her cap), demand is *probed
  upward*: ``demand = max(usage, smoothed, demand_before) × probe_factor``, so a capped
  user reveals more demand tick by tick, and a user who just got busy counts at once;
* otherwise demand *decays* toward use: ``demand = max(smoothed, demand_before × decay)``;
* demand never exceeds the resource's capacity and is never negative.

A user who is not held back therefore has demand ≈ usage, as DESIGN.md asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["AT_CAP_FRACTION", "DemandParams", "DemandState", "estimate_demand", "held_back"]

#: Running at this fraction of a limit below capacity (an io.max rate, an HTB ceil) counts as
#: held back by it: the limit, not her work, sets her pace.
AT_CAP_FRACTION = 0.9


@dataclass(frozen=True)
class DemandParams:
    """Tuning of :func:`estimate_demand`: ``smoothing`` α in (0, 1], ``probe_factor`` > 1,
    ``decay`` in [0, 1), ``psi_some_target_pct`` the PSI some avg10 (%) that counts as held back."""

    smoothing: float = 0.5
    probe_factor: float = 1.25
    decay: float = 0.8
    psi_some_target_pct: float = 10.0


@dataclass(frozen=True)
class DemandState:
    """Per resource: smoothed usage and the demand estimate (resource units, e.g. cores, bytes)."""

    smoothed: Mapping[str, float]
    demand: Mapping[str, float]


def estimate_demand(prev: DemandState | None, usage: Mapping[str, float], held: Mapping[str, bool],
                    capacity: Mapping[str, float], params: DemandParams = DemandParams()) -> DemandState:
    """One tick of estimation for one user over the resources in ``usage``.

    A resource missing from ``prev`` starts from its usage. Resources in ``prev`` but not in
    ``usage`` (a disk that went away) are dropped.
    """
    smoothed, demand = {}, {}
    for resource, used in usage.items():
        used = max(0.0, used)
        cap = capacity.get(resource, float("inf"))
        if prev is None or resource not in prev.smoothed:
            s, d_before = used, used
        else:
            s = params.smoothing * used + (1 - params.smoothing) * prev.smoothed[resource]
            d_before = prev.demand[resource]
        if held.get(resource, False):  # probe from the freshest evidence, not the smoothed past
            d = max(used, s, d_before) * params.probe_factor
        else:
            d = max(s, d_before * params.decay)
        smoothed[resource] = s
        demand[resource] = min(max(0.0, d), cap)
    return DemandState(smoothed, demand)


def held_back(throttled_fraction: float | None = None, memory_high_events: int | None = None,
              psi_some_avg10_pct: float | None = None, at_cap: bool = False,
              params: DemandParams = DemandParams()) -> bool:
    """Whether the kernel is holding her back on one resource, from the signals that apply."""
    return bool(
        (throttled_fraction or 0) > 0
        or (memory_high_events or 0) > 0
        or (psi_some_avg10_pct or 0) > params.psi_some_target_pct
        or at_cap
    )
