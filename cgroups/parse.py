"""Pure parsers for cgroup v2 interface file formats (no I/O).

Source: Documentation/admin-guide/cgroup-v2.rst, "Interface Files" > "Format":
flat keyed (``KEY VALUE`` per line), nested keyed (``KEY SUBKEY=VALUE ...`` per line) and
single values, where ``max`` means "no limit" (returned as ``None`` here).

Every number the kernel writes in these files is unsigned, in ASCII digits (``%llu``,
``%lu``): a value is taken only in that form (:func:`uint`). Python's ``int()`` also takes
``+12``, ``-12``, ``1_2`` and other scripts' digits (``١٢``), none of which the kernel writes:
they raise :class:`ParseError`, naming file, line and what was expected. Blanks around a value
and the closing newline are the kernel's and pass. Nor does the kernel print a number past
:data:`U64_MAX`: every counter and limit of these files is a u64 (``%llu``: kernel/cgroup/rstat.c,
mm/memcontrol.c, block/blk-cgroup.c, kernel/sched/psi.c), so a larger one is garbage too.

The fast paths (here and in :mod:`cgroups.cgroup`) take a number of at most
:data:`FAST_DIGITS` digits unchecked, every one of them a u64; a longer one goes the checked
way, :func:`uint`. So each fast path takes exactly the texts its checked path takes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

from cgroups.errors import ParseError
from cgroups.limits import DEVICE, InvalidLimit

__all__ = ["FAST_DIGITS", "FAST_UINT", "U64_MAX", "device_keyed", "flat_keyed", "flat_keyed_select", "held",
           "nested_keyed", "single_int", "single_int_within", "int_or_max", "int_list", "uint"]

T = TypeVar("T")

#: The largest number in a cgroup v2 file: the kernel prints each as a u64 (``%llu``).
U64_MAX = 2**64 - 1
#: The most digits a fast path takes without comparing with :data:`U64_MAX`: each number of
#: them is below it (it has one digit more). A counter of the kernel's has more only past
#: 10^19 (µs: 317,000 years; bytes: 10 EB): a longer one is checked by :func:`uint`.
FAST_DIGITS = len(str(U64_MAX)) - 1
#: A number the fast regexes of :mod:`cgroups.cgroup` take: ASCII digits, at most :data:`FAST_DIGITS`.
FAST_UINT = rf"[0-9]{{1,{FAST_DIGITS}}}"


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for no, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield no, line


def uint(value: str, path: str = "<text>", no: int = 1, line: str | None = None) -> int:
    """``value``, ASCII digits only (no sign, no ``_``, no other script's digits), as an int in
    0 … :data:`U64_MAX` (2^64 - 1, the most a u64 holds). The one rule for a number of these
    files: every fast path takes only numbers it takes.

    Raises:
        ParseError: anything else, naming ``path``, line ``no`` and ``line`` (``value`` if None).
    """
    number = _u64(value)
    if number is not None:
        return number
    if value.isascii() and value.isdigit():  # too large
        got = repr(value) if len(value) <= 2 * FAST_DIGITS else f"{len(value)} digits"
        reason = f"expected a whole number of at most 2^64 - 1 (the kernel's u64), got {got}"
    else:
        reason = f"expected a whole number (digits 0-9), got {value!r}"
    raise ParseError(path, no, value if line is None else line, reason)


def _u64(value: str) -> int | None:
    """``value`` as :func:`uint` takes it, or None."""
    if value.isascii() and value.isdigit():  # isascii() is O(1); ASCII isdigit() is [0-9] alone
        try:
            number = int(value)
        except ValueError:  # past int()'s 4,300 digits: no u64 either
            return None
        if number <= U64_MAX:
            return number
    return None


def held(path: str, line: str, check: Callable[[], T], no: int | Callable[[], int] = 1) -> T:
    """``check()`` — a rule of :mod:`cgroups.limits` or :mod:`cgroups_v1.values` applied to a
    value read from ``path`` — with its :class:`InvalidLimit` turned into the
    :class:`ParseError` of the line read (``line``, number ``no``, or ``no()``: counted only
    then): a value the kernel would not hold is garbage, not a setting. The one translation,
    for the v2 and the v1 readers."""
    try:
        return check()
    except InvalidLimit as exc:
        raise ParseError(path, no() if callable(no) else no, line, str(exc)) from None


def single_int_within(text: str, path: str, check: Callable[[int | None], T], allow_max: bool = False) -> T:
    """A one-number file (:func:`single_int`) within a kernel rule ``check`` (applied through
    :func:`held`): what the v2 and v1 readers of a single-number limit do. Raises
    :class:`ParseError` for text that is no number, and for a number the rule refuses."""
    value = single_int(text, path, allow_max)
    return held(path, text.strip(), lambda: check(value))


def int_or_max(value: str, path: str = "<text>", no: int = 1, line: str | None = None) -> int | None:
    """``"max"`` → None, else the number (:func:`uint`)."""
    return None if value == "max" else uint(value, path, no, value if line is None else line)


def single_int(text: str, path: str = "<text>", allow_max: bool = False) -> int | None:
    """A file holding one number (or ``max`` when ``allow_max``): :func:`uint`, blanks around it
    and the newline allowed. Raises :class:`ParseError` on anything else."""
    # fast path: the kernel's "123\n". ASCII digits then blanks, at most FAST_DIGITS of them:
    # int() takes exactly that; anything else (a longer number too) is checked below
    if text.isascii() and len(digits := text.rstrip()) <= FAST_DIGITS and digits.isdigit():
        return int(digits)
    rows = list(_lines(text))
    if len(rows) != 1:
        raise ParseError(path, 1, text.strip(), f"expected one value, got {len(rows)} lines")
    no, line = rows[0]
    value = line.strip()
    return int_or_max(value, path, no, line) if allow_max else uint(value, path, no, line)


def flat_keyed(text: str, path: str = "<text>") -> dict[str, int]:
    """``KEY VALUE`` lines (cpu.stat, memory.stat, memory.events) → ``{key: int}``, values :func:`uint`."""
    try:  # fast path in C-level loops (ValueError unless two words a line); the values checked in
        # one go (joined, every character an ASCII digit; none longer than FAST_DIGITS); errors
        # are located by the slow path below
        pairs = dict(map(str.split, text.splitlines()))
        values = pairs.values()
        joined = "".join(values)
        if joined.isascii() and joined.isdigit() and max(map(len, values)) <= FAST_DIGITS:
            return dict(zip(pairs, map(int, values)))
    except ValueError:
        pass
    out = {}
    for no, line in _lines(text):
        parts = line.split()
        if len(parts) != 2:
            raise ParseError(path, no, line, "expected 'KEY VALUE'")
        out[parts[0]] = uint(parts[1], path, no, line)
    return out


def flat_keyed_select(text: str, keys: tuple[str, ...], path: str = "<text>") -> dict[str, int]:
    """Only ``keys`` of a flat keyed file (those present), found by search, not a full parse.
    Each value is :func:`uint`; the line of one that is not is counted only then (issue 16:
    a memory.stat read every tick)."""
    out = {}
    lines = "\n" + text  # every line after a newline: one search a key
    for key in keys:
        at = lines.find(f"\n{key} ")
        if at < 0:
            continue
        start = at + len(key) + 2
        end = lines.find("\n", start)
        value = lines[start:end] if end >= 0 else lines[start:]
        try:
            out[key] = uint(value.strip(), path)
        except ParseError as exc:  # located here, not on every read: the newlines before it number its line
            raise ParseError(path, lines.count("\n", 0, start), f"{key} {value}", exc.reason) from None
    return out


def nested_keyed(text: str, path: str = "<text>") -> dict[str, dict[str, str]]:
    """``KEY SUB=VAL ...`` lines (io.stat, io.max, *.pressure) → ``{key: {sub: raw value}}``."""
    out = {}
    for no, line in _lines(text):
        key, *pairs = line.split()
        fields = {}
        for pair in pairs:
            sub, sep, val = pair.partition("=")
            if not sep or not sub:
                raise ParseError(path, no, line, f"expected SUBKEY=VALUE, got {pair!r}")
            fields[sub] = val
        out[key] = fields
    return out


def device_keyed(text: str, path: str, required: frozenset[str], allow_max: bool = False,
                 bare: bool = False) -> dict[str, dict[str, int | None]]:
    """``MAJ:MIN SUB=VAL ...`` lines (io.stat, io.max) → ``{"MAJ:MIN": {sub: number}}``.

    Each line keys a device ``MAJ:MIN`` and holds every one of ``required``, whose values are
    :func:`uint`, or ``max`` (None) when ``allow_max``. Other keys are kept when their value is
    a :func:`uint` and left out otherwise: kernels add keys, and not all of them numbers of
    ours (io.stat under ``blkcg_debug_stats`` has ``depth=max`` and ``use_delay=-1``). ``bare``: a device alone on its line passes, with no keys (io.stat lists a
    device so before the cgroup's first I/O on it, seen on 6.1).

    Raises:
        ParseError: anything else, naming ``path``, the line and what was expected.
    """
    out = {}
    for no, line in _lines(text):
        dev, *pairs = line.split()
        if not DEVICE.fullmatch(dev):
            raise ParseError(path, no, line, f"expected a device MAJ:MIN first, got {dev!r}")
        try:  # the common case in C-level loops: KEY=DIGITS pairs, each key once
            fields = dict(pair.split("=") for pair in pairs)
            values = fields.values()
            joined = "".join(values)
            if not (joined.isascii() and joined.isdigit() and len(fields) == len(pairs) and "" not in fields
                    and "" not in values and max(map(len, values)) <= FAST_DIGITS):
                raise ValueError
            fields = dict(zip(fields, map(int, values)))
        except ValueError:  # anything else, checked pair by pair (max where allowed, or the error)
            fields = _device_fields(pairs, path, no, line, allow_max, required)
        if not (fields.keys() >= required or bare and not fields):
            raise ParseError(path, no, line, f"expected {'= '.join(sorted(required))}=")
        out[dev] = fields
    return out


def _device_fields(pairs: list[str], path: str, no: int, line: str, allow_max: bool,
                   required: frozenset[str]) -> dict[str, int | None]:
    """The ``SUB=VAL`` pairs of a line of :func:`device_keyed`, checked one by one: a value of
    ``required`` strictly, another kept only when it is a number."""
    fields = {}
    for pair in pairs:
        sub, sep, val = pair.partition("=")
        if not sep or not sub or sub in fields:
            raise ParseError(path, no, line, f"expected SUBKEY=VALUE once a key, got {pair!r}")
        if sub in required:
            fields[sub] = None if allow_max and val == "max" else uint(val, path, no, line)
        elif (number := _u64(val)) is not None:
            fields[sub] = number
    return fields


def int_list(text: str, path: str = "<text>") -> list[int]:
    """One number per line (cgroup.procs, cgroup.threads)."""
    return [uint(line.strip(), path, no, line) for no, line in _lines(text)]
