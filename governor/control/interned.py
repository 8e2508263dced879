"""One instance per content, for values the loop keeps per user and tick (pure; issue 16).

The loop keeps a few small immutable values a user — the resources she is held back on, a
still user's zero rates — and nearly all users' are the same few. Each user's own copy costs
memory for nothing: at 10,000 users, megabytes of the daemon's RSS budget.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["Interned"]

V = TypeVar("V")


class Interned(Generic[V]):
    """A cache of one instance per key: ``interned(key, value)`` is the value first given with an
    equal key (``value`` itself the first time). At most ``most`` keys are kept; past that the
    cache starts over (a host has a few distinct contents; a flood of them costs no memory)."""

    __slots__ = ("_kept", "most")

    def __init__(self, most: int = 4096):
        self._kept: dict[Hashable, V] = {}
        self.most = most

    def __call__(self, key: Hashable, value: V) -> V:
        found = self._kept.get(key)
        if found is None:
            if len(self._kept) >= self.most:
                self._kept.clear()
            found = self._kept.setdefault(key, value)
        return found
