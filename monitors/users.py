"""Which users are governed: the ``user-UID.slice`` cgroups under ``user.slice``.

systemd-logind creates ``user.slice/user-UID.slice`` for every user with a session
(systemd.special(7)); users come and go, so discovery runs every tick. Names come from the
password database (pwd); a uid without an entry is named ``uid<UID>``.
"""

from __future__ import annotations

import pwd
import re
from collections.abc import Collection
from dataclasses import dataclass

from cgroups import Cgroup

__all__ = ["GovernedUser", "discover", "user_name"]

_SLICE = re.compile(r"^user-(\d+)\.slice$")


@dataclass(frozen=True, order=True)
class GovernedUser:
    """A user and her slice cgroup."""

    uid: int
    name: str
    cgroup: Cgroup


def user_name(uid: int) -> str:
    """Login name of ``uid``, or ``uid<UID>`` when the password database has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid{uid}"


def discover(user_slice: Cgroup, min_uid: int = 1000, exempt: Collection[int | str] = ()) -> list[GovernedUser]:
    """Users with a slice under ``user_slice``, uid ≥ ``min_uid``, not ``exempt`` (uids or names), by uid.

    A missing ``user_slice`` (no user logged in yet) gives an empty list.
    """
    try:
        entries = list(user_slice.path.iterdir())
    except FileNotFoundError:
        return []
    users = []
    for entry in entries:
        match = _SLICE.match(entry.name)
        if not match or not entry.is_dir():
            continue
        uid = int(match.group(1))
        if uid < min_uid or uid in exempt:
            continue
        name = user_name(uid)
        if name in exempt:
            continue
        users.append(GovernedUser(uid, name, Cgroup(entry)))
    return sorted(users)
