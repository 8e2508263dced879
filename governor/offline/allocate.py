"""Solving a named :class:`~governor.offline.problem.Problem`: the engine behind ``drfgov allocate``.

Thin glue between named resources/users and the array engines: :func:`governor.fairness.drf.progressive_filling`
(divisible units) and :class:`governor.fairness.discrete.DiscreteDRF` (whole tasks, paper Algorithm 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from governor.fairness.discrete import DiscreteDRF, units_bound
from governor.fairness.drf import Fill, fill_from_units
from governor.fairness.alternatives import DEFAULT_SLOTS, AllocatorError, allocate_with, check_allocator
from governor.offline.problem import Problem

__all__ = ["MAX_DISCRETE_UNITS", "UserResult", "Result", "named_result", "policy_cpu_index", "solve", "solve_fill"]

#: Most units ``--discrete`` hands out. Algorithm 1 makes one O(log n) decision per unit, at
#: 100,000–150,000 a second on a 2-core machine: 10^6 units is about ten seconds. Beyond it a
#: problem is refused before any work (:func:`governor.fairness.discrete.units_bound`);
#: progressive filling, without ``--discrete``, has no such limit.
MAX_DISCRETE_UNITS = 1_000_000


@dataclass(frozen=True)
class UserResult:
    """One user's outcome; amounts in the resources' own units."""

    units: float
    allocation: dict[str, float]
    dominant_resource: str | None
    dominant_share: float
    weighted_share: float


@dataclass(frozen=True)
class Result:
    """Per-user outcomes (file order), total consumption and the saturated resources."""

    users: dict[str, UserResult]
    consumed: dict[str, float]
    saturated: list[str]
    discrete: bool = False

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document; integer units when discrete, floats rounded to 12 digits."""
        unit = int if self.discrete else _clean
        return {
            "users": {
                name: {
                    "units": unit(u.units),
                    "allocation": {r: _clean(a) for r, a in u.allocation.items()},
                    "dominant_resource": u.dominant_resource,
                    "dominant_share": _clean(u.dominant_share),
                    "weighted_share": _clean(u.weighted_share),
                }
                for name, u in self.users.items()
            },
            "consumed": {r: _clean(c) for r, c in self.consumed.items()},
            "saturated": list(self.saturated),
        }


def solve(problem: Problem, discrete: bool = False, policy: str = "drf", slots: int = DEFAULT_SLOTS) -> Result:
    """The allocation of ``problem`` under ``policy`` (:data:`governor.fairness.alternatives.ALLOCATORS`):
    weighted DRF by progressive filling, or by Algorithm 1 when ``discrete`` (DRF only).

    Raises:
        AllocatorError: ``discrete`` with another policy, cpu-fair without a ``cpu`` resource.
    """
    return named_result(problem.resources, [u.name for u in problem.users], solve_fill(problem, discrete, policy, slots),
                        discrete)


def check_options(policy: str, discrete: bool) -> None:
    """The rules of the options alone, before a problem is read.

    Raises:
        UnknownAllocator: no policy of that name.
        AllocatorError: ``discrete`` with another policy than drf.
    """
    check_allocator(policy)
    if discrete and policy != "drf":
        raise AllocatorError(f"--discrete is DRF's Algorithm 1; policy {policy} allocates divisible units")


def solve_fill(problem: Problem, discrete: bool = False, policy: str = "drf", slots: int = DEFAULT_SLOTS) -> Fill:
    """:func:`solve` before names are attached (:func:`check_options` first)."""
    check_options(policy, discrete)
    C, D, W, M, H = problem.arrays()
    if discrete:
        _check_discrete_work(problem, C, D, M, H)
        return fill_from_units(C, D, W, H, _discrete_units(C, D, W, M, H))
    return allocate_with(policy, C, D, W, M, H, slots=slots, cpu=policy_cpu_index(problem))


def policy_cpu_index(problem: Problem) -> int | None:
    """Index of the resource named ``cpu`` (what cpu-fair shares), or None."""
    return problem.resources.index("cpu") if "cpu" in problem.resources else None


def _check_discrete_work(problem: Problem, C, D, M, H) -> None:
    """Refuse a problem Algorithm 1 could not finish in bounded time (see :data:`MAX_DISCRETE_UNITS`).

    Raises:
        InputError: naming the user who could take the most units (AllocatorError without a
            source file).
    """
    total, per_user = units_bound(C, D, M, H)
    if total <= MAX_DISCRETE_UNITS:
        return
    i = max(range(len(per_user)), key=per_user.__getitem__)
    user = problem.users[i]
    message = (f"--discrete would hand out up to {total:.3g} units one at a time ({per_user[i]:.3g} of them hers alone); "
               f"at most {MAX_DISCRETE_UNITS:,}: give max_units, use larger units, or leave out --discrete "
               "(progressive filling has no such limit)")
    if problem.source is None:
        raise AllocatorError(f"users.{user.name}: {message}")
    raise problem.source.error(("users", user.name), message)


def _discrete_units(C, D, W, M, H) -> np.ndarray:
    scheduler = DiscreteDRF(C)
    for i in range(D.shape[0]):
        cap = None if math.isinf(M[i]) else int(math.floor(M[i]))
        scheduler.add_user(i, D[i], weight=W[i], max_tasks=cap, holdings=H[i])
    scheduler.schedule()
    return np.array([scheduler.tasks(i) for i in range(D.shape[0])], dtype=float)


def named_result(resources: list[str], names: list[str], fill: Fill, discrete: bool = False) -> Result:
    """Attach resource and user names to a :class:`~governor.fairness.drf.Fill`."""
    users = {
        name: UserResult(
            units=float(fill.units[i]),
            allocation={r: float(fill.allocation[i, j]) for j, r in enumerate(resources)},
            dominant_resource=resources[fill.dominant_resource[i]] if fill.dominant_resource[i] >= 0 else None,
            dominant_share=float(fill.dominant_share[i]),
            weighted_share=float(fill.weighted_share[i]),
        )
        for i, name in enumerate(names)
    }
    consumed = {r: float(fill.consumed[j]) for j, r in enumerate(resources)}
    saturated = [r for j, r in enumerate(resources) if fill.saturated[j]]
    return Result(users, consumed, saturated, discrete)


def _clean(x: float) -> float:
    """Round away float noise (2.9999999999999996 → 3.0) at 12 significant digits."""
    return float(f"{x:.12g}")
