"""Which users are governed: the ``user-UID.slice`` cgroups under ``user.slice``.

systemd-logind creates ``user.slice/user-UID.slice`` for every user with a session
(systemd.special(7)); users come and go, so discovery runs every tick. Names come from the
password database (:mod:`monitors.accounts`: one pass for the users who appear together when it
is local); a uid without an entry is named ``uid<UID>``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection

from cgroups import Cgroup
from cgroups.cgroup import COUNTER_FILES
from monitors.accounts import ACCOUNTS
from monitors.model import GovernedUser

__all__ = ["FILES_PER_USER", "SliceDiscovery", "descriptor_budget", "discover", "user_name"]

#: Interface files a user's cgroup keeps open at most: her sample's eight
#: (:data:`cgroups.cgroup.COUNTER_FILES`); limit files are opened and closed at each read. (When
#: limit files stayed open too, 14 a user, a budget that counted only the sampled files gave
#: EMFILE at a soft limit of 1,024 with 76 users.)
FILES_PER_USER = len(COUNTER_FILES)
#: Descriptors kept for everything else: the daemon's own files, sockets, D-Bus, netlink.
DESCRIPTOR_RESERVE = 256


def descriptor_budget() -> int:
    """How many users' files may stay open between ticks: the soft RLIMIT_NOFILE less a reserve,
    ÷ :data:`FILES_PER_USER`. The rest are opened and closed at each read (slower, bounded)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(0, (soft - DESCRIPTOR_RESERVE) // FILES_PER_USER)

_SLICE = re.compile(r"^user-(\d+)\.slice$")


def user_name(uid: int) -> str:
    """Login name of ``uid``, or ``uid<UID>`` when the password database has none."""
    name = ACCOUNTS.name_of(uid)
    return f"uid{uid}" if name is None else name


def discover(user_slice: Cgroup, min_uid: int = 1000, exempt: Collection[int | str] = ()) -> list[GovernedUser]:
    """Users with a slice under ``user_slice``, uid ≥ ``min_uid``, not ``exempt`` (uids or names), by uid.

    A missing ``user_slice`` (no user logged in yet) gives an empty list. One-off: a loop
    should keep a :class:`SliceDiscovery`.
    """
    return SliceDiscovery(user_slice, min_uid, exempt, keep_open=False)()


class SliceDiscovery:
    """:func:`discover` for a loop that calls it every tick, at a fraction of the cost.

    A user's :class:`GovernedUser` — her name (looked up once, when her slice appears) and her
    :class:`Cgroup` with its interface files kept open (``keep_open``) — is reused for as long
    as her slice exists; when it vanishes its files are closed. Only the first
    ``open_users_max`` users keep files open (default :func:`descriptor_budget`), so any number
    of users fits in the descriptor limit: at ~70 users the old daemon hit EMFILE at 1,024.
    ``min_uid`` and ``exempt`` may be changed between calls.
    """

    def __init__(self, user_slice: Cgroup, min_uid: int = 1000, exempt: Collection[int | str] = (),
                 keep_open: bool = True, open_users_max: int | None = None):
        self.user_slice, self.min_uid, self.exempt, self.keep_open = user_slice, min_uid, exempt, keep_open
        self.open_users_max = open_users_max if open_users_max is not None else descriptor_budget()
        self._known: dict[str, GovernedUser] = {}
        self._open_users = 0  # users whose files stay open

    def __call__(self) -> list[GovernedUser]:
        known, current = self._known, {}
        try:
            with os.scandir(self.user_slice.path) as entries:
                for entry in entries:
                    user = known.get(entry.name)
                    if user is None:
                        user = self._new(entry)
                        if user is None:
                            continue
                    current[entry.name] = user
        except FileNotFoundError:
            pass  # no user.slice: nobody has logged in yet
        for name in known.keys() - current.keys():
            gone = known[name].cgroup
            self._open_users -= gone.keeps_open
            gone.close()
        self._known = current
        exempt = self.exempt
        return sorted(u for u in current.values()
                      if u.uid >= self.min_uid and u.uid not in exempt and u.name not in exempt)

    def _new(self, entry: os.DirEntry) -> GovernedUser | None:
        match = _SLICE.match(entry.name)
        if not match or not entry.is_dir():
            return None
        uid = int(match.group(1))
        keep_open = self.keep_open and self._open_users < self.open_users_max
        self._open_users += keep_open
        return GovernedUser(uid, user_name(uid), Cgroup(entry.path, keep_open=keep_open))

    def close(self) -> None:
        for user in self._known.values():
            user.cgroup.close()
        self._known, self._open_users = {}, 0
