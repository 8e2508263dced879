"""User and group names in the policy: what a name may be (:func:`name_problem`), and the one
place the config layer asks this host's user and group databases about names and ids
(:data:`USERS`, :data:`GROUPS`).

**A name** (``weights.users``, ``weights.groups``, ``governed.exempt_users``,
``governed.exempt_groups``) is what shadow-utils and systemd let into ``/etc/passwd`` and
``/etc/group`` in their most liberal mode (systemd's ``valid_user_group_name`` relaxed, which
admits the names of SSSD, Samba and LDAP: ``DOMAIN\\user``, ``user@domain``, ``John Smith``):

* 1 … :data:`NAME_MAX_BYTES` bytes of UTF-8 (Linux's ``LOGIN_NAME_MAX``, 256 with the NUL);
* no control character (NUL, newline, tab, ESC, DEL, …) nor any other unprintable one
  (U+200B, U+202E, a no-break space): the C library ends a name at NUL, newline ends an entry of
  ``/etc/passwd``, and an invisible character makes two names that look the same;
* no ``:`` (it separates the fields of ``/etc/passwd`` and ``/etc/group``) and no ``/`` (names
  become paths: home directories, ``/run/user``);
* not ``.`` or ``..``, no space at either end, and not ``+`` or ``-`` first (the marks of NIS
  entries in ``/etc/passwd``).

A name of digits alone (``1000``) is a name: a user may be called that. The policy refuses it
only where it is no name on this host but a uid (gid) of it (:mod:`governor.config.policy`).

**Lookups.** :class:`Database` answers "which uid has this name", "which name has this uid" and
"every entry" from ``pwd``/``grp`` (each lookup may be a round trip to LDAP or systemd-userdb:
the policy bounds how many it makes). It never raises: a name or id it does not know is None.
"""

from __future__ import annotations

import grp
import pwd
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Database", "Entry", "GROUPS", "NAME_MAX_BYTES", "USERS", "name_problem"]

#: Longest name, in bytes of UTF-8: ``LOGIN_NAME_MAX`` (256 on Linux) less its terminating NUL.
NAME_MAX_BYTES = 255


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a user or group name (see the module's rule), or None when it can.

    The text says what is wrong and where (1-based character positions), for the caller to put
    after "expected a login name, got '…'".
    """
    if name == "":
        return "it is empty"
    size = len(name.encode("utf-8", "surrogateescape"))
    if size > NAME_MAX_BYTES:
        return f"{size:,} bytes (at most {NAME_MAX_BYTES}: LOGIN_NAME_MAX)"
    for i, c in enumerate(name, 1):
        if c == " " or c.isprintable():
            if c in ":/":
                why = "it separates the fields of /etc/passwd and /etc/group" if c == ":" \
                    else "names become paths: home directories, /run/user"
                return f"{c!r} at character {i} ({why})"
            continue
        kind = "control" if unicodedata.category(c) == "Cc" else "unprintable"
        return f"{kind} character U+{ord(c):04X} at character {i} (names have none)"
    if name in (".", ".."):
        return "'.' and '..' are directories, not names"
    if name[0] == " " or name[-1] == " ":
        return "a space at its start or end"
    if name[0] in "+-":
        return f"{name[0]!r} first (in /etc/passwd, the mark of a NIS entry)"
    return None


@dataclass(frozen=True)
class Entry:
    """One entry of the user or group database: its name and id (uid or gid), a user's
    primary gid, a group's listed members (``gr_mem``)."""

    name: str
    id: int
    gid: int | None = None
    members: tuple[str, ...] = ()


@dataclass(frozen=True)
class Database:
    """This host's user (or group) database as the policy asks it. ``what``: "user" or
    "group"; ``id_word``: "uid" or "gid". ``by_name``/``by_id`` raise KeyError for what the
    database does not know; ``every`` enumerates it (the first entry of a name wins, as NSS
    answers a lookup)."""

    what: str
    id_word: str
    by_name: Callable[[str], Entry]
    by_id: Callable[[int], Entry]
    every: Callable[[], list[Entry]]

    def find(self, name: str) -> Entry | None:
        """The entry named ``name``, or None."""
        try:
            return self.by_name(name)
        except (KeyError, ValueError, OverflowError):  # ValueError: a NUL (name_problem refuses it first)
            return None

    def named(self, number: int) -> Entry | None:
        """The entry of uid (gid) ``number``, or None (also for a number no uid_t holds)."""
        if not 0 <= number < 2**32:
            return None
        try:
            return self.by_id(number)
        except (KeyError, ValueError, OverflowError):
            return None

    def all(self) -> dict[str, Entry]:
        """Every entry by name (an enumeration: LDAP users need not be listed)."""
        out: dict[str, Entry] = {}
        for entry in self.every():
            out.setdefault(entry.name, entry)
        return out


def _user(p: pwd.struct_passwd) -> Entry:
    return Entry(p.pw_name, p.pw_uid, gid=p.pw_gid)


def _group(g: grp.struct_group) -> Entry:
    return Entry(g.gr_name, g.gr_gid, members=tuple(g.gr_mem))


#: The password database (``getpwnam``, ``getpwuid``, ``getpwall``).
USERS = Database("user", "uid", lambda name: _user(pwd.getpwnam(name)), lambda uid: _user(pwd.getpwuid(uid)),
                 lambda: [_user(p) for p in pwd.getpwall()])
#: The group database (``getgrnam``, ``getgrgid``, ``getgrall``).
GROUPS = Database("group", "gid", lambda name: _group(grp.getgrnam(name)), lambda gid: _group(grp.getgrgid(gid)),
                  lambda: [_group(g) for g in grp.getgrall()])
