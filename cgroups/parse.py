"""Pure parsers for cgroup v2 interface file formats (no I/O).

Source: Documentation/admin-guide/cgroup-v2.rst, "Interface Files" > "Format":
flat keyed (``KEY VALUE`` per line), nested keyed (``KEY SUBKEY=VALUE ...`` per line) and
single values, where ``max`` means "no limit" (returned as ``None`` here).
"""

from __future__ import annotations

from collections.abc import Iterator

from cgroups.errors import ParseError

__all__ = ["flat_keyed", "flat_keyed_select", "nested_keyed", "single_int", "int_or_max", "int_list"]


def _lines(text: str) -> Iterator[tuple[int, str]]:
    for no, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield no, line


def _int(value: str, path: str, no: int, line: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ParseError(path, no, line, f"expected an integer, got {value!r}") from None


def int_or_max(value: str, path: str = "<text>", no: int = 1, line: str | None = None) -> int | None:
    """``"max"`` → None, else the integer."""
    return None if value == "max" else _int(value, path, no, value if line is None else line)


def single_int(text: str, path: str = "<text>", allow_max: bool = False) -> int | None:
    """A file holding one integer (or ``max`` when ``allow_max``)."""
    try:  # fast path: int() takes the surrounding blanks and the newline
        return int(text)
    except ValueError:
        pass
    rows = list(_lines(text))
    if len(rows) != 1:
        raise ParseError(path, 1, text.strip(), f"expected one value, got {len(rows)} lines")
    no, line = rows[0]
    value = line.strip()
    return int_or_max(value, path, no, line) if allow_max else _int(value, path, no, line)


def flat_keyed(text: str, path: str = "<text>") -> dict[str, int]:
    """``KEY VALUE`` lines (cpu.stat, memory.stat, memory.events) → ``{key: int}``."""
    try:  # fast path in C-level loops (ValueError unless two words a line and integers); errors
        # are located by the slow path below
        pairs = dict(map(str.split, text.splitlines()))
        return dict(zip(pairs, map(int, pairs.values())))
    except ValueError:
        pass
    out = {}
    for no, line in _lines(text):
        parts = line.split()
        if len(parts) != 2:
            raise ParseError(path, no, line, "expected 'KEY VALUE'")
        out[parts[0]] = _int(parts[1], path, no, line)
    return out


def flat_keyed_select(text: str, keys: tuple[str, ...], path: str = "<text>") -> dict[str, int]:
    """Only ``keys`` of a flat keyed file (those present), found by search, not a full parse."""
    out = {}
    for key in keys:
        if text.startswith(key + " "):
            start = len(key) + 1
        else:
            at = text.find(f"\n{key} ")
            if at < 0:
                continue
            start = at + len(key) + 2
        end = text.find("\n", start)
        value = text[start:end] if end >= 0 else text[start:]
        out[key] = _int(value.strip(), path, text.count("\n", 0, start) + 1, f"{key} {value}")
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


def int_list(text: str, path: str = "<text>") -> list[int]:
    """One integer per line (cgroup.procs, cgroup.threads)."""
    return [_int(line.strip(), path, no, line) for no, line in _lines(text)]
