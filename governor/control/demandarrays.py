"""Demand estimation for every user of a tick at once, over arrays (pure: numpy, no I/O).

The rules are :func:`governor.control.demand.estimate_user`'s — her memory growth smoothed and
believed, her memory's evidence, the resources she starts on, :func:`estimate_demand`, the
growth her demand does not hold yet — which stays the reference: per user it cost ~10 µs a tick
in Python objects (issue 16); here the tick's users are estimated in a few dozen array
operations. ``tests/unit/test_demand_arrays.py`` holds the two equal on random ticks; the loop
falls back to the reference, user by user, when this fails.

Exactness: every value is computed by the same IEEE operations in the same order as the
reference (numpy's elementwise float64 arithmetic is Python's; ``min`` and ``max`` are exact),
over finite inputs — :func:`demand_columns` refuses any other (``ValueError``), and the loop then
estimates each user alone. Amounts are floats, as the reference's are given them (bytes below
2**53: every integer exact).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from governor.control.demand import MIN_PROGRESS, DemandParams, negligible
from governor.control.resources import MEMORY, Resource

__all__ = ["DemandColumns", "DemandRows", "demand_columns"]


@dataclass(frozen=True)
class DemandRows:
    """One tick's demand inputs, a row per measured user and a column per resource of
    ``resources`` (the tick's capacity vector, its order).

    The kernel's evidence of the rate resources (:class:`~governor.control.demand.Evidence`),
    (n, R): ``present`` (bool: her evidence has it; the memory column is ignored: memory's is
    made here), ``used``, ``wanted`` (NaN for None: the network), ``held`` (bool), ``speedup``.
    ``capacity`` (R,) this tick's; ``ceiling`` (n, R) her admin's own limits in resource units,
    ∞ where none. Her state of the tick before (:class:`~governor.control.demand.DemandState`):
    ``prev_known`` (n,) bool — False at her first estimate, the other ``prev_`` values then
    unread — ``prev_demand`` (n, R) NaN where it has no value, ``prev_held`` (n, R) bool,
    ``prev_growth_bytes_per_s`` and ``prev_rate_bytes_per_s`` (n,). Her memory this interval, (n,):
    ``growth_bytes_per_s`` (its rate of change, None as 0), ``memory_used_bytes`` (None as 0),
    ``high_events`` (memory.events ``high`` delta, None as 0), ``memory_stall_fraction`` (PSI
    memory ``some``, None as 0) and ``written_high_bytes`` (the memory.high in force, NaN for
    none). ``believe_all_growth``: memory.high does not throttle here (v1): all growth is believed.
    """

    resources: Sequence[Resource]
    capacity: np.ndarray
    ceiling: np.ndarray
    present: np.ndarray
    used: np.ndarray
    wanted: np.ndarray
    held: np.ndarray
    speedup: np.ndarray
    prev_known: np.ndarray
    prev_demand: np.ndarray
    prev_held: np.ndarray
    prev_growth_bytes_per_s: np.ndarray
    prev_rate_bytes_per_s: np.ndarray
    growth_bytes_per_s: np.ndarray
    memory_used_bytes: np.ndarray
    high_events: np.ndarray
    memory_stall_fraction: np.ndarray
    written_high_bytes: np.ndarray
    believe_all_growth: bool = False


@dataclass(frozen=True)
class DemandColumns:
    """Every row's estimate (columns as :class:`DemandRows`'): ``demand`` (n, R), NaN where she has
    no evidence of the resource (her demand mapping leaves it out); ``held`` (n, R) bool, the
    resources the kernel held her back on (memory's included); ``starting`` (n, R) bool, the
    resources her demand of the tick before was negligible on (all at her first estimate);
    her memory's evidence, (n,): ``memory_used_bytes``, ``memory_wanted_bytes``, ``memory_held``;
    ``growth_bytes_per_s`` (n,) her smoothed growth, and ``unconfirmed_growth_bytes`` (n,) what
    her growth would add beyond what her demand believes (0.0 when all of it is believed)."""

    demand: np.ndarray
    held: np.ndarray
    starting: np.ndarray
    memory_used_bytes: np.ndarray
    memory_wanted_bytes: np.ndarray
    memory_held: np.ndarray
    growth_bytes_per_s: np.ndarray
    unconfirmed_growth_bytes: np.ndarray


def demand_columns(rows: DemandRows, params: DemandParams) -> DemandColumns:
    """Every row's demand, as :func:`~governor.control.demand.estimate_user` makes it for each
    user alone (see the module docstring).

    Raises:
        ValueError: an input is not finite where the reference needs a number (NaN or ∞ outside
            ``wanted``, ``prev_demand``, ``written_high_bytes`` and ``ceiling``), or the
            resources have no memory column.
    """
    resources = list(rows.resources)
    mem = resources.index(MEMORY)  # ValueError without one
    _finite(rows)
    s, headroom = params.smoothing, params.memory_headroom_bytes
    prev_known = rows.prev_known
    # her memory growth, smoothed (what she frees shows at once), and the part of it believed
    g = rows.growth_bytes_per_s
    growth = np.where(prev_known, np.minimum(g, s * g + (1 - s) * rows.prev_growth_bytes_per_s), g)
    if rows.believe_all_growth:
        believed = growth
    else:
        believed = np.where(~prev_known, 0.0,
                            np.where(rows.prev_held[:, mem], growth,
                                     np.minimum(growth, np.maximum(0.0, rows.prev_rate_bytes_per_s))))
    # memory's evidence (memory_evidence)
    used_bytes = rows.memory_used_bytes
    memory_used = np.maximum(0.0, used_bytes)
    memory_held = (rows.high_events > 0) | (rows.memory_stall_fraction > params.stall_fraction)
    memory_wanted = memory_used + np.maximum(headroom, np.maximum(0.0, believed) * params.memory_lookahead_s)
    high = rows.written_high_bytes
    with np.errstate(invalid="ignore"):  # NaN: no memory.high in force, never at it
        at_high = memory_held & (memory_used + headroom >= high)
    step = np.maximum(headroom, params.held_memory_step_fraction * high)
    before_mem = rows.prev_demand[:, mem]
    wanted_before = np.where(prev_known & ~np.isnan(before_mem), before_mem, 0.0)
    memory_wanted = np.where(at_high, np.maximum(np.maximum(memory_wanted, high + step), wanted_before),
                             memory_wanted)
    present, used, held, speedup = rows.present.copy(), rows.used.copy(), rows.held.copy(), rows.speedup.copy()
    wanted = rows.wanted.copy()
    present[:, mem], used[:, mem], wanted[:, mem] = True, memory_used, memory_wanted
    held[:, mem], speedup[:, mem] = memory_held, 1.0
    # the resources she starts on: negligible a tick before (demand.negligible)
    prev_demand = np.where(prev_known[:, None], rows.prev_demand, np.nan)
    starting = ~prev_known[:, None] | negligible(np.where(np.isnan(prev_demand), 0.0, prev_demand), rows.capacity,
                                                 params)
    # estimate_demand
    bound = np.minimum(rows.capacity, rows.ceiling)  # demand_bound
    is_memory = np.zeros(len(resources), dtype=bool)
    is_memory[mem] = True
    held_back = present & held & ~is_memory
    fastest = np.where(held_back, speedup, -np.inf).max(axis=1, initial=-np.inf)
    fastest = np.where(held_back.any(axis=1), fastest, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.where(held_back & (used > 0), bound / np.where(used > 0, used, 1.0), np.inf)
    fastest = np.minimum(fastest, room.min(axis=1, initial=np.inf))
    fastest = np.minimum(1.0 / MIN_PROGRESS, np.maximum(1.0, fastest))[:, None]
    probed = np.isnan(wanted)  # the network: probed from what she sent while held back
    with np.errstate(invalid="ignore"):
        wanted = np.where(probed, np.where(held, used * params.probe_factor, used * fastest),
                          np.where(held | is_memory, wanted, wanted * fastest))
        steady = (~np.isnan(prev_demand) & held & rows.prev_held & ~is_memory
                  & (np.abs(wanted - prev_demand) <= params.step_fraction * np.maximum(wanted, prev_demand)))
        smoothed = np.where(steady, s * wanted + (1.0 - s) * prev_demand, wanted)
    demand = np.where(present, np.minimum(bound, np.maximum(np.maximum(0.0, used), smoothed)), np.nan)
    # the growth her demand does not hold
    projected = np.maximum(memory_wanted, used_bytes + np.maximum(headroom, np.maximum(0.0, growth)
                                                                  * params.memory_lookahead_s))
    projected = np.minimum(projected, bound[:, mem])
    unconfirmed = np.where(growth > believed, np.maximum(0.0, projected - demand[:, mem]), 0.0)
    return DemandColumns(demand=demand, held=present & held, starting=starting, memory_used_bytes=memory_used,
                         memory_wanted_bytes=memory_wanted, memory_held=memory_held, growth_bytes_per_s=growth,
                         unconfirmed_growth_bytes=unconfirmed)


def _finite(rows: DemandRows) -> None:
    """Raise ValueError unless every input the reference reads as a number is finite."""
    checks = [("capacity", rows.capacity), ("growth_bytes_per_s", rows.growth_bytes_per_s),
              ("memory_used_bytes", rows.memory_used_bytes), ("high_events", rows.high_events),
              ("memory_stall_fraction", rows.memory_stall_fraction),
              ("used", np.where(rows.present, rows.used, 0.0)), ("speedup", np.where(rows.present, rows.speedup, 1.0)),
              ("prev_growth_bytes_per_s", np.where(rows.prev_known, rows.prev_growth_bytes_per_s, 0.0)),
              ("prev_rate_bytes_per_s", np.where(rows.prev_known, rows.prev_rate_bytes_per_s, 0.0))]
    for name, values in checks:
        if not np.isfinite(values).all():
            raise ValueError(f"demand over arrays: {name} not finite")
    for name, values in (("wanted", rows.wanted), ("prev_demand", rows.prev_demand),
                         ("written_high_bytes", rows.written_high_bytes)):
        if np.isinf(values).any():
            raise ValueError(f"demand over arrays: {name} infinite")
