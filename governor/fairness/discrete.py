"""Discrete weighted DRF: the paper's Algorithm 1 as an online scheduler (pure, no I/O).

Source: Ghodsi et al., NSDI 2011, §4.2 Algorithm 1 ("pick user i with lowest dominant share
s_i ... if C + D_i ≤ R then launch, else the cluster is full") with the weighted share of
§4.3. Two changes real schedulers make, and this one does:

* a user whose next task does not fit is **skipped** (set aside until resources are released),
  instead of stopping the whole round — other users' smaller tasks may still fit;
* tasks finish (:meth:`DiscreteDRF.release`), users come and go, weights change.

A binary heap keyed on weighted share makes each decision ``O(log n)`` (stale heap entries are
discarded lazily by version number). Ties go to the user added first. Vectors are plain tuples
of floats in the order of the capacity vector; pure Python is faster than NumPy at this size.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

__all__ = ["DiscreteDRF", "UnknownUser", "units_bound"]

User = Hashable

#: A task fits when the resources' consumption stays within capacity × this: summing many
#: tasks' demands drifts by a few ulps (three tasks of 0.1 did not fit a capacity of 0.3).
FIT_SLACK = 1.0 + 1e-9


class UnknownUser(KeyError):
    """The named user was never added, or has been removed."""


@dataclass
class _Account:
    demand: tuple[float, ...]
    inv_weighted_capacity: tuple[float, ...]  # 1 / (C_r · w_r); 0 where C_r = 0
    max_tasks: int | None
    order: int
    allocation: list[float]
    tasks: int = 0
    version: int = 0
    waiting: bool = field(default=False)  # set aside: next task did not fit


class DiscreteDRF:
    """Online weighted DRF scheduler over whole tasks (paper Algorithm 1, skipping variant).

    Args:
        capacity: ``(m,)`` capacity of each resource, ``≥ 0``.

    Raises:
        ValueError: a negative or non-finite capacity.
    """

    def __init__(self, capacity: Sequence[float]):
        self.capacity = tuple(float(c) for c in capacity)
        if any(not (0 <= c < float("inf")) for c in self.capacity):
            raise ValueError("capacity must be finite and ≥ 0")
        self.consumed = [0.0] * len(self.capacity)
        self._accounts: dict[User, _Account] = {}
        self._heap: list[tuple[float, int, int, User]] = []
        self._order = itertools.count()
        self._waiting: set[User] = set()

    # -- membership ---------------------------------------------------------------------------

    def add_user(
        self,
        user: User,
        demand: Sequence[float],
        weight: float | Sequence[float] = 1.0,
        max_tasks: int | None = None,
        holdings: Sequence[float] | None = None,
    ) -> None:
        """Register ``user`` whose every task needs ``demand`` (``(m,)``, ≥ 0).

        ``weight`` is a scalar or ``(m,)`` vector (> 0). ``max_tasks`` bounds her tasks (None:
        unbounded). ``holdings`` (``(m,)``) are resources she already holds; they count toward
        her shares and the consumed vector. A user with an all-zero demand is never scheduled.

        Raises:
            ValueError: a duplicate user, a wrong-length vector, a negative amount, a
                non-positive weight or a negative ``max_tasks``.
        """
        if user in self._accounts:
            raise ValueError(f"user {user!r} already added")
        m = len(self.capacity)
        demand_t = _vector(demand, m, "demand")
        held = _vector(holdings if holdings is not None else [0.0] * m, m, "holdings")
        if max_tasks is not None and max_tasks < 0:
            raise ValueError("max_tasks must be ≥ 0")
        account = _Account(demand_t, self._inverse(weight), max_tasks, next(self._order), list(held))
        self._accounts[user] = account
        for r, h in enumerate(held):
            self.consumed[r] += h
        self._push(user, account)

    def remove_user(self, user: User) -> None:
        """Remove ``user`` and release everything she holds."""
        account = self._account(user)
        for r, a in enumerate(account.allocation):
            self.consumed[r] -= a
        del self._accounts[user]
        self._waiting.discard(user)
        self._wake()

    def set_weight(self, user: User, weight: float | Sequence[float]) -> None:
        """Change ``user``'s weight (scalar or ``(m,)``, > 0); her place in line follows."""
        account = self._account(user)
        account.inv_weighted_capacity = self._inverse(weight)
        self._push(user, account)

    def release(self, user: User, tasks: int = 1) -> None:
        """``tasks`` of ``user``'s tasks finished: return their resources.

        Raises:
            ValueError: she runs fewer than ``tasks`` tasks.
        """
        account = self._account(user)
        if not 0 <= tasks <= account.tasks:
            raise ValueError(f"user {user!r} runs {account.tasks} task(s), cannot release {tasks}")
        account.tasks -= tasks
        for r, d in enumerate(account.demand):
            account.allocation[r] -= tasks * d
            self.consumed[r] -= tasks * d
        self._push(user, account)
        self._wake()

    # -- decisions ----------------------------------------------------------------------------

    def schedule_one(self) -> User | None:
        """Launch one task for the lowest-weighted-share user whose next task fits.

        Returns the user, or None when no user's next task fits (or nobody wants more).
        Users skipped because their task did not fit wait until resources are released.
        """
        heap, accounts, capacity, consumed = self._heap, self._accounts, self.capacity, self.consumed
        while heap:
            _, order, version, user = heapq.heappop(heap)
            account = accounts.get(user)
            if account is None or account.order != order or account.version != version:
                continue  # stale entry (of this account, or of one removed under the same name)
            demand = account.demand
            # fits but for the float drift of summing many tasks (0.1 + 0.1 + 0.1 > 0.3)
            if any(c + d > cap * FIT_SLACK for c, d, cap in zip(consumed, demand, capacity) if d):
                account.waiting = True
                self._waiting.add(user)
                continue
            alloc = account.allocation
            for r, d in enumerate(demand):
                if d:
                    consumed[r] += d
                    alloc[r] += d
            account.tasks += 1
            self._push(user, account)
            return user
        return None

    def schedule(self, max_decisions: int | None = None) -> list[User]:
        """Run :meth:`schedule_one` until nothing fits (or ``max_decisions``); the users picked."""
        picked: list[User] = []
        while max_decisions is None or len(picked) < max_decisions:
            user = self.schedule_one()
            if user is None:
                break
            picked.append(user)
        return picked

    # -- state --------------------------------------------------------------------------------

    @property
    def users(self) -> list[User]:
        """Users in the order they were added."""
        return list(self._accounts)

    def tasks(self, user: User) -> int:
        """Tasks ``user`` runs now."""
        return self._account(user).tasks

    def allocation(self, user: User) -> tuple[float, ...]:
        """``(m,)`` what ``user`` holds: holdings plus her running tasks."""
        return tuple(self._account(user).allocation)

    def dominant_share(self, user: User) -> float:
        """``max_r allocation_r / capacity_r`` (paper §4)."""
        return max((a / c for a, c in zip(self._account(user).allocation, self.capacity) if c > 0), default=0.0)

    def weighted_share(self, user: User) -> float:
        """``max_r allocation_r / (capacity_r · weight_r)`` (paper §4.3)."""
        account = self._account(user)
        return _weighted(account.allocation, account.inv_weighted_capacity)

    # -- internals ----------------------------------------------------------------------------

    def _inverse(self, weight: float | Sequence[float]) -> tuple[float, ...]:
        m = len(self.capacity)
        w = (float(weight),) * m if isinstance(weight, (int, float)) else _vector(weight, m, "weight")
        if any(not (x > 0) for x in w):
            raise ValueError("weight must be > 0")
        return tuple(1.0 / (c * x) if c > 0 else 0.0 for c, x in zip(self.capacity, w))

    def _account(self, user: User) -> _Account:
        try:
            return self._accounts[user]
        except KeyError:
            raise UnknownUser(user) from None

    def _push(self, user: User, account: _Account) -> None:
        account.version += 1
        if account.waiting or not any(account.demand):
            return
        if account.max_tasks is not None and account.tasks >= account.max_tasks:
            return
        share = _weighted(account.allocation, account.inv_weighted_capacity)
        heapq.heappush(self._heap, (share, account.order, account.version, user))

    def _wake(self) -> None:
        """Resources were released: users set aside get another chance."""
        waiting, self._waiting = self._waiting, set()
        for user in waiting:
            account = self._accounts.get(user)
            if account is not None:
                account.waiting = False
                self._push(user, account)


def units_bound(capacity, demand, max_tasks, holdings) -> tuple[float, list[float]]:
    """An upper bound on the tasks :meth:`DiscreteDRF.schedule` can launch, one per decision, so
    a caller can refuse work that would not finish (pure arithmetic, ``O(n·m)``).

    Args (NumPy-compatible): ``capacity (m,)``, ``demand (n, m)``, ``max_tasks (n,)`` (inf:
    unbounded), ``holdings (n, m)``.

    Returns:
        ``(total, per_user)``: ``per_user[i]`` is the tasks of hers that fit in the capacity
        (within :data:`FIT_SLACK`, as :meth:`DiscreteDRF.schedule` fits them) left by everyone's
        holdings if she were alone (at most ``max_tasks[i]``; 0 for an all-zero
        demand, which is never scheduled). ``total`` is the smaller of their sum and
        ``m / d_min``, where ``d_i = max_r demand_ir / free_r`` is the share of the free capacity
        one task of hers takes on her dominant resource: every resource holds at most its free
        capacity, so ``Σ_i tasks_i · d_i ≤ Σ_r Σ_i tasks_i · demand_ir / free_r ≤ m``.
    """
    import numpy as np

    C = np.asarray(capacity, dtype=float)
    D = np.asarray(demand, dtype=float).reshape(-1, C.size)
    H = np.asarray(holdings, dtype=float).reshape(D.shape)
    M = np.asarray(max_tasks, dtype=float).reshape(D.shape[0])
    free = np.maximum(C * FIT_SLACK - H.sum(axis=0), 0.0)  # what fits as schedule() has it
    wants = D > 0
    with np.errstate(all="ignore"):
        ratio = np.where(wants, free / np.where(wants, D, 1.0), np.inf)  # her tasks that fit in r alone
        alone = np.floor(ratio.min(axis=1, initial=np.inf))
        per_user = np.where(wants.any(axis=1), np.minimum(alone, M), 0.0)
        share = np.where(wants, D / free, 0.0).max(axis=1, initial=0.0)  # inf where a resource is gone
    runs = per_user > 0
    total = float(per_user.sum())
    if runs.any():
        total = min(total, float(np.floor(C.size / share[runs].min())))
    return total, per_user.tolist()


def _weighted(allocation: Sequence[float], inv: Sequence[float]) -> float:
    return max(a * i for a, i in zip(allocation, inv))


def _vector(values: Sequence[float], m: int, name: str) -> tuple[float, ...]:
    out = tuple(float(v) for v in values)
    if len(out) != m:
        raise ValueError(f"{name} has {len(out)} entries, capacity has {m}")
    if any(not (0 <= v < float("inf")) for v in out):
        raise ValueError(f"{name} must be finite and ≥ 0")
    return out
