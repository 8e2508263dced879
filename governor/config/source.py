"""Loading YAML/JSON input files with the line of every value, for errors users can act on.

Every user-facing input (``drfgov allocate`` problems, the policy file) is read through
:func:`load`, which returns plain Python data plus a :class:`Located` index from a field path
(``("users", "B", "max_units")``) to its line. Validation code raises :class:`InputError`
with that path; the message then names the file, line, field and what was expected::

    problem.yaml:7: users.B.max_units: expected a number ≥ 0, got -1

JSON is parsed by the same YAML 1.1 loader (JSON is, in practice, a subset of it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["InputError", "Located", "check_keys", "check_number", "load", "loads", "mapping", "number"]

Path_ = tuple[Any, ...]


class InputError(Exception):
    """A user mistake in an input file: which file, line and field, and what was expected."""

    def __init__(self, file: str, line: int | None, field: str, message: str):
        self.file, self.line, self.field, self.message = file, line, field, message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")


@dataclass(frozen=True)
class Located:
    """Loaded data plus the line number of each field path (1-based)."""

    file: str
    data: Any
    lines: Mapping[Path_, int]

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


def load(path: str | Path) -> Located:
    """Read and parse ``path``.

    Raises:
        InputError: the file cannot be read, or is not valid YAML/JSON.
    """
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(name, None, "", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(name, None, "", f"cannot read: {exc}") from None
    return loads(text, name)


def loads(text: str, name: str = "<string>") -> Located:
    """Parse ``text`` as YAML/JSON; see :func:`load`."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(name, mark.line + 1 if mark else None, "", f"not valid YAML/JSON: {problem}") from None
    lines: dict[Path_, int] = {}
    loader = yaml.SafeLoader("")  # one constructor for every scalar of this document
    try:
        data = _convert(node, (), lines, name, loader) if node is not None else None
    finally:
        loader.dispose()
    return Located(name, data, lines)


def _convert(node: yaml.Node, path: Path_, lines: dict[Path_, int], name: str, loader: yaml.SafeLoader) -> Any:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise InputError(name, key_node.start_mark.line + 1, ".".join(map(str, path)), "expected a plain key")
            key = loader.construct_object(key_node)
            if key in out:
                raise InputError(name, key_node.start_mark.line + 1, ".".join(map(str, path + (key,))), "duplicate key")
            out[key] = _convert(value_node, path + (key,), lines, name, loader)
            lines[path + (key,)] = key_node.start_mark.line + 1
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, path + (i,), lines, name, loader) for i, item in enumerate(node.value)]
    return loader.construct_object(node)


# -- typed field readers, shared by every schema ------------------------------------------------

_EXPONENT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")


def mapping(src: Located, path: Path_, value: Any, what: str = "a mapping") -> dict[Any, Any]:
    """``value`` if it is a mapping (None counts as empty), else an :class:`InputError`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise src.error(path, f"expected {what}, got {_describe(value)}")
    return value


def check_number(value: Any, *, minimum: float = 0.0, strict: bool = False, whole: bool = False,
                 maximum: float = math.inf) -> float:
    """The one number rule of every input file: ``value`` as a finite float ``≥ minimum``
    (``> minimum`` when ``strict``), ``≤ maximum``, and a whole number when ``whole``. Exponent
    notation without a dot (``1e9``), which YAML 1.1 reads as text, counts as a number.

    Raises:
        ValueError: with the text "expected …, got …" for the caller to place (file, line, field).
    """
    kind = "a whole number" if whole else "a number"
    expected = f"{kind} {'>' if strict else '≥'} {minimum:g}" + (f" and ≤ {maximum:g}" if maximum < math.inf else "")
    if isinstance(value, str) and _EXPONENT.match(value):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected {expected}, got {_describe(value)}")
    try:
        x = float(value)
    except OverflowError:  # an integer beyond any float
        raise ValueError(f"expected {expected}, got a number of {len(str(value))} digits") from None
    if not math.isfinite(x) or x < minimum or (strict and x == minimum) or x > maximum or (whole and not x.is_integer()):
        raise ValueError(f"expected {expected}, got {value!r}")
    return x


def number(src: Located, path: Path_, value: Any, *, minimum: float = 0.0, strict: bool = False,
           whole: bool = False, maximum: float = math.inf) -> float:
    """:func:`check_number` of the field at ``path``; raises :class:`InputError` naming it."""
    try:
        return check_number(value, minimum=minimum, strict=strict, whole=whole, maximum=maximum)
    except ValueError as exc:
        raise src.error(path, str(exc)) from None


def check_keys(src: Located, path: Path_, value: dict[Any, Any], allowed: tuple[str, ...]) -> None:
    """Reject keys not in ``allowed``, naming the known ones."""
    for key in value:
        if key not in allowed:
            raise src.error(path + (key,), f"unknown key; expected one of: {', '.join(allowed)}")


def _describe(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"text {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)
