"""Who is governed and with which weights: the policy applied to Unix users and groups.

Group membership comes from the group database (``os.getgrouplist``: supplementary groups
plus the primary group), or from what the caller already read of it (``known_groups``: the
daemon's :class:`monitors.accounts.Accounts`, one pass for the users who appear together).
Lookups are cached per uid; the cache belongs to one policy, so a
reload (SIGHUP) picks up membership changes.
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Callable, Mapping

from governor.config.policy import RESOURCE_KINDS, Policy, Weight, weight_of
from monitors.model import GovernedUser

__all__ = ["PolicyWeights", "exempt_names", "groups_of", "kind_weights"]


def groups_of(name: str) -> list[str]:
    """Names of the groups ``name`` belongs to (primary first); [] for an unknown user."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return []
    names = []
    for gid in os.getgrouplist(name, entry.pw_gid):
        try:
            names.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return names


def kind_weights(weight: Weight, default: Weight) -> dict[str, float]:
    """A policy weight as ``{kind: weight}`` for every resource kind (cpu, memory, io, net).

    A scalar applies to every kind; a per-resource mapping takes the missing kinds from the
    default weight (itself scalar or per resource, 1.0 where it says nothing).
    """
    if not isinstance(weight, Mapping):
        return {kind: float(weight) for kind in RESOURCE_KINDS}
    base = kind_weights(default, 1.0) if default is not weight else {kind: 1.0 for kind in RESOURCE_KINDS}
    return {kind: float(weight.get(kind, base[kind])) for kind in RESOURCE_KINDS}


def exempt_names(policy: Policy) -> frozenset[str]:
    """Login names the policy leaves alone: ``exempt_users`` and every member (supplementary
    or primary) of ``exempt_groups``."""
    names = set(policy.governed.exempt_users)
    gids = {}
    for group in policy.governed.exempt_groups:
        try:
            entry = grp.getgrnam(group)
        except KeyError:
            continue  # check-config warned already
        names.update(entry.gr_mem)
        gids[entry.gr_gid] = group
    if gids:
        names.update(p.pw_name for p in pwd.getpwall() if p.pw_gid in gids)
    return frozenset(names)


class PolicyWeights:
    """``weights(user) -> {kind: weight}`` for :class:`governor.control.loop.Governor`, cached per uid.

    ``known_groups(name)``: her groups as :func:`groups_of` gives them, or None to look her up.
    """

    def __init__(self, policy: Policy, known_groups: Callable[[str], list[str] | None] = lambda name: None):
        self.policy, self.known_groups = policy, known_groups
        self._cache: dict[tuple[int, str], dict[str, float]] = {}

    def __call__(self, user: GovernedUser) -> dict[str, float]:
        key = (user.uid, user.name)
        found = self._cache.get(key)
        if found is None:
            groups = self.known_groups(user.name)
            weight = weight_of(self.policy, user.name, groups_of(user.name) if groups is None else groups)
            found = self._cache[key] = kind_weights(weight, self.policy.default_weight)
        return found
