"""Loading YAML/JSON input files, bounded, with the line of every value for errors users can act on.

Every user-facing input (``drfgov allocate`` problems, the policy file, simulation traces) is
read through :func:`read_text` and, for YAML/JSON documents, parsed by :func:`load`/:func:`loads`,
which return plain Python data plus a :class:`Located` index from a field path
(``("users", "B", "max_units")``) to its line. Validation code raises :class:`InputError` with
that path; the message then names the file, line, field and what was expected::

    problem.yaml:7: users.B.max_units: expected a number ≥ 0, got -1

**Bounds.** Input comes from people who may not mean well (the governor runs as root), so every
file is read within fixed bounds and any input gives either data or one :class:`InputError`, in
bounded time and memory — never a traceback or a hang:

* a regular file (not a FIFO, a device or a directory) of at most :data:`MAX_DOCUMENT_BYTES`;
* UTF-8 (an optional BOM is skipped); a bad byte is named by offset and line;
* YAML: nesting at most :data:`MAX_DEPTH` levels (the deepest field of any schema is 5), and
  at most :data:`MAX_NODES` values, counting every value an alias stands for (a
  "billion laughs" alias bomb fails at once: an alias adds the size of what it names, it is
  not copied); an alias inside its own anchor is refused;
* plain YAML values only: strings, numbers, booleans, null, mappings, lists. Merge keys
  (``<<``) are refused with the line, and so is every explicit tag, with its line and column:
  ``!!binary``, ``!!set``, ``!!python/…`` and custom tags, but also the core ``!!str``,
  ``!!int``, ``!!float``, ``!!bool``, ``!!null``, ``!!map``, ``!!seq`` and the bare ``!`` — a core
  tag either restates what the value already is or overrides what the admin reads
  (``!!int '7'`` is a number, ``!!null 60000`` nothing), and the field's check would then blame
  a type the file does not show; quotes make text. A plain scalar that YAML 1.1 would read as a date
  (``2001-12-14``, ``2001-13-45``) is text: no field takes a date, so the field's own check
  then says what it expected. Mapping keys are always the text as written (a user named
  ``no``, ``on`` or ``007`` stays that name);
* a duplicate key names both lines;
* numbers: the one rule is :func:`check_number`, with a lower and an upper bound per field
  (the upper bounds are what the kernel or the algorithm can take; each schema says which).
  An integer too long for Python to convert (over 4,300 digits) is read as :class:`HugeNumber`,
  which every number check refuses by its digit count.

JSON (a document whose first character is ``{`` or ``[``) is parsed by the C ``json`` parser,
and its lines are found only when an error is reported: a search for the path at fault that
skips every other value with the same C parser (a late error in a 13 MB file: ~2 s). Its nesting is
bounded by that parser's own recursion check (Python's recursion limit, 1,000 levels; deeper
is the same "nested deeper than" error) and its size by the file's: nothing that reads the
data recurses into it, and each schema bounds its own mappings and lists. YAML is parsed
event by event with libyaml (``CSafeLoader``'s parser) where present, else PyYAML's own
parser, building the data without recursion.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from governor.config.errors import InputError, _printable
from governor.config.numbers import (  # noqa: F401 - re-exported
    _INT_DIGITS, QUOTE_CHARS, HugeNumber, check_number, describe, describe_number,
)

__all__ = [
    "BYTES_MAX", "HugeNumber", "InputError", "Located", "MAX_DEPTH", "MAX_DOCUMENT_BYTES", "MAX_NODES", "WEIGHT_MAX",
    "WEIGHT_MIN", "check_keys", "check_number", "check_trusted_directory", "check_trusted_file", "check_weight", "describe",
    "describe_number",
    "directory_to_judge", "load", "loads",
    "mapping", "number", "read_text", "weight",
]

Path_ = tuple[Any, ...]

#: The largest input file read (bytes). A 10,000-user problem file is about 1.4 MB of JSON.
MAX_DOCUMENT_BYTES = 16 * 2**20
#: Deepest nesting of mappings and lists. The deepest field of any schema is 5 levels down
#: (``capacity.disks.sda.read_bytes_per_s``); Python's own recursion limit is 1,000.
MAX_DEPTH = 64
#: Most values (scalars, mappings, lists) in one document, counting every value an alias
#: stands for. A 10,000-user, 4-resource problem file has about 170,000.
MAX_NODES = 2_000_000
#: Bytes and byte rates: below 2^63. The kernel keeps memory in int64 page counters and
#: parses ``io.max`` as u64; systemd's ``MemoryMax``/``IOReadBandwidthMax`` are uint64 with
#: 2^64-1 meaning infinity — 2^63 leaves room to add a margin to any real use without overflow.
BYTES_MAX = 2**63 - 1
#: Weights: 10^-6 … 10^6. Weighted shares divide by the weight; twelve orders of magnitude
#: between the smallest and the largest keep every share a normal float with digits to spare
#: (and cpu.weight, 100 × weight, is clamped to the kernel's 1…10000 anyway).
WEIGHT_MIN, WEIGHT_MAX = 1e-6, 1e6


class _JsonLines(Mapping):
    """Field path → line of a JSON document, found only when asked (an error is reported): a
    search for one path that skips every other value at the C parser's speed, remembering the
    lines of the path's prefixes on the way."""

    def __init__(self, text: str):
        self._text = text
        self._lines: dict[Path_, int | None] = {}

    def _find(self, path: Path_) -> int | None:
        if path not in self._lines:
            found = _json_find(self._text, path)
            self._lines.update(found)
            self._lines.setdefault(path, None)
        return self._lines[path]

    def __getitem__(self, path):
        line = self._find(path)
        if line is None:
            raise KeyError(path)
        return line

    def __contains__(self, path) -> bool:
        return isinstance(path, tuple) and self._find(path) is not None

    def __iter__(self):
        return (p for p, line in self._lines.items() if line is not None)

    def __len__(self):
        return sum(line is not None for line in self._lines.values())


@dataclass(frozen=True)
class Located:
    """Loaded data plus the line number of each field path (1-based)."""

    file: str
    data: Any
    lines: Mapping[Path_, int] = field(default_factory=dict)

    def line(self, path: Path_) -> int | None:
        """Line of ``path``, or of its nearest enclosing field that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)

    def error(self, path: Path_, message: str) -> InputError:
        """An :class:`InputError` for the field at ``path``."""
        return InputError(self.file, self.line(path), ".".join(str(p) for p in path), message)


# -- reading a file, within bounds -----------------------------------------------------------------------

def read_text(path: str | Path, *, limit: int = MAX_DOCUMENT_BYTES, what: str = "input files") -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes.

    Opens without blocking (a FIFO does not hang the open) and refuses anything but a regular
    file before reading a byte.

    Raises:
        InputError: no such file, not a regular file, too large, unreadable, not UTF-8.
    """
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise InputError(name, None, "", "no such file") from None
    except OSError as exc:
        raise InputError(name, None, "", f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(name, None, "", f"not a regular file ({_file_kind(st.st_mode)})")
        if st.st_size > limit:
            raise InputError(name, None, "", f"{_size(st.st_size)}: {what} are limited to {_size(limit)}")
        chunks, total = [], 0
        while total <= limit:
            try:
                chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            except OSError as exc:
                raise InputError(name, None, "", f"cannot read: {exc.strerror or exc}") from None
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise InputError(name, None, "", f"grew beyond {_size(limit)} while read: {what} are limited to {_size(limit)}")
    finally:
        os.close(fd)
    return decode(b"".join(chunks), name)


def decode(data: bytes, name: str) -> str:
    """``data`` as UTF-8 (a leading BOM skipped); a bad byte is an :class:`InputError` naming its
    offset and line."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError(name, 1, "", "UTF-16 (it starts with a UTF-16 byte-order mark); expected UTF-8: "
                                      "convert it with iconv -f UTF-16 -t UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(name, line, "", f"not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                                         f"(column {column}); expected UTF-8 text") from None
    return text[1:] if text.startswith("\ufeff") else text


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a regular file")):
        if test(mode):
            return kind
    return "not a file"


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


# -- who may write the file ------------------------------------------------------------------------------

def check_trusted_file(path: str | Path, trusted_uids: Iterable[int]) -> None:
    """Refuse a file that someone other than ``trusted_uids`` could change (as sshd's
    StrictModes): the file, the target of every symlink on the way, and every directory above
    each of them must be owned by a trusted uid and not group- or world-writable (a directory
    with the sticky bit, such as /tmp, may be: others cannot replace entries they do not own).

    Raises:
        InputError: naming the path at fault and the fix.
    """
    _check_trusted(path, trusted_uids, "file", stat.S_ISREG, "can change the policy of a root daemon",
                   "fix: chown root:root {0}; chmod 644 {0}", "fix: chown root:root {0}; chmod 644 {0}", "the file")


def check_trusted_directory(path: str | Path, trusted_uids: Iterable[int]) -> None:
    """Refuse a directory the daemon keeps its files in (state.json, the history) that someone
    other than ``trusted_uids`` could change: it must be owned by a trusted uid and writable by
    no one else (not even with the sticky bit: others could plant the names the daemon opens),
    and the symlinks and directories on the way as :func:`check_trusted_file` has them (the
    hostile-input audit of 2026-11-26: in a directory of hers, root chmod-ed through her
    symlinks and SQLite created files where she pointed).

    Raises:
        InputError: naming the path at fault and the fix.
    """
    _check_trusted(path, trusted_uids, "directory", stat.S_ISDIR, "can plant or replace the daemon's files there",
                   "fix: chown root:root {0}", "fix: chmod go-w {0}", "its files")


#: The fix for a shared sticky directory (mode 1777, as /tmp): it is world-writable by design,
#: and a chmod would break it for every user — the setting must point elsewhere.
STICKY_FIX = ("fix: point the setting at a directory only root may write, such as /run/drfgov or /var/lib/drfgov "
              "(a shared sticky directory such as /tmp must stay world-writable: do not chmod it)")


def directory_to_judge(path: str | Path, trusted_uids: Iterable[int]) -> Path:
    """The directory whose trust stands for ``path``, a directory the daemon makes when it is not
    there yet, for a check that makes nothing (check-config, a reload): ``path`` itself when
    there; else its nearest existing parent — or, when that is a sticky directory of a trusted
    uid's (``/tmp``), the one above it: a sticky directory on the way is allowed, and the
    daemon checks what it makes there once made, so that a directory another user made there
    first is refused then (the review of the directory checks: a state directory not made yet
    under /tmp was refused, and the same policy accepted once it was made)."""
    wanted = Path(os.path.abspath(path))
    found = wanted
    while not os.path.lexists(found) and found.parent != found:
        found = found.parent
    if found == wanted:
        return found
    try:
        st = os.stat(found)
    except OSError:
        return found
    if st.st_mode & stat.S_ISVTX and st.st_uid in frozenset(trusted_uids) and found.parent != found:
        return found.parent
    return found


def _check_trusted(path: str | Path, trusted_uids: Iterable[int], kind: str, is_kind, harm: str, owner_fix: str,
                   mode_fix: str, what: str) -> None:
    """The one rule of :func:`check_trusted_file` and :func:`check_trusted_directory`: ``path``
    is a ``kind`` (``is_kind`` of its mode), owned by a trusted uid and writable by no one else
    (``harm``: what they could do otherwise; the fixes name the real path as ``{0}``), and the
    way to it is too (:func:`_check_the_way`; ``what`` is at stake there). The error names the
    path once, first (``PATH: world-writable (mode 0777): …``; through a symlink ``PATH (→ REAL): …``),
    as each caller prints it after its field."""
    name = str(path)
    trusted = frozenset(trusted_uids)
    absolute = os.path.abspath(path)
    try:
        real = os.path.realpath(absolute, strict=True)
        st = os.stat(real)
    except FileNotFoundError:
        raise InputError(name, None, "", f"no such {kind}") from None
    except OSError as exc:
        raise InputError(name, None, "", f"cannot check: {exc.strerror or exc}") from None
    if not is_kind(st.st_mode):
        raise InputError(name, None, "", f"not a {'regular file' if kind == 'file' else kind} "
                                         f"({_file_kind(st.st_mode)})")
    shown = name if real == absolute else f"{name} (→ {real})"
    if st.st_uid not in trusted:
        raise InputError(shown, None, "", f"owned by {_owner(st.st_uid)}, not root: "
                                          f"{'anyone who owns it' if kind == 'file' else 'its owner'} {harm}; "
                                          f"{owner_fix.format(real)}")
    if st.st_mode & 0o022:
        who = "world" if st.st_mode & 0o002 else "group"
        fix = STICKY_FIX if kind == "directory" and st.st_mode & stat.S_ISVTX and st.st_mode & 0o002 \
            else mode_fix.format(real)
        raise InputError(shown, None, "", f"{who}-writable (mode {stat.S_IMODE(st.st_mode):04o}): others "
                                          f"{harm}; {fix}")
    _check_the_way(name, absolute, real, trusted, what)


def _check_the_way(name: str, absolute: str, real: str, trusted: frozenset[int], what: str) -> None:
    """The symlinks met resolving ``absolute`` and the directories above it and ``real``: owned
    by a trusted uid, and not group- or world-writable but with the sticky bit."""
    try:
        links = [(link, os.lstat(link)) for link in _symlinks_on(absolute)]
    except OSError as exc:
        raise InputError(name, None, "", f"cannot check: {exc.strerror or exc}") from None
    for link, lst in links:
        if lst.st_uid not in trusted:
            raise InputError(name, None, "", f"the symlink {link} is owned by {_owner(lst.st_uid)}, not root: "
                                             f"its owner can point it elsewhere; fix: chown -h root:root {link}")
    for directory in _directories_above(absolute, real):
        try:
            dst = os.stat(directory)
        except OSError as exc:
            raise InputError(name, None, "", f"cannot check {directory}: {exc.strerror or exc}") from None
        if dst.st_uid not in trusted:
            raise InputError(name, None, "", f"the directory {directory} above it is owned by {_owner(dst.st_uid)}, "
                                             f"not root: its owner can replace {what}; fix: chown root:root {directory}")
        if dst.st_mode & 0o022 and not dst.st_mode & stat.S_ISVTX:
            who = "world" if dst.st_mode & 0o002 else "group"
            raise InputError(name, None, "", f"the directory {directory} above it is {who}-writable (mode "
                                             f"{stat.S_IMODE(dst.st_mode):04o}): others can replace {what}; "
                                             f"fix: chmod go-w {directory}")


def _symlinks_on(absolute: str) -> Iterator[str]:
    """Every symlink met while resolving ``absolute`` (components and their targets)."""
    seen: set[str] = set()
    pending = [absolute]
    while pending and len(seen) < 40:  # the kernel's own limit on symlinks in a lookup
        path = pending.pop()
        parts = Path(path).parts
        for i in range(1, len(parts) + 1):
            prefix = os.path.join(*parts[:i])
            if prefix in seen or not os.path.islink(prefix):
                continue
            seen.add(prefix)
            yield prefix
            target = os.path.join(os.path.dirname(prefix), os.readlink(prefix))
            pending.append(os.path.normpath(target))


def _directories_above(*paths: str) -> list[str]:
    out: dict[str, None] = {}
    for path in paths:
        parent = os.path.dirname(path)
        while True:
            out[os.path.realpath(parent)] = None
            if parent == os.path.dirname(parent):
                break
            parent = os.path.dirname(parent)
    return list(out)


def _owner(uid: int) -> str:
    import pwd

    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


# -- parsing ---------------------------------------------------------------------------------------------

def load(path: str | Path) -> Located:
    """Read (:func:`read_text`) and parse (:func:`loads`) ``path``.

    Raises:
        InputError: the file cannot be read, is not valid YAML/JSON, or exceeds a bound.
    """
    return loads(read_text(path), str(path))


def loads(text: str, name: str = "<string>") -> Located:
    """Parse ``text`` as YAML or JSON (a document starting with ``{`` or ``[`` is tried as JSON
    first, and read as YAML if it is not JSON); see the module's bounds."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise InputError(name, None, "", f"{len(text)} characters: documents are limited to {_size(MAX_DOCUMENT_BYTES)}")
    head = text.lstrip(" \t\r\n")[:1]
    if head in ("{", "["):
        located = _json(text, name, strict=name.lower().endswith(".json"))
        if located is not None:
            return located
    return _yaml(text, name)


class _Duplicate(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Duplicate()
    return out


def _json(text: str, name: str, strict: bool) -> Located | None:
    """The JSON document ``text``, or None if it is not JSON and may be YAML (unless ``strict``)."""
    try:
        data = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        if not strict:
            return None
        raise InputError(name, exc.lineno, "", f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except (_Duplicate, RecursionError):
        raise _json_problem(text, name) or InputError(name, None, "", "duplicate key or nesting too deep") from None
    except ValueError:  # an integer beyond Python's conversion limit
        data = json.loads(text, object_pairs_hook=_pairs, parse_int=_parse_int)
    if _SURROGATE_ESCAPE.search(text) is not None:  # "\ud800" is JSON, not Unicode: find it before it is printed
        problem = _json_problem(text, name)
        if problem is not None:
            raise problem
    return Located(name, data, _JsonLines(text))


def _parse_int(digits: str) -> int | HugeNumber:
    if len(digits) > _INT_DIGITS:
        return HugeNumber(len(digits.lstrip("-")), digits.startswith("-"))
    return int(digits)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?[0-9][0-9.eE+\-]*")
_scan_fast = json.JSONDecoder().scan_once
_scan_huge = json.JSONDecoder(parse_int=_parse_int).scan_once
_scanstring = json.decoder.scanstring


def _skip(text: str, pos: int) -> int:
    """The end of the JSON value at ``pos`` (C speed)."""
    try:
        return _scan_fast(text, pos)[1]
    except ValueError:
        return _scan_huge(text, pos)[1]
    except StopIteration:
        raise ValueError(f"no JSON value at offset {pos}") from None


def _line_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _json_find(text: str, path: Path_) -> dict[Path_, int]:
    """The lines of ``path`` and of its prefixes in the JSON ``text``, as far as they exist."""
    found: dict[Path_, int] = {}
    try:
        pos = _WS.match(text, 0).end()
        found[()] = _line_at(text, pos)
        for depth, component in enumerate(path):
            here = path[:depth + 1]
            if text[pos] == "{" and isinstance(component, str):
                pos = _WS.match(text, pos + 1).end()
                while text[pos] == '"':
                    key_pos = pos
                    key, pos = _scanstring(text, pos + 1)
                    pos = _WS.match(text, _WS.match(text, pos).end() + 1).end()  # past ':'
                    if key == component:
                        found[here] = _line_at(text, key_pos)
                        break
                    pos = _WS.match(text, _skip(text, pos)).end()
                    if text[pos] != ",":
                        return found
                    pos = _WS.match(text, pos + 1).end()
                else:
                    return found
            elif text[pos] == "[" and isinstance(component, int) and component >= 0:
                pos = _WS.match(text, pos + 1).end()
                for _ in range(component):
                    pos = _WS.match(text, _skip(text, pos)).end()
                    if text[pos] != ",":
                        return found
                    pos = _WS.match(text, pos + 1).end()
                if text[pos] == "]":
                    return found
                found[here] = _line_at(text, pos)
            else:
                return found
    except (IndexError, ValueError, RecursionError):
        pass
    return found


def _json_problem(text: str, name: str) -> InputError | None:
    """The first duplicate key, nesting deeper than :data:`MAX_DEPTH` or unpaired surrogate in
    the JSON ``text``, with its line (iterative; scalars skipped at C speed)."""

    def fail(pos: int, path: Path_, message: str) -> InputError:
        return InputError(name, _line_at(text, pos), ".".join(map(str, path)), message)

    # frames: [path, is_object, next index, {key: position}]
    stack: list[list] = []
    try:
        pos, path = _WS.match(text, 0).end(), ()
        while True:
            # a value starts at pos, at path
            c = text[pos]
            if c in "{[":
                if len(stack) >= MAX_DEPTH:
                    return fail(pos, path, f"nested deeper than {MAX_DEPTH} levels")
                frame = [path, c == "{", 0, {}]
                stack.append(frame)
                pos = _WS.match(text, pos + 1).end()
                if text[pos] in "}]":
                    stack.pop()
                    pos += 1
                elif frame[1]:
                    path, pos = _json_key(text, pos, frame, fail)
                    continue
                else:
                    path = frame[0] + (0,)
                    frame[2] = 1
                    continue
            elif c == '"':
                value, pos = _scanstring(text, pos + 1)
                if not _valid_text(value):
                    return fail(pos, path, "text with an unpaired surrogate (not valid Unicode)")
            else:
                match = _NUMBER.match(text, pos)
                pos = match.end() if match else _skip(text, pos)
            # after a value: the next member or element, or the end of containers
            while True:
                pos = _WS.match(text, pos).end()
                if not stack:
                    return None
                frame = stack[-1]
                if text[pos] == ",":
                    pos = _WS.match(text, pos + 1).end()
                    if frame[1]:
                        path, pos = _json_key(text, pos, frame, fail)
                    else:
                        path = frame[0] + (frame[2],)
                        frame[2] += 1
                    break
                stack.pop()
                pos += 1
    except _Found as found:
        return found.error
    except (IndexError, ValueError):
        return None


class _Found(Exception):
    def __init__(self, error: InputError):
        self.error = error


def _json_key(text: str, pos: int, frame: list, fail) -> tuple[Path_, int]:
    key_pos = pos
    key, pos = _scanstring(text, pos + 1)
    path = frame[0] + (key,)
    if not _valid_text(key):
        raise _Found(fail(key_pos, path, "text with an unpaired surrogate (not valid Unicode)"))
    if key in frame[3]:
        raise _Found(fail(key_pos, path, f"duplicate key (first on line {_line_at(text, frame[3][key])})"))
    frame[3][key] = key_pos
    pos = _WS.match(text, _WS.match(text, pos).end() + 1).end()  # past ':'
    return path, pos


def _valid_text(s: str) -> bool:
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- YAML, event by event --------------------------------------------------------------------------------

_Parser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # only its parser is used: events, no constructor
_TAG = "tag:yaml.org,2002:"


class _Scalars:
    """YAML 1.1 scalars as PyYAML's SafeLoader reads them, but dates stay text and a value
    that does not convert (``0x_``, ``._``, 5,000 digits) is an error or a HugeNumber."""

    def __init__(self):
        self.resolver = yaml.resolver.Resolver()
        self.constructor = yaml.constructor.SafeConstructor()
        self.cache: dict[str, Any] = {}

    def plain(self, value: str) -> Any:
        try:
            return self.cache[value]
        except KeyError:
            pass
        out = self.typed(self.resolver.resolve(yaml.ScalarNode, value, (True, False)), value)
        if len(value) <= 64:
            self.cache[value] = out
        return out

    def typed(self, tag: str, value: str) -> Any:
        """Raises ValueError when ``value`` is not a ``tag``."""
        if tag == _TAG + "int":
            digits = value.replace("_", "").lstrip("+-")
            if len(digits) > _INT_DIGITS:
                if not digits.isdigit():
                    raise ValueError(f"not a valid !!int: {describe(value)}")
                return HugeNumber(len(digits), value.startswith("-"))
            return self._construct(self.constructor.construct_yaml_int, tag, value)
        if tag == _TAG + "float":
            return self._construct(self.constructor.construct_yaml_float, tag, value)
        if tag == _TAG + "bool":
            return self._construct(self.constructor.construct_yaml_bool, tag, value)
        if tag == _TAG + "null":
            return None
        return value  # str, and what YAML 1.1 resolves as timestamp, merge or value in a value's place: text

    @staticmethod
    def _construct(method, tag: str, value: str) -> Any:
        try:
            return method(yaml.ScalarNode(tag, value))
        except (ValueError, TypeError, KeyError, IndexError, yaml.YAMLError):
            raise ValueError(f"not a valid !!{tag[len(_TAG):]}: {describe(value)}") from None


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


#: YAML's line breaks (libyaml's and PyYAML's readers: the marks' lines count these).
_YAML_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
#: An anchor (its name is [0-9A-Za-z_-] to libyaml and PyYAML), then what may separate it from a tag:
#: blanks, comments, line breaks.
_ANCHOR_THEN_SPACE = re.compile("&[0-9A-Za-z_-]+(?:[ \t]|#[^\r\n\x85\u2028\u2029]*|\r\n|[\r\n\x85\u2028\u2029])*")


def _tag_mark(text: str, event: yaml.NodeEvent) -> tuple[int, int]:
    """The 0-based line and column of ``event``'s tag. The parser marks the node's start, which is
    its anchor when the anchor comes first (``&a !!str x``): then the tag is found after the anchor
    in ``text``, by the same line breaks and character columns as the parser's. Only on an error."""
    mark = event.start_mark
    if event.anchor is None:
        return mark.line, mark.column
    start = 1 if text.startswith("\ufeff") else 0  # the parsers skip a BOM: it is not a column
    if mark.line:
        found = next(itertools.islice(_YAML_BREAK.finditer(text), mark.line - 1, None), None)
        if found is None:  # fewer lines than the mark's: not this text
            return mark.line, mark.column
        start = found.end()
    position = start + mark.column
    skipped = _ANCHOR_THEN_SPACE.match(text, position)
    if skipped is None or not text.startswith("!", skipped.end()):  # the tag first (``!!str &a x``)
        return mark.line, mark.column
    breaks = list(_YAML_BREAK.finditer(text, position, skipped.end()))
    if not breaks:
        return mark.line, mark.column + skipped.end() - position
    return mark.line + len(breaks), skipped.end() - breaks[-1].end()


def _tagged(event: yaml.NodeEvent, text: str) -> tuple[int, str] | None:
    """The 1-based line of ``event``'s explicit tag and what is wrong with it, if it has one (the one
    rule: no explicit tag, core or not; see the module's docstring), else None."""
    if event.tag is None:
        return None
    line, column = _tag_mark(text, event)
    return line + 1, (f"tag {_short_tag(event.tag)} at column {column + 1} is not supported: plain YAML "
                      "only, no tags (quote a value to make it text)")


def _yaml(text: str, name: str) -> Located:
    """Build the data from parser events: no recursion, every bound checked as it goes."""
    scalars = _Scalars()
    lines: dict[Path_, int] = {}
    anchors: dict[str, tuple[Any, int]] = {}  # finished anchors: value, values it stands for
    open_anchors: set[str] = set()
    # frames: [container, path, is_mapping, pending key or _NO_KEY, keys' lines, anchor, nodes at start]
    stack: list[list] = []
    nodes, documents, root = 0, 0, None
    parser = _Parser(text)

    def fail(line: int, path: Path_, message: str) -> InputError:
        return InputError(name, line, ".".join(map(str, path)), message)

    try:
        while True:
            try:
                event = parser.get_event()
            except yaml.MarkedYAMLError as exc:
                mark = exc.problem_mark or exc.context_mark
                problem = exc.problem or exc.context or "not valid YAML"
                raise InputError(name, mark.line + 1 if mark else None, "", f"not valid YAML/JSON: {problem}") from None
            except yaml.reader.ReaderError as exc:
                raise _unacceptable(text, name, exc) from None
            except yaml.YAMLError as exc:
                raise InputError(name, None, "", f"not valid YAML/JSON: {_printable(str(exc), 200)}") from None
            kind = type(event)
            if kind is yaml.StreamEndEvent:
                break
            if kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise fail(event.start_mark.line + 1, (), "expected a single document, found another")
                continue
            if kind in (yaml.StreamStartEvent, yaml.DocumentEndEvent):
                continue
            line = event.start_mark.line + 1
            frame = stack[-1] if stack else None
            if kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                stack.pop()
                value, path, anchor = frame[0], frame[1], frame[5]
                if anchor is not None:
                    anchors[anchor] = (value, nodes - frame[6])
                    open_anchors.discard(anchor)
                _place(stack, value, path, lines)
                if not stack:
                    root = value
                continue
            # a key?
            if frame is not None and frame[2] and frame[3] is _NO_KEY:
                if kind is not yaml.ScalarEvent:
                    raise fail(line, frame[1], "expected a plain key (text), not "
                               + ("an alias" if kind is yaml.AliasEvent else "a mapping or list"))
                if (tagged := _tagged(event, text)) is not None:
                    raise fail(tagged[0], frame[1], f"a key: {tagged[1]}")
                key = event.value
                if key == "<<" and event.tag is None and event.implicit[0]:
                    raise fail(line, frame[1], "merge keys (<<) are not supported: write the keys out")
                if not _valid_text(key):
                    raise fail(line, frame[1], "text with an unpaired surrogate (not valid Unicode)")
                if key in frame[0]:
                    raise fail(line, frame[1] + (key,), f"duplicate key (first on line {frame[4][key]})")
                frame[3] = key
                frame[4][key] = line
                continue
            path = _child_path(frame)
            nodes += 1
            if nodes > MAX_NODES:
                raise fail(line, path, f"more than {MAX_NODES:,} values: documents are limited to that many")
            if kind is not yaml.AliasEvent and (tagged := _tagged(event, text)) is not None:
                raise fail(tagged[0], path, tagged[1])
            if kind is yaml.ScalarEvent:
                if event.implicit[0]:
                    try:
                        value = scalars.plain(event.value)
                    except ValueError as exc:
                        raise fail(line, path, str(exc)) from None
                else:  # quoted (or a block scalar): text
                    value = event.value
                if isinstance(value, str) and not _valid_text(value):
                    raise fail(line, path, "text with an unpaired surrogate (not valid Unicode)")
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1)
            elif kind is yaml.AliasEvent:
                anchor = event.anchor
                if anchor in open_anchors:
                    raise fail(line, path, f"alias *{anchor} inside its own anchor &{anchor}: a recursive structure")
                if anchor not in anchors:
                    raise fail(line, path, f"alias *{anchor} names no anchor before it")
                value, size = anchors[anchor]
                nodes += size - 1
                if nodes > MAX_NODES:
                    raise fail(line, path, f"aliases expand to more than {MAX_NODES:,} values (an alias bomb?): "
                                           "documents are limited to that many")
            else:  # a mapping or a list starts
                if len(stack) >= MAX_DEPTH:
                    raise fail(line, path, f"nested deeper than {MAX_DEPTH} levels")
                mapping_ = kind is yaml.MappingStartEvent
                if event.anchor is not None:
                    open_anchors.add(event.anchor)
                stack.append([{} if mapping_ else [], path, mapping_, _NO_KEY, {}, event.anchor, nodes - 1])
                lines[path] = line
                continue
            lines[path] = line
            _place(stack, value, path, lines)
            if not stack:
                root = value
    finally:
        parser.dispose()
    return Located(name, root, lines)


_NO_KEY = object()
#: What YAML 1.1 does not allow in a stream (its c-printable set, as libyaml and PyYAML's reader check it).
_NOT_YAML = re.compile(r"[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010FFFF]")


def _unacceptable(text: str, name: str, exc: yaml.reader.ReaderError) -> InputError:
    """The error for a character YAML does not allow: the first such character in ``text``, with
    its line and column (1-based, in characters) and its code point (``exc``, the parser's
    ReaderError, names an offset in bytes with libyaml and in characters without it, and no line)."""
    found = _NOT_YAML.search(text)
    if found is None:  # not seen by this pattern: what the parser said, on one line
        return InputError(name, None, "", f"not valid YAML/JSON: {_printable(str(exc.reason), 200)}")
    c, pos = found.group(), found.start()
    line, column = text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1
    kind = "control character" if unicodedata.category(c) == "Cc" else "character"
    return InputError(name, line, "", f"not valid YAML/JSON: {kind} U+{ord(c):04X} at column {column} (YAML allows "
                                      "tab, newline and printable characters only)")


def _child_path(frame: list | None) -> Path_:
    if frame is None:
        return ()
    if frame[2]:
        return frame[1] + (frame[3],)
    return frame[1] + (len(frame[0]),)


def _place(stack: list[list], value: Any, path: Path_, lines: dict) -> None:
    """Put ``value`` into the enclosing container (a mapping's key keeps the key's line)."""
    if not stack:
        return
    frame = stack[-1]
    if frame[2]:
        key = frame[3]
        frame[0][key] = value
        lines[path] = frame[4][key]
        frame[3] = _NO_KEY
    else:
        frame[0].append(value)


# -- typed field readers, shared by every schema ------------------------------------------------

def mapping(src: Located, path: Path_, value: Any, what: str = "a mapping") -> dict[Any, Any]:
    """``value`` if it is a mapping (None counts as empty), else an :class:`InputError`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise src.error(path, f"expected {what}, got {describe(value)}")
    return value


def number(src: Located, path: Path_, value: Any, *, minimum: float = 0.0, strict: bool = False,
           whole: bool = False, maximum: float = math.inf, below: bool = False) -> float:
    """:func:`check_number` of the field at ``path``; raises :class:`InputError` naming it."""
    try:
        return check_number(value, minimum=minimum, strict=strict, whole=whole, maximum=maximum, below=below)
    except ValueError as exc:
        raise src.error(path, str(exc)) from None


def check_weight(value: Any) -> float:
    """A weight: a number > 0, at least :data:`WEIGHT_MIN` and at most :data:`WEIGHT_MAX`.

    Raises:
        ValueError: "expected …, got …".
    """
    x = check_number(value, strict=True, maximum=WEIGHT_MAX)
    if x < WEIGHT_MIN:
        raise ValueError(f"expected a weight ≥ {WEIGHT_MIN:g} (weights span 10^-6 … 10^6), got {describe_number(value)}")
    return x


def weight(src: Located, path: Path_, value: Any) -> float:
    """:func:`check_weight` of the field at ``path``; raises :class:`InputError` naming it."""
    try:
        return check_weight(value)
    except ValueError as exc:
        raise src.error(path, str(exc)) from None


def check_keys(src: Located, path: Path_, value: dict[Any, Any], allowed: tuple[str, ...]) -> None:
    """Reject keys not in ``allowed``, naming the known ones."""
    for key in value:
        if key not in allowed:
            raise src.error(path + (key,), f"unknown key; expected one of: {', '.join(allowed)}")
