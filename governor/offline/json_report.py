"""The ``drfgov allocate --json`` document as text, written straight from the arrays (issue 16).

``json.dumps(named_result(...).to_json(), indent=2)`` builds a :class:`~governor.offline.allocate.UserResult`
and a dict per user, and the standard library encodes an indented document in pure Python (its C
encoder takes no indent): about 300 ms for 10,000 users on a 2-core machine. :func:`allocation_json`
gives the same text, byte for byte, from a :class:`~governor.fairness.drf.Fill`: each number is
rounded and formatted once, and each user's entry is one ``%`` format of a template built once
for the resources. ``tests/unit/test_json_report.py`` holds it to the slow path's text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np

from governor.fairness.drf import Fill

__all__ = ["allocation_json"]

_key = json.encoder.encode_basestring_ascii  # a JSON string as json.dumps writes it (ensure_ascii)
_NOT_FINITE = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}  # json.dumps's names for them


def allocation_json(resources: Sequence[str], names: Sequence[str], fill: Fill, discrete: bool = False) -> str:
    """The text of ``json.dumps(named_result(resources, names, fill, discrete).to_json(), indent=2)``.

    Args:
        resources: the ``m`` resource names, in the order of ``fill``'s columns.
        names: the ``n`` user names, in the order of ``fill``'s rows.
        fill: the allocation (shapes as in :class:`~governor.fairness.drf.Fill`).
        discrete: units are whole numbers (printed as integers), as ``--discrete`` gives.

    Returns:
        The indented JSON document: numbers rounded to 12 significant digits, as
        :meth:`~governor.offline.allocate.Result.to_json` rounds them.
    """
    n, m = len(names), len(resources)
    units = [str(int(u)) for u in fill.units.tolist()] if discrete else _numbers(fill.units)
    allocation = _numbers(fill.allocation.reshape(-1))
    dominant = _numbers(fill.dominant_share)
    weighted = _numbers(fill.weighted_share)
    resource_keys = [_key(r) for r in resources]
    dominant_resource = [_key(resources[j]) if j >= 0 else "null" for j in fill.dominant_resource.tolist()]
    entry = ("    %s: {\n      \"units\": %s,\n      \"allocation\": " + _block([f"{k}: %s" for k in resource_keys], 8)
             + ",\n      \"dominant_resource\": %s,\n      \"dominant_share\": %s,\n      \"weighted_share\": %s\n    }")
    users = [entry % (_key(str(names[i])), units[i], *allocation[i * m:(i + 1) * m], dominant_resource[i], dominant[i],
                      weighted[i]) for i in range(n)]
    consumed = _numbers(fill.consumed)
    saturated = [resource_keys[j] for j in range(m) if fill.saturated[j]]
    return ("{\n  \"users\": " + _block(users, 4, indented=True)
            + ",\n  \"consumed\": " + _block([f"{k}: {v}" for k, v in zip(resource_keys, consumed)], 4)
            + ",\n  \"saturated\": " + _block(saturated, 4, brackets="[]") + "\n}")


def _numbers(values: np.ndarray) -> list[str]:
    """Each value as ``json.dumps(float(f"{x:.12g}"))`` writes it (rounded to 12 significant digits).

    That is ``repr`` of the rounded float, and ``repr`` costs twice what ``%.12g`` does. The two
    texts have the same digits (a decimal of at most 15 significant digits is the shortest text
    of the float nearest to it), so ``%.12g``'s own text is kept where it is written the way
    ``repr`` writes it: with a point and no exponent. Only the others are converted: whole
    numbers (``3`` → ``3.0``), exponents (``1e+13`` → ``10000000000000.0``; ``repr`` writes
    exponents from 10^16 up, ``%.12g`` from 10^12), ``inf`` and ``nan``.
    """
    out = ["%.12g" % x for x in values.tolist()]
    return [text if "." in text and "e" not in text else _json_float(float(text)) for text in out]


def _json_float(x: float) -> str:
    return _NOT_FINITE.get(repr(x), repr(x))


def _block(items: list[str], indent: int, brackets: str = "{}", indented: bool = False) -> str:
    """``items`` as the body of a JSON object (or list) whose items sit ``indent`` spaces in, as
    ``json.dumps(indent=2)`` lays them out; ``indented`` items carry their own indent."""
    if not items:
        return brackets
    pad = "" if indented else " " * indent
    return brackets[0] + "\n" + pad + (",\n" + pad).join(items) + "\n" + " " * (indent - 2) + brackets[1]
