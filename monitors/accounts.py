"""Login names and group memberships of many users at once: one pass over each database.

``pwd.getpwuid`` and ``os.getgrouplist`` each scan the whole database when it is local (glibc's
``files`` backend reads /etc/passwd and /etc/group line by line), so looking up n users who
appear together — every user at the daemon's start — costs O(n²): with 1,000 local accounts,
0.54 s on a 2-core machine (``getgrouplist`` 0.42 s of it), ~100× that at 10,000. When the
databases are local only (``/etc/nsswitch.conf`` names no source but ``files`` and
``systemd``, which both enumerate), :class:`Accounts` reads each once (``getpwall``,
``getgrall``: 0.85 ms for those 1,000) and answers from that snapshot for
:data:`SNAPSHOT_TTL_S`, so a login or a group change is seen within seconds, as a lookup of
its own would. With any other source (sss, ldap, winbind, nis) — where enumeration can be
partial, or a round trip per entry — every answer comes from its own lookup, as before.

A snapshot answers exactly what the lookups would: the first entry of a uid or gid wins (NSS
returns the first match, and enumerates in the same order); a user's groups are her primary
group, then each entry listing her as a member whose gid is not the primary one, in file order
and with repeats kept (as glibc's files backend gives them to ``getgrouplist``), each named by
its gid's first entry. ``initgroups:`` in nsswitch.conf, when present, must be local too
(``getgrouplist`` follows it).
"""

from __future__ import annotations

import grp
import pwd
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = ["Accounts", "AccountsSnapshot", "LOCAL_SOURCES", "SNAPSHOT_TTL_S", "local_databases"]

#: NSS sources that are local and enumerate every entry (nsswitch.conf(5); nss-systemd(8)).
LOCAL_SOURCES = frozenset({"files", "systemd"})
#: How long a snapshot answers (seconds): the users who appear in one tick share it.
SNAPSHOT_TTL_S = 5.0


def local_databases(nsswitch_text: str | None) -> bool:
    """Whether ``passwd``, ``group`` and (when listed) ``initgroups`` are served by
    :data:`LOCAL_SOURCES` only (``nsswitch_text``: /etc/nsswitch.conf; None, no file: glibc's
    default, ``files``)."""
    if nsswitch_text is None:
        return True
    sources = {"passwd": ["files"], "group": ["files"], "initgroups": ["files"]}
    for line in nsswitch_text.splitlines():
        database, sep, rest = line.split("#", 1)[0].partition(":")
        if sep and database.strip() in sources:
            sources[database.strip()] = [word for word in rest.split() if not word.startswith("[")]
    return all(names and set(names) <= LOCAL_SOURCES for names in sources.values())


@dataclass(frozen=True)
class AccountsSnapshot:
    """Both databases as read at one moment: uid → login name, login name → primary gid,
    gid → group name, login name → gids of the groups listing her as a member (in order)."""

    names: dict[int, str]
    primary_gids: dict[str, int]
    group_names: dict[int, str]
    member_gids: dict[str, list[int]]

    @classmethod
    def of(cls, passwd: Iterable[pwd.struct_passwd], groups: Iterable[grp.struct_group]) -> AccountsSnapshot:
        names, primary, group_names, member = {}, {}, {}, {}
        for entry in passwd:
            names.setdefault(entry.pw_uid, entry.pw_name)
            primary.setdefault(entry.pw_name, entry.pw_gid)
        for entry in groups:
            group_names.setdefault(entry.gr_gid, entry.gr_name)
            for login in entry.gr_mem:
                member.setdefault(login, []).append(entry.gr_gid)
        return cls(names, primary, group_names, member)

    def groups_of(self, name: str) -> list[str]:
        """What :func:`governor.config.identity.groups_of` gives: her groups, primary first;
        [] for an unknown user."""
        primary = self.primary_gids.get(name)
        if primary is None:
            return []
        gids = [primary, *(gid for gid in self.member_gids.get(name, ()) if gid != primary)]
        return [self.group_names[gid] for gid in gids if gid in self.group_names]


class Accounts:
    """Names and groups, from a snapshot when the databases are local (see the module docstring).

    ``clock``: monotonic seconds; ``load``: a snapshot of this host's databases, or None when
    they are not local only (default: :func:`load_local`). Never raises for a user that does
    not exist: ``name_of`` gives None, ``known_groups`` None.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 load: Callable[[], AccountsSnapshot | None] | None = None):
        self.clock, self.load = clock, load or load_local
        self._snapshot: AccountsSnapshot | None = None
        self._taken_s = float("-inf")

    def snapshot(self) -> AccountsSnapshot | None:
        """The snapshot to answer from now (taken again after :data:`SNAPSHOT_TTL_S`), or None."""
        now = self.clock()
        if now - self._taken_s >= SNAPSHOT_TTL_S or now < self._taken_s:
            self._snapshot, self._taken_s = self.load(), now
        return self._snapshot

    def name_of(self, uid: int) -> str | None:
        """Login name of ``uid`` (None: no entry). A uid the snapshot lacks is looked up."""
        snapshot = self.snapshot()
        if snapshot is not None and uid in snapshot.names:
            return snapshot.names[uid]
        try:
            return pwd.getpwuid(uid).pw_name
        except KeyError:
            return None

    def known_groups(self, name: str) -> list[str] | None:
        """Her groups from the snapshot (primary first), or None when the snapshot does not
        know her — the databases are not local, or she has no entry: the caller looks her up
        (:func:`governor.config.identity.groups_of`)."""
        snapshot = self.snapshot()
        if snapshot is not None and name in snapshot.primary_gids:
            return snapshot.groups_of(name)
        return None


def load_local(nsswitch_path: str = "/etc/nsswitch.conf") -> AccountsSnapshot | None:
    """This host's databases in one pass each, or None when a source is not local."""
    try:
        with open(nsswitch_path, errors="replace") as f:  # a stray byte must not stop discovery
            text = f.read()
    except FileNotFoundError:
        text = None
    except OSError:
        return None
    if not local_databases(text):
        return None
    return AccountsSnapshot.of(pwd.getpwall(), grp.getgrall())


#: The process's one instance: the monitors ask it for names, and the daemon hands
#: :meth:`Accounts.known_groups` to the policy's weights (the config layer does no I/O of this kind).
ACCOUNTS = Accounts()
