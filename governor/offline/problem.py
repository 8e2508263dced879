"""An allocation problem with named resources and users: the input of ``drfgov allocate``.

File format (YAML or JSON)::

    capacity: {cpu: 9, memory: 18}          # resource name -> capacity (≥ 0)
    users:
      A: {demand: {cpu: 1, memory: 4}}       # demand per unit; resources left out demand 0
      B: {demand: {cpu: 3, memory: 1}, max_units: 5, weight: 2}
      C: {demand: {cpu: 1}, weight: {cpu: 2, memory: 1}, allocated: {cpu: 1}}

``max_units`` (≥ 0, default unbounded) caps her units; ``weight`` is a number (> 0, default 1)
or a mapping per resource (resources left out weigh 1); ``allocated`` is what she already
holds. Resource names are free-form.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from governor.config.source import InputError, Located, check_keys, load, mapping, number

__all__ = ["Problem", "UserSpec", "InputError", "load_problem", "parse_problem"]

_TOP_KEYS = ("capacity", "users")
_USER_KEYS = ("demand", "max_units", "weight", "allocated")


@dataclass(frozen=True)
class UserSpec:
    """One user's entry. ``weight`` is a float or a per-resource mapping; ``max_units`` None = unbounded."""

    name: str
    demand: Mapping[str, float]
    weight: float | Mapping[str, float] = 1.0
    max_units: float | None = None
    allocated: Mapping[str, float] | None = None


@dataclass(frozen=True)
class Problem:
    """Capacity per named resource (in file order) and the users (in file order)."""

    capacity: Mapping[str, float]
    users: tuple[UserSpec, ...]

    @property
    def resources(self) -> list[str]:
        return list(self.capacity)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(capacity (m,), demand (n,m), weight (n,m), max_units (n,) inf=unbounded, holdings (n,m))``."""
        res = self.resources
        n, m = len(self.users), len(res)
        C = np.array([self.capacity[r] for r in res], dtype=float)
        D, W, H = np.zeros((n, m)), np.ones((n, m)), np.zeros((n, m))
        M = np.full(n, np.inf)
        for i, u in enumerate(self.users):
            for j, r in enumerate(res):
                D[i, j] = u.demand.get(r, 0.0)
                H[i, j] = (u.allocated or {}).get(r, 0.0)
                W[i, j] = u.weight if isinstance(u.weight, float) else u.weight.get(r, 1.0)
            if u.max_units is not None:
                M[i] = u.max_units
        return C, D, W, M, H


def load_problem(path: str | Path) -> Problem:
    """Read and validate a problem file.

    Raises:
        InputError: unreadable file, bad YAML/JSON, unknown key, a negative or non-numeric
            amount, a demand on a resource missing from ``capacity``, or a zero weight.
    """
    return parse_problem(load(path))


def parse_problem(src: Located) -> Problem:
    """Validate loaded data (see :func:`load_problem`)."""
    top = mapping(src, (), src.data, "a mapping with 'capacity' and 'users'")
    check_keys(src, (), top, _TOP_KEYS)
    for key in _TOP_KEYS:
        if key not in top:
            raise src.error((key,), "missing; expected a mapping")
    capacity = _amounts(src, ("capacity",), top["capacity"], None)
    if not capacity:
        raise src.error(("capacity",), "expected at least one resource")
    users_raw = mapping(src, ("users",), top["users"], "a mapping of user name to user entry")
    users = tuple(_user(src, str(name), entry, capacity) for name, entry in users_raw.items())
    return Problem(capacity, users)


def _user(src: Located, name: str, entry: Any, capacity: Mapping[str, float]) -> UserSpec:
    path = ("users", name)
    body = mapping(src, path, entry, "a mapping with 'demand'")
    check_keys(src, path, body, _USER_KEYS)
    if "demand" not in body:
        raise src.error(path + ("demand",), "missing; expected a mapping of resource to amount per unit")
    demand = _amounts(src, path + ("demand",), body["demand"], capacity)
    allocated = _amounts(src, path + ("allocated",), body.get("allocated"), capacity)
    max_units = body.get("max_units")
    if max_units is not None:
        max_units = number(src, path + ("max_units",), max_units)
    return UserSpec(name, demand, _weight(src, path + ("weight",), body.get("weight", 1.0), capacity), max_units, allocated)


def _weight(src: Located, path: tuple, value: Any, capacity: Mapping[str, float]) -> float | dict[str, float]:
    if isinstance(value, dict):
        out = {}
        for res, w in value.items():
            _known(src, path + (res,), res, capacity)
            out[str(res)] = number(src, path + (res,), w, strict=True)
        return out
    return number(src, path, value, strict=True)


def _amounts(src: Located, path: tuple, value: Any, capacity: Mapping[str, float] | None) -> dict[str, float]:
    body = mapping(src, path, value, "a mapping of resource to amount")
    out = {}
    for res, amount in body.items():
        if capacity is not None:
            _known(src, path + (res,), res, capacity)
        out[str(res)] = number(src, path + (res,), amount)
    return out


def _known(src: Located, path: tuple, res: Any, capacity: Mapping[str, float]) -> None:
    if str(res) not in capacity:
        raise src.error(path, f"resource {res!r} is not in capacity; expected one of: {', '.join(capacity)}")

