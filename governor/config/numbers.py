"""The one number rule of every input (:func:`check_number`) and what it needs, in a module of
its own: the readers of state.json (``drfgov shares``, ``explain``, ``top``) check its numbers
by it without loading PyYAML and the line-tracking loader (:mod:`governor.config.source`,
which re-exports every name here). Also the one rule of a tick's length (:func:`check_interval`).
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["INTERVAL_MAX_S", "INTERVAL_MIN_S", "QUOTE_CHARS", "HugeNumber", "check_interval", "check_number", "describe",
           "describe_number"]

#: Characters of a value quoted in an error message.
QUOTE_CHARS = 60
#: Python refuses to convert integers longer than this (sys.get_int_max_str_digits()).
_INT_DIGITS = 4300
#: A tick's length (``interval_s``, ``drfgov run --interval``): 0.1 s … a day (policy BOUNDS).
INTERVAL_MIN_S, INTERVAL_MAX_S = 0.1, 86_400


class HugeNumber:
    """An integer of more digits than Python converts (> 4,300): kept as its digit count only,
    so that the field's number check can refuse it by name."""

    __slots__ = ("digits", "negative")

    def __init__(self, digits: int, negative: bool = False):
        self.digits, self.negative = digits, negative

    def __repr__(self) -> str:
        return f"a {'negative ' if self.negative else ''}number of {self.digits:,} digits"


_EXPONENT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")


def check_number(value: Any, *, minimum: float = 0.0, strict: bool = False, whole: bool = False,
                 maximum: float = math.inf, below: bool = False) -> float:
    """The one number rule of every input file: ``value`` as a finite float ``≥ minimum``
    (``> minimum`` when ``strict``), ``≤ maximum`` (``< maximum`` when ``below``), and a whole
    number when ``whole``. Exponent notation without a dot (``1e9``), which YAML 1.1 reads as
    text, counts as a number, and the message shows it as written (:func:`describe_number`).
    The message names the bound that was broken: for infinity (``.inf``, or ``1e400``, past
    a float's range) the upper bound when there is one, else that the number must be finite;
    for minus infinity the lower bound; for NaN that it must be finite.

    Raises:
        ValueError: with the text "expected …, got …" for the caller to place (file, line, field).
    """
    noun = "whole number" if whole else "number"
    kind, floor = f"a {noun}", f"{'>' if strict else '≥'} {minimum:g}"
    low = f"expected {kind} {floor}"
    high = (f"expected {kind} {'<' if below else '≤'} {_bound(maximum)}" if maximum < math.inf
            else f"expected {kind} that fits a float (below 1.8e308)")
    shown = describe_number(value)
    if isinstance(value, str) and len(value) < 400 and _EXPONENT.match(value):
        value = float(value)
    if isinstance(value, HugeNumber):
        raise ValueError(f"{low if value.negative else high}, got {shown}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{low}, got {shown}")
    if isinstance(value, float) and not math.isfinite(value):
        if value > 0 and maximum < math.inf:
            raise ValueError(f"{high}, got {shown}")
        if value < 0:
            raise ValueError(f"{low}, got {shown}")
        raise ValueError(f"expected a finite {noun} {floor}, got {shown}")
    # compare the value itself: an integer exactly (2^63 − 1 is not 2^63), a float as it is
    if value < minimum or (strict and value == minimum) or (whole and isinstance(value, float) and not value.is_integer()):
        raise ValueError(f"{low}, got {shown}")
    if value > maximum or (below and value == maximum):
        raise ValueError(f"{high}, got {shown}")
    return float(value)


def _bound(x: float) -> str:
    """A bound as people read it: integers in full (9223372036854775807), others as ``%g``."""
    if isinstance(x, int):
        if x >= 2**20 and x & (x - 1) == 0:
            return f"2^{x.bit_length() - 1} = {x}"
        if x >= 2**20 and (x + 1) & x == 0:
            return f"2^{x.bit_length()} − 1 = {x}"
        return str(x)
    return f"{x:g}"


def check_interval(value: Any) -> float:
    """The one rule of a tick's length, ``interval_s`` and ``drfgov run --interval``: a finite
    number of seconds, :data:`INTERVAL_MIN_S` … :data:`INTERVAL_MAX_S`.

    Raises:
        ValueError: "expected …, got …" (:func:`check_number`).
    """
    return check_number(value, minimum=INTERVAL_MIN_S, maximum=INTERVAL_MAX_S)


def describe_number(value: Any) -> str:
    """``value`` for a number's error message: exponent notation without a dot (``1e-7``),
    text to YAML 1.1 but a number to :func:`check_number`, as written; anything else as
    :func:`describe` says it."""
    if isinstance(value, str) and len(value) < 400 and _EXPONENT.match(value):
        return value
    return describe(value)


def describe(value: Any) -> str:
    """``value`` for an error message: its kind, and at most :data:`QUOTE_CHARS` characters of it."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        if len(value) > QUOTE_CHARS:
            return f"text {value[:QUOTE_CHARS]!r}… ({len(value):,} characters)"
        return f"text {value!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and value.bit_length() > 133:  # more than 40 digits
        digits = len(str(abs(value))) if value.bit_length() < 14_000 else int(value.bit_length() * 0.30103) + 1
        return f"a number of {digits:,} digits"
    if isinstance(value, (int, float, HugeNumber)):
        return repr(value)
    return f"a {type(value).__name__}"
