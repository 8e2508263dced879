"""Limit planning for every user of a tick at once, over arrays (pure: numpy, no I/O).

The rules are :func:`governor.control.plan.plan_user`'s, which stays the reference and the
explainer: per user it cost ~15 µs a tick in Python objects (issue 16), here the tick's users
are planned in a few dozen array operations and each gets her :class:`LimitSet` built from her
row. :meth:`PlanRows.user_input` gives plan_user the very same inputs, so her reasons, worded
when read (:class:`governor.control.plan.Reasons`), explain exactly these limits;
``tests/unit/test_plan_arrays.py`` holds the two equal on random ticks. An admin's own limits
(ceilings, rare and per user) are applied to her row's plan by plan.py's own rule.

Exactness: every value is computed by the same IEEE operations in the same order as
plan_user (numpy's elementwise float64 arithmetic is Python's), rounding as Python's
``round`` (half to even: ``np.rint``) and ``int`` (toward zero: ``np.trunc``, values ≥ 0).
Byte counts stay below 2**53, where float64 holds every integer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cgroups.limits import CPU_PERIOD_DEFAULT_USEC, CPU_QUOTA_MIN_USEC, CPU_WEIGHT_MAX, CPU_WEIGHT_MIN, PAGE_SIZE, \
    CpuMax, IoMax
from governor.control.plan import _SILENT, DiskPlan, MemoryState, UserPlanInput, _limits_anything, _within_ceiling
from governor.control.resources import CPU, MEMORY, Resource
from governor.enforce.model import LimitSet

__all__ = ["PlanRows", "plan_rows"]

_NO_CPU_MAX = CpuMax(None)


@dataclass(frozen=True)
class PlanRows:
    """One tick's planning inputs, a row per user (the DRF order) and a column per resource of
    ``resources`` (the tick's capacity vector) — each field as :class:`UserPlanInput` has it:

    ``cpu_weight`` (n,); ``allocation``, ``static_share`` (n, R) resource units; ``unused``
    (n, R) bool; ``capped`` the contended resources enforced; ``memory_current_bytes``,
    ``guaranteed_memory_bytes`` (n,) integers; ``written_high_bytes`` (n,) with NaN for None
    (never written, or max); ``memory_demand_bytes`` (n,); ``memory_bound_bytes`` and
    ``memory_guard_bytes`` (n,), NaN for none; ``disks`` the governed disks and ``io_mix`` (n, len(disks), 2) her read and
    write bytes/s on each; ``ceilings`` per row her admin's limits or None.
    """

    resources: Sequence[Resource]
    cpu_weight: np.ndarray
    allocation: np.ndarray
    static_share: np.ndarray
    unused: np.ndarray
    capped: frozenset[Resource]
    memory_current_bytes: np.ndarray
    written_high_bytes: np.ndarray
    guaranteed_memory_bytes: np.ndarray
    memory_demand_bytes: np.ndarray
    memory_bound_bytes: np.ndarray
    memory_guard_bytes: np.ndarray
    disks: tuple[DiskPlan, ...]
    io_mix: np.ndarray
    ceilings: Sequence[LimitSet | None]

    def user_input(self, row: int, allocation: Mapping[Resource, float] | None = None) -> UserPlanInput:
        """Row ``row`` as plan_user's input (for her reasons; the reference in tests).
        ``allocation``: her row of it as a mapping, when the caller has one (the loop's report
        has), else built from the row."""
        resources = self.resources
        high = self.written_high_bytes[row]
        bound, guard = self.memory_bound_bytes[row], self.memory_guard_bytes[row]
        return UserPlanInput(
            cpu_weight=float(self.cpu_weight[row]),
            allocation=dict(zip(resources, self.allocation[row].tolist())) if allocation is None else allocation,
            static_share=dict(zip(resources, self.static_share[row].tolist())),
            unused=frozenset(r for r, flag in zip(resources, self.unused[row].tolist()) if flag),
            capped=self.capped,
            memory=MemoryState(int(self.memory_current_bytes[row]), None if np.isnan(high) else int(high)),
            guaranteed_memory_bytes=int(self.guaranteed_memory_bytes[row]),
            memory_demand_bytes=float(self.memory_demand_bytes[row]),
            disks=self.disks,
            io_mix={d.device: tuple(self.io_mix[row, k].tolist()) for k, d in enumerate(self.disks)},
            ceiling=self.ceilings[row],
            memory_bound_bytes=None if np.isnan(bound) else float(bound),
            memory_guard_bytes=None if np.isnan(guard) else float(guard),
        )


def plan_rows(rows: PlanRows, margin_bytes: int, high_step_bytes: int) -> list[LimitSet]:
    """Every row's limits: ``[plan_user(rows.user_input(i), margin_bytes, high_step_bytes).limits
    for each row i]``, computed over arrays (see the module docstring)."""
    n = len(rows.cpu_weight)
    if n == 0:
        return []
    column = {r: j for j, r in enumerate(rows.resources)}
    cpu_weight = _ints(np.clip(np.rint(100 * rows.cpu_weight), CPU_WEIGHT_MIN, CPU_WEIGHT_MAX)).tolist()
    if CPU in rows.capped:
        cores = _cap(rows, column[CPU])
        quota = _ints(np.maximum(CPU_QUOTA_MIN_USEC, np.rint(cores * CPU_PERIOD_DEFAULT_USEC))).tolist()
        cpu_max = [CpuMax(q, CPU_PERIOD_DEFAULT_USEC) for q in quota]
    else:
        cpu_max = [_NO_CPU_MAX] * n
    # fmax: Python's max(0.0, nan) is 0.0, numpy's maximum would keep the NaN
    low_array = _pages_down(np.minimum(rows.guaranteed_memory_bytes, np.fmax(0.0, rows.memory_demand_bytes)))
    low = low_array.tolist()
    if MEMORY in rows.capped:
        high_array = _memory_high(rows, column, high_step_bytes, low_array)
        high = high_array.tolist()
        memory_max = _memory_max(high_array, rows.memory_current_bytes, margin_bytes).tolist()
    else:
        high, memory_max = _guard_limits(rows, margin_bytes)
    io_max: list[dict[str, IoMax]] = [{} for _ in range(n)]
    for k, disk in enumerate(rows.disks):
        if disk.resource not in rows.capped:
            continue
        j = column[disk.resource]
        rbps, wbps = _io_limit(rows, k, disk, _cap(rows, j), rows.static_share[:, j])
        for limits, r, w in zip(io_max, rbps.tolist(), wbps.tolist()):
            limits[disk.device] = IoMax(rbps=r, wbps=w)
    planned = []
    for c, w, lo, h, m, io, ceiling in zip(cpu_max, cpu_weight, low, high, memory_max, io_max, rows.ceilings):
        if ceiling is not None and _limits_anything(ceiling):
            c, lo, h, m, io = _within_ceiling(c, lo, h, m, io, ceiling, _SILENT)
        planned.append(LimitSet(c, w, lo, h, m, io))
    return planned


def _cap(rows: PlanRows, j: int) -> np.ndarray:
    """plan._cap over rows: her allocation of resource column ``j``, or her weighted static
    share where she does not use it and it is more."""
    allocation, share = rows.allocation[:, j], rows.static_share[:, j]
    return np.where(rows.unused[:, j] & (share > allocation), share, allocation)


def _memory_high(rows: PlanRows, column: dict[Resource, int], step: int, low: np.ndarray) -> np.ndarray:
    """plan._memory_high over rows (memory contended; ``low`` their memory.low): bytes, int64."""
    target = _pages_down(rows.allocation[:, column[MEMORY]])  # memory is in every capacity vector
    bound = rows.memory_bound_bytes
    bounded = np.nan_to_num(bound, nan=np.inf) < target  # NaN: no bound
    target = np.where(bounded, _pages_down(np.where(bounded, bound, 0.0)), target)
    target = np.maximum(target, np.minimum(low, _pages_down(rows.memory_current_bytes)))
    was = rows.written_high_bytes
    never = np.isnan(was)
    start = np.where(never, np.maximum(rows.memory_current_bytes, target), _ints(np.nan_to_num(was)))
    return np.where(target >= start, target, np.maximum(target, _pages_up(start - step)))


def _guard_limits(rows: PlanRows, margin_bytes: int) -> tuple[list[int | None], list[int | None]]:
    """plan._memory_high and memory.max where memory is not contended: (high, max) per row,
    None but in the rows with a guard."""
    n = len(rows.memory_guard_bytes)
    high: list[int | None] = [None] * n
    memory_max: list[int | None] = [None] * n
    guarded = np.flatnonzero(~np.isnan(rows.memory_guard_bytes))
    if len(guarded):
        current = rows.memory_current_bytes[guarded]
        guard_high = _pages_down(np.maximum(rows.memory_guard_bytes[guarded], current))
        guard_max = _memory_max(guard_high, current, margin_bytes)
        for i, h, m in zip(guarded.tolist(), guard_high.tolist(), guard_max.tolist()):
            high[i], memory_max[i] = h, m
    return high, memory_max


def _memory_max(high: np.ndarray, current: np.ndarray, margin_bytes: int) -> np.ndarray:
    """plan.safe_memory_max over rows: bytes, int64."""
    return _pages_up(np.maximum(high, current) + margin_bytes)


def _io_limit(rows: PlanRows, k: int, disk: DiskPlan, fraction: np.ndarray,
              static_share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """plan._io_limit over rows: (rbps, wbps), int64."""
    read, write = rows.io_mix[:, k, 0], rows.io_mix[:, k, 1]
    busy = read / disk.read_bytes_per_s + write / disk.write_bytes_per_s
    active = busy > 0
    scale = fraction / np.where(active, busy, 1.0)
    rbps = np.where(active, read * scale, fraction * disk.read_bytes_per_s)
    wbps = np.where(active, write * scale, fraction * disk.write_bytes_per_s)
    floor = 0.1 * static_share
    return (_ints(np.maximum(np.maximum(1024, np.rint(rbps)), np.rint(floor * disk.read_bytes_per_s))),
            _ints(np.maximum(np.maximum(1024, np.rint(wbps)), np.rint(floor * disk.write_bytes_per_s))))


def _ints(values: np.ndarray) -> np.ndarray:
    """``values`` (whole numbers) as int64. Raises ValueError where one is not finite, as
    Python's ``round``/``int`` would (numpy would wrap it to garbage): the loop then plans each
    user alone, and hers fails."""
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        raise ValueError("a planned limit is not a finite number")
    return values.astype(np.int64)


def _pages_down(n_bytes: np.ndarray) -> np.ndarray:
    """plan._pages_down: whole pages, rounded down (values ≥ 0), int64."""
    return _ints(np.trunc(n_bytes)) // PAGE_SIZE * PAGE_SIZE


def _pages_up(n_bytes: np.ndarray) -> np.ndarray:
    """plan._pages_up: whole pages, rounded up, int64."""
    return -(-_ints(np.trunc(n_bytes)) // PAGE_SIZE) * PAGE_SIZE
