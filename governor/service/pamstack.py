"""Does a PAM service's session stack reach ``pam_systemd.so``? (for ``drfgov doctor``)

A process lands in its user's ``user-UID.slice`` only when a login session is registered
with systemd-logind for it, which ``pam_systemd.so`` does from the ``session`` stack of the
PAM service that started it. Debian and Ubuntu list pam_systemd in ``common-session`` but
not in ``common-session-noninteractive`` (its pam-config says Session-Interactive-Only), and
their cron and atd stacks include only the latter: users' jobs run in ``cron.service`` /
``atd.service``, outside their slices.

Syntax read (pam.conf(5), Linux-PAM; one file per service in a PAM directory):

- one rule a line, ``type control module-path module-arguments``; ``#`` starts a comment to
  the end of the line; a line ending in ``\\`` continues on the next;
- ``type`` is ``auth``, ``account``, ``password`` or ``session`` (case-insensitive), with a
  leading ``-`` when a module that cannot be loaded is to be skipped silently;
- ``control`` is a keyword or a ``[value=action ...]`` bracket (which may hold blanks);
  ``include`` and ``substack`` take a file name in place of ``module-path`` and bring in that
  file's lines of the same type;
- Debian's ``@include FILE`` brings in every line of FILE.

Where a file is found (pam.d(5); Linux-PAM's ``_pam_open_config_file`` in
libpam/pam_handlers.c): a name not starting with ``/`` — the service's own, or one an include
names — is looked for in each PAM directory in turn, :data:`PAM_DIRS` by default:
``/etc/pam.d`` (the admin's), then ``/usr/lib/pam.d`` (``PAM_CONFIG_DIST_D``, the
distribution's). The first that has it wins, for each name on its own: a file in
``/etc/pam.d`` shadows the one of the same name in ``/usr/lib/pam.d`` entirely, and an
include is looked up afresh, whichever directory the including file came from. "Has it" is
that the name exists (following symlinks): Linux-PAM looks on when ``fopen`` fails, which for
root, who runs cron and atd, means a missing name or a dangling symlink, not a denied read.
An absolute name is read where it points. A Linux-PAM built with ``--enable-vendordir=DIR``
also looks in ``DIR/pam.d`` last (``PAM_CONFIG_DIST2_D``; ``/usr/etc`` on openSUSE, ``/usr/share``
on RHEL 9): where that is, is known only to the build, so callers append it to the directories.

"Reaches" means a ``session`` (or ``-session``) rule names ``pam_systemd.so`` (or a path ending
in ``/pam_systemd.so``) somewhere in the stack: jumps (``[success=N]``) are not followed. Not
read: ``/etc/pam.conf``, which Linux-PAM reads only when none of its PAM directories exists
(or, built with ``--enable-read-both-confs``, for a service no directory has), and the
``other`` service that stands in for a service with no file.

A file that is missing, unreadable or not a regular file reaches nothing; at most
:data:`MAX_BYTES` of each file are read, decoded as UTF-8 with replacement; includes are
followed :data:`MAX_DEPTH` levels deep, each file once. Nothing here raises for what it reads.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_BYTES", "MAX_DEPTH", "PAM_DIRS", "Dirs", "SessionStack", "pam_dirs", "session_stack"]

MAX_BYTES = 64 * 1024
MAX_DEPTH = 10
MODULE = "pam_systemd.so"
PAM_DIRS = ("/etc/pam.d", "/usr/lib/pam.d")  # Linux-PAM's PAM_CONFIG_D, then PAM_CONFIG_DIST_D

Dirs = str | os.PathLike | Sequence[str | os.PathLike]


@dataclass(frozen=True)
class SessionStack:
    """What :func:`session_stack` found for one service.

    ``path`` is the service's file, in the first PAM directory that has it;
    ``reaches_pam_systemd`` whether a session rule in it or in a file it includes names
    pam_systemd.so; ``unread`` the files of the stack (its own or included ones) that could not
    be read (in no PAM directory, denied, not a regular file) or were beyond :data:`MAX_DEPTH`,
    in the order met."""

    service: str
    path: Path
    reaches_pam_systemd: bool
    unread: tuple[str, ...] = ()


def pam_dirs(pamd: Dirs = PAM_DIRS) -> tuple[Path, ...]:
    """The PAM directories, in lookup order: one directory alone, or a sequence of them (a
    ``str`` is one directory, never a sequence of one-letter names)."""
    if isinstance(pamd, (str, os.PathLike)):
        return (Path(pamd),)
    return tuple(Path(d) for d in pamd)


def session_stack(service: str, pamd: Dirs = PAM_DIRS) -> SessionStack | None:
    """The session stack of ``service``, read from the first of the PAM directories ``pamd``
    that has its file; ``None`` when none has it (the service is not installed)."""
    dirs = pam_dirs(pamd)
    path = _find(service, dirs)
    if path is None:
        return None
    unread: list[str] = []
    found = _reaches(path, dirs, 0, set(), unread)
    return SessionStack(service, path, found, tuple(unread))


def _find(name: str, dirs: tuple[Path, ...]) -> Path | None:
    """``name`` in the first directory that has it (the name exists, following symlinks), as
    Linux-PAM's ``_pam_open_config_file`` looks; an absolute name as it is; None if none has it."""
    if name.startswith("/"):
        return Path(name)
    return next((d / name for d in dirs if os.path.exists(d / name)), None)  # False for a NUL in the name, too


def _reaches(path: Path, dirs: tuple[Path, ...], depth: int, seen: set[Path], unread: list[str]) -> bool:
    if path in seen:  # a cycle, or a file already searched in vain
        return False
    seen.add(path)
    text = _read(path)
    if text is None:
        unread.append(str(path))
        return False
    for words in _rules(text):
        target = _included(words)
        if target is None:
            if _is_pam_systemd(words):
                return True
        elif depth + 1 > MAX_DEPTH:
            unread.append(f"{target} (more than {MAX_DEPTH} includes deep)")
        else:
            found = _find(target, dirs)
            if found is None:
                _missing(target, dirs, seen, unread)
            elif _reaches(found, dirs, depth + 1, seen, unread):
                return True
    return False


def _missing(name: str, dirs: tuple[Path, ...], seen: set[Path], unread: list[str]) -> None:
    """An included name no directory has: named (once) where the first directory would hold it."""
    first = dirs[0] / name if dirs else Path(name)
    if first in seen:
        return
    seen.add(first)
    unread.append(str(first) + (f" (nor in {', '.join(map(str, dirs[1:]))})" if len(dirs) > 1 else ""))


def _read(path: Path) -> str | None:
    """At most MAX_BYTES of a regular file, or None. O_NONBLOCK: a FIFO must not hang us."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a NUL in a name read from a file
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return os.read(fd, MAX_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _rules(text: str) -> list[list[str]]:
    """Each rule's words, lines assembled as Linux-PAM's ``_pam_assemble_line`` does: blank and
    comment lines skipped (also inside a continued rule), a ``#`` ends the rule, a trailing
    ``\\`` continues it; a bracketed control is one word."""
    rules, pending = [], ""
    for line in text.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "#" not in line and line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        words = _split(pending + line.split("#", 1)[0])
        pending = ""
        if words:
            rules.append(words)
    if pending.strip():
        rules.append(_split(pending))
    return rules


def _split(line: str) -> list[str]:
    words = line.split()
    if len(words) > 1 and words[1].startswith("[") and "]" not in words[1]:  # [a=b c=d]: rejoin
        end = next((i for i in range(2, len(words)) if "]" in words[i]), len(words) - 1)
        words = [words[0], " ".join(words[1:end + 1]), *words[end + 1:]]
    return words


def _included(words: list[str]) -> str | None:
    """The file a rule brings session lines in from: ``@include F``, ``session include F``,
    ``-session substack F``; None for any other rule."""
    if words[0] == "@include":
        return words[1] if len(words) > 1 else None
    if len(words) > 2 and _is_session(words[0]) and words[1].lower() in ("include", "substack"):
        return words[2]
    return None


def _is_pam_systemd(words: list[str]) -> bool:
    return len(words) > 2 and _is_session(words[0]) and words[2].rsplit("/", 1)[-1] == MODULE


def _is_session(type_: str) -> bool:
    return type_.lower() in ("session", "-session")
