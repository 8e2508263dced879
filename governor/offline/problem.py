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

**Bounds** (what the solvers can take, checked before any work):

* amounts (capacity, demand, allocated): 0, or :data:`AMOUNT_MIN` (10^-12) … :data:`AMOUNT_MAX`
  (10^18). Progressive filling divides capacity × weight by demand; within these bounds and the
  weights' (10^-6 … 10^6) every such ratio and every share is a normal float — a demand of
  10^-308 against a capacity of 10^308 is not. Pick a unit in which amounts fall in range.
* ``max_units``: at most :data:`UNITS_MAX` (10^15): units are floats, exact as whole numbers
  up to 2^53 ≈ 9·10^15.
* weights: 10^-6 … 10^6 (:data:`~governor.config.source.WEIGHT_MIN`).
* at most :data:`MAX_USERS` (100,000) users and :data:`MAX_CELLS` (4·10^6) users × resources:
  the solvers hold a few ``users × resources`` arrays; 4·10^6 cells is about 5 s and 500 MiB.
* ``--discrete`` hands out whole units one at a time: see
  :func:`governor.fairness.discrete.units_bound` and :data:`governor.offline.allocate.MAX_DISCRETE_UNITS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from governor.config.source import InputError, Located, check_keys, check_number, check_weight, load, mapping

__all__ = ["AMOUNT_MAX", "AMOUNT_MIN", "MAX_CELLS", "MAX_USERS", "Problem", "UNITS_MAX", "UserSpec", "InputError",
           "load_problem", "parse_problem"]

AMOUNT_MIN, AMOUNT_MAX = 1e-12, 1e18
UNITS_MAX = 1e15
MAX_USERS = 100_000
MAX_CELLS = 4_000_000

_TOP_KEYS = ("capacity", "users")
_USER_KEYS = ("demand", "max_units", "weight", "allocated")
_USER_KEY_SET = frozenset(_USER_KEYS)


class UserSpec(NamedTuple):
    """One user's entry. ``weight`` is a float or a per-resource mapping; ``max_units`` None = unbounded.

    Immutable like the frozen dataclasses elsewhere, but a named tuple: a 10,000-user file makes
    10,000 of them, and a frozen dataclass's ``__init__`` costs three times as much (issue 16)."""

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
    source: Located | None = field(default=None, compare=False, repr=False)  # where it was read: lines for errors

    @property
    def resources(self) -> list[str]:
        return list(self.capacity)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(capacity (m,), demand (n,m), weight (n,m), max_units (n,) inf=unbounded, holdings (n,m))``."""
        res, users = self.resources, self.users
        n, m = len(users), len(res)
        C = np.array([self.capacity[r] for r in res], dtype=float)
        D = _fill(np.zeros((n, m)), res, [u.demand for u in users])
        H = _fill(np.zeros((n, m)), res, [u.allocated or {} for u in users])
        scalar = np.array([u.weight if type(u.weight) is float else 1.0 for u in users], dtype=float)
        W = _fill(np.repeat(scalar.reshape(n, 1), m, axis=1), res,  # resources a weight mapping leaves out weigh 1
                  [{} if type(u.weight) is float else u.weight for u in users])
        M = np.array([np.inf if u.max_units is None else u.max_units for u in users], dtype=float)
        return C, D, W, M, H


def _fill(out: np.ndarray, resources: list[str], rows: list[Mapping[str, float]]) -> np.ndarray:
    """``out`` ``(n, m)`` with ``out[i, j] = rows[i][resources[j]]`` wherever ``rows[i]`` names it.

    A row that names every resource in ``resources``' order (the common case) goes in with the
    others in one assignment; any other row entry by entry: O(entries), not O(n·m).
    """
    order = tuple(resources)
    if rows and all(map(order.__eq__, map(tuple, rows))):  # every row: one pass at C speed
        out[:] = np.fromiter(chain.from_iterable(row.values() for row in rows), float, count=out.size).reshape(out.shape)
        return out
    column = {r: j for j, r in enumerate(resources)}
    whole, values = [], []
    for i, row in enumerate(rows):
        if tuple(row) == order:
            whole.append(i)
            values.append(list(row.values()))
        else:
            for r, x in row.items():
                out[i, column[r]] = x
    if whole:
        out[whole] = values
    return out


def load_problem(path: str | Path) -> Problem:
    """Read and validate a problem file.

    Raises:
        InputError: unreadable file, bad YAML/JSON, unknown key, a negative or non-numeric
            amount, a demand on a resource missing from ``capacity``, a zero weight, or the
            users' ``allocated`` over a resource's capacity.
    """
    return parse_problem(load(path))


def parse_problem(src: Located) -> Problem:
    """Validate loaded data (see :func:`load_problem`)."""
    top = mapping(src, (), src.data, "a mapping with 'capacity' and 'users'")
    check_keys(src, (), top, _TOP_KEYS)
    for key in _TOP_KEYS:
        if key not in top:
            raise src.error((key,), "missing; expected a mapping")
    capacity = _plain(top["capacity"], None) or _amounts(src, ("capacity",), top["capacity"], None)
    if not capacity:
        raise src.error(("capacity",), "expected at least one resource")
    users_raw = mapping(src, ("users",), top["users"], "a mapping of user name to user entry")
    if len(users_raw) > MAX_USERS:
        raise src.error(("users",), f"expected at most {MAX_USERS:,} users, got {len(users_raw):,}")
    if len(users_raw) * len(capacity) > MAX_CELLS:
        raise src.error(("users",), f"{len(users_raw):,} users × {len(capacity):,} resources: expected at most "
                                    f"{MAX_CELLS:,} (the solvers hold arrays of users × resources)")
    users = tuple(_user(src, str(name), entry, capacity) for name, entry in users_raw.items())
    held = dict.fromkeys(capacity, 0.0)
    for user in users:
        for r, x in user.allocated.items():
            held[r] += x
            if held[r] > capacity[r] * (1 + 1e-9):
                raise src.error(("users", user.name, "allocated", r),
                                f"the users' allocations reach {held[r]:g} here, over the capacity {capacity[r]:g}")
    return Problem(capacity, users, src)


def _user(src: Located, name: str, entry: Any, capacity: Mapping[str, float]) -> UserSpec:
    # the common case runs on C-speed checks (_plain); a field path is built only for a slow path
    body = entry if type(entry) is dict else mapping(src, ("users", name), entry, "a mapping with 'demand'")
    if not _USER_KEY_SET.issuperset(body):
        check_keys(src, ("users", name), body, _USER_KEYS)
    if "demand" not in body:
        raise src.error(("users", name, "demand"), "missing; expected a mapping of resource to amount per unit")
    demand = body["demand"]
    demand = _plain(demand, capacity) or _amounts(src, ("users", name, "demand"), demand, capacity)
    allocated = body.get("allocated")
    if allocated is not None:
        allocated = _plain(allocated, capacity) or _amounts(src, ("users", name, "allocated"), allocated, capacity)
    max_units = body.get("max_units")
    if max_units is not None:
        max_units = _number(src, ("users", name, "max_units"), max_units, UNITS_MAX)
    weight = body.get("weight", 1.0)
    if type(weight) is dict:
        weight = _weight(src, ("users", name, "weight"), weight, capacity)
    elif (type(weight) is not int and type(weight) is not float) or not 1e-6 <= weight <= 1e6:
        weight = _weight_number(src, ("users", name, "weight"), weight)
    return UserSpec(name, demand, float(weight) if type(weight) is not dict else weight, max_units,
                    {} if allocated is None else allocated)


def _weight(src: Located, path: tuple, value: Any, capacity: Mapping[str, float]) -> float | dict[str, float]:
    if type(value) is dict:
        out = {}
        for res, w in value.items():
            _known(src, path + (res,), res, capacity)
            out[str(res)] = _weight_number(src, path + (res,), w)
        return out
    return _weight_number(src, path, value)


def _weight_number(src: Located, path: tuple, value: Any) -> float:
    if (type(value) is int or type(value) is float) and 1e-6 <= value <= 1e6:  # the common case, fast
        return float(value)
    try:
        return check_weight(value)
    except ValueError as exc:
        raise src.error(path, str(exc)) from None


def _number(src: Located, path: tuple, value: Any, maximum: float) -> float:
    if (type(value) is int or type(value) is float) and 0 <= value <= maximum:  # the common case, fast
        return float(value)
    try:
        return check_number(value, maximum=maximum)
    except ValueError as exc:
        raise src.error(path, str(exc)) from None


_NUMERIC = {int, float}
_FLOAT = {float}


def _plain(value: Any, capacity: Mapping[str, float] | None) -> dict[str, float] | None:
    """``value`` as amounts if it is the common case — a mapping of known resources to plain
    numbers within bounds — checked at C speed; else None (then :func:`_amounts` says why). An
    empty mapping is the common case too: ``{}``."""
    if type(value) is not dict or (capacity is not None and not capacity.keys() >= value.keys()):
        return None
    amounts = value.values()
    if not amounts:
        return {}
    kinds = set(map(type, amounts))
    if _NUMERIC.issuperset(kinds):
        total = sum(amounts)
        if total == total and min(amounts) >= AMOUNT_MIN and max(amounts) <= AMOUNT_MAX:
            # (keys are text: see source.py); floats already are what the solvers take
            return value if kinds == _FLOAT else dict(zip(value, map(float, amounts)))
    return None


def _amounts(src: Located, path: tuple, value: Any, capacity: Mapping[str, float] | None) -> dict[str, float]:
    body = mapping(src, path, value, "a mapping of resource to amount")
    out = {}
    for res, amount in body.items():
        if capacity is not None and res not in capacity:
            _known(src, path + (res,), res, capacity)
        x = _number(src, path + (res,), amount, AMOUNT_MAX)
        if 0 < x < AMOUNT_MIN:
            raise src.error(path + (res,), f"expected 0 or a number ≥ {AMOUNT_MIN:g} (amounts span {AMOUNT_MIN:g} … "
                                           f"{AMOUNT_MAX:g}: use a smaller unit), got {x!r}")
        out[str(res)] = x
    return out


def _known(src: Located, path: tuple, res: Any, capacity: Mapping[str, float]) -> None:
    if str(res) not in capacity:
        raise src.error(path, f"resource {res!r} is not in capacity; expected one of: {', '.join(capacity)}")
