"""Does a PAM service's session stack reach ``pam_systemd.so``? (for ``drfgov doctor``)

A process lands in its user's ``user-UID.slice`` only when a login session is registered
with systemd-logind for it, which ``pam_systemd.so`` does from the ``session`` stack of the
PAM service that started it. Debian and Ubuntu list pam_systemd in ``common-session`` but
not in ``common-session-noninteractive`` (its pam-config says Session-Interactive-Only), and
their cron and atd stacks include only the latter: users' jobs run in ``cron.service`` /
``atd.service``, outside their slices.

Syntax read (pam.conf(5), Linux-PAM; one file per service in ``/etc/pam.d``):

- one rule a line, ``type control module-path module-arguments``; ``#`` starts a comment to
  the end of the line; a line ending in ``\\`` continues on the next;
- ``type`` is ``auth``, ``account``, ``password`` or ``session`` (case-insensitive), with a
  leading ``-`` when a module that cannot be loaded is to be skipped silently;
- ``control`` is a keyword or a ``[value=action ...]`` bracket (which may hold blanks);
  ``include`` and ``substack`` take a file name in place of ``module-path`` and bring in that
  file's lines of the same type;
- Debian's ``@include FILE`` brings in every line of FILE.

A file name without ``/`` is looked up in the PAM directory. "Reaches" means a ``session``
(or ``-session``) rule names ``pam_systemd.so`` (or a path ending in ``/pam_systemd.so``)
somewhere in the stack: jumps (``[success=N]``) are not followed. Not read: where Linux-PAM
looks for a file missing from ``/etc/pam.d`` (``/usr/lib/pam.d``, a vendor directory), and
``/etc/pam.conf`` (read only when ``/etc/pam.d`` does not exist).

A file that is missing, unreadable or not a regular file reaches nothing; at most
:data:`MAX_BYTES` of each file are read, decoded as UTF-8 with replacement; includes are
followed :data:`MAX_DEPTH` levels deep, each file once. Nothing here raises for what it reads.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_BYTES", "MAX_DEPTH", "SessionStack", "session_stack"]

MAX_BYTES = 64 * 1024
MAX_DEPTH = 10
MODULE = "pam_systemd.so"


@dataclass(frozen=True)
class SessionStack:
    """What :func:`session_stack` found for one service.

    ``path`` is the service's file; ``reaches_pam_systemd`` whether a session rule in it or in
    a file it includes names pam_systemd.so; ``unread`` the files of the stack (its own or
    included ones) that could not be read (missing, denied, not a regular file) or were beyond
    :data:`MAX_DEPTH`, in the order met."""

    service: str
    path: Path
    reaches_pam_systemd: bool
    unread: tuple[str, ...] = ()


def session_stack(service: str, pamd: str | os.PathLike = "/etc/pam.d") -> SessionStack | None:
    """The session stack of ``pamd/service``; ``None`` when that file does not exist (the
    service is not installed)."""
    path = Path(pamd, service)
    if not os.path.lexists(path):
        return None
    unread: list[str] = []
    found = _reaches(path, Path(pamd), 0, set(), unread)
    return SessionStack(service, path, found, tuple(unread))


def _reaches(path: Path, pamd: Path, depth: int, seen: set[Path], unread: list[str]) -> bool:
    if path in seen:  # a cycle, or a file already searched in vain
        return False
    seen.add(path)
    text = _read(path)
    if text is None:
        unread.append(str(path))
        return False
    for words in _rules(text):
        target = _included(words)
        if target is not None:
            if depth + 1 > MAX_DEPTH:
                unread.append(f"{target} (more than {MAX_DEPTH} includes deep)")
            elif _reaches(pamd / target, pamd, depth + 1, seen, unread):  # an absolute target replaces pamd
                return True
        elif _is_pam_systemd(words):
            return True
    return False


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
