"""Which users are governed: the ``user-UID.slice`` cgroups under ``user.slice``.

systemd-logind creates ``user.slice/user-UID.slice`` for every user with a session
(systemd.special(7)); users come and go, so discovery runs every tick. Who of them is governed
is :func:`governed`'s one rule: a uid from ``min_uid`` to ``max_uid`` (by default 1000 and up:
:data:`monitors.model.DEFAULT_MAX_UID`), not exempt, never ``nobody`` (:data:`monitors.model.OVERFLOW_UID`). Names come from the
password database (:mod:`monitors.accounts`: one pass for the users who appear together when it
is local); a uid without an entry is named ``uid<UID>``.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Collection, Iterable

from cgroups import Cgroup, CgroupGone, ReadFailed
from cgroups.cgroup import Descriptors
from monitors.accounts import ACCOUNTS
from monitors.model import DEFAULT_MAX_UID, DEFAULT_MIN_UID, GovernedUser, uid_never_governed

__all__ = ["DESCRIPTOR_RESERVE", "SliceDiscovery", "descriptor_budget", "discover", "governed", "is_governed",
           "slice_id_now", "slice_uid", "user_name"]

#: Descriptors kept for everything else: the daemon's own files, sockets, D-Bus, netlink.
DESCRIPTOR_RESERVE = 256


def slice_id_now(path: str | os.PathLike[str]) -> int:
    """The inode of the slice directory at ``path`` now (what discovery takes as a slice's id:
    :attr:`monitors.model.GovernedUser.slice_id`).

    Raises:
        CgroupGone: there is none; ReadFailed: stat(2) failed otherwise (its errno).
    """
    try:
        return os.stat(path).st_ino
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise CgroupGone(path) from None
        raise ReadFailed(path, exc.errno, exc.strerror or str(exc)) from None


def descriptor_budget() -> int:
    """How many of the users' counter files may stay open between ticks: the soft RLIMIT_NOFILE
    less :data:`DESCRIPTOR_RESERVE`, a :class:`cgroups.cgroup.Descriptors` budget shared by all
    users. Each keeps open the counter files she reads (:data:`cgroups.cgroup.COUNTER_FILES`:
    four, six while a memory.high of the governor's is in force, two more with disks governed)
    while one is left; the rest are opened and closed at each read (slower, bounded). A closed
    cgroup keeps nothing open again (:meth:`cgroups.Cgroup.close`). Limit files are always
    opened and closed: when they stayed open too, 14 a user, a budget that counted only the
    sampled files gave EMFILE at a soft limit of 1,024 with 76 users."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(0, soft - DESCRIPTOR_RESERVE)

#: A user slice's name as systemd-logind makes it: ``user-UID.slice``, the uid in canonical
#: decimal (no leading zero, ASCII digits), below 2^32. ``user-070001.slice`` or non-ASCII
#: digits are someone else's directories: they named the same uid as the real slice, and
#: sorting the two stopped every tick (the cgroup audit of 2026-11-26).
_SLICE = re.compile(r"user-(0|[1-9][0-9]{0,9})\.slice", re.ASCII)


def slice_uid(name: str) -> int | None:
    """The uid of a user slice's directory ``name`` (:data:`_SLICE`), or None for any other name."""
    match = _SLICE.fullmatch(name)
    if match is None:
        return None
    uid = int(match.group(1))
    return uid if uid < 2**32 else None


def user_name(uid: int) -> str:
    """Login name of ``uid``, or ``uid<UID>`` when the password database has none."""
    name = ACCOUNTS.name_of(uid)
    return f"uid{uid}" if name is None else name


def governed(users: Iterable[GovernedUser], min_uid: int, max_uid: int,
             exempt: Collection[int | str]) -> list[GovernedUser]:
    """The one rule of who is governed: ``users`` whose uid is ``min_uid`` … ``max_uid`` but
    not :data:`~monitors.model.OVERFLOW_UID` (nobody), and neither whose uid nor whose name is
    in ``exempt``, by uid."""
    return sorted((u for u in users if is_governed(u.uid, u.name, min_uid, max_uid, exempt)), key=_by_uid)


def is_governed(uid: int, name: str, min_uid: int, max_uid: int, exempt: Collection[int | str]) -> bool:
    """:func:`governed`'s rule for one user: a uid that may be governed
    (:func:`~monitors.model.uid_never_governed`: ``min_uid`` ≤ ``uid`` ≤ ``max_uid``, not nobody),
    neither ``uid`` nor ``name`` in ``exempt``."""
    return uid_never_governed(uid, min_uid, max_uid) is None and uid not in exempt and name not in exempt


def discover(user_slice: Cgroup, min_uid: int = DEFAULT_MIN_UID, exempt: Collection[int | str] = (), *,
             max_uid: int = DEFAULT_MAX_UID) -> list[GovernedUser]:
    """Users with a slice under ``user_slice``, uid ``min_uid`` … ``max_uid``, not ``exempt``
    (uids or names), by uid (:func:`governed`).

    A missing ``user_slice`` (no user logged in yet) gives an empty list. One-off: a loop
    should keep a :class:`SliceDiscovery`.
    """
    return SliceDiscovery(user_slice, min_uid, exempt, keep_open=False, max_uid=max_uid)()


class SliceDiscovery:
    """:func:`discover` for a loop that calls it every tick, at a fraction of the cost.

    A user's :class:`GovernedUser` — her name (looked up once, when her slice appears) and her
    :class:`Cgroup` with its interface files kept open (``keep_open``) — is reused for as long
    as her slice exists; when it vanishes its files are closed. Files stay open only within
    :attr:`descriptors`, a budget of ``descriptors`` (default :func:`descriptor_budget`) shared
    by all users, so any number of users fits in the descriptor limit: at ~70 users the old
    daemon hit EMFILE at 1,024. ``min_uid``, ``max_uid`` and ``exempt`` may be changed between
    calls.
    """

    def __init__(self, user_slice: Cgroup, min_uid: int = DEFAULT_MIN_UID, exempt: Collection[int | str] = (),
                 keep_open: bool = True, descriptors: int | None = None, *, max_uid: int = DEFAULT_MAX_UID):
        self.user_slice, self.min_uid, self.exempt, self.keep_open = user_slice, min_uid, exempt, keep_open
        self.max_uid = max_uid
        self.descriptors = Descriptors(descriptors if descriptors is not None else descriptor_budget())
        self._known: dict[str, GovernedUser] = {}

    def __call__(self) -> list[GovernedUser]:
        known, current = self._known, {}
        try:
            with os.scandir(self.user_slice.path) as entries:
                for entry in entries:
                    user = known.get(entry.name)
                    if user is not None and user.slice_id != entry.inode():
                        user.cgroup.close()  # removed and made again (a logout and a login): a new slice
                        user = None
                    if user is None:
                        user = self._new(entry)
                        if user is None:
                            continue
                    current[entry.name] = user
        except FileNotFoundError:
            pass  # no user.slice: nobody has logged in yet
        for name in known.keys() - current.keys():
            known[name].cgroup.close()
        self._known = current
        return governed(current.values(), self.min_uid, self.max_uid, self.exempt)

    def _new(self, entry: os.DirEntry) -> GovernedUser | None:
        uid = slice_uid(entry.name)
        if uid is None or not entry.is_dir():
            return None
        return GovernedUser(uid, user_name(uid), Cgroup(entry.path, keep_open=self.descriptors if self.keep_open else False),
                            entry.inode())

    def close(self) -> None:
        for user in self._known.values():
            user.cgroup.close()
        self._known = {}


def _by_uid(user: GovernedUser) -> int:
    return user.uid
