"""The byte and text forms of the history's values (the BLOBs and TEXTs of :mod:`.schema`).

Floats are little-endian float32 (7 significant digits: 16 KiB in 256 GiB); NaN where a user's
entry lacks that resource; bitmaps are little-endian (bit i = the i-th resource of the layout).
Units are state.json's (cores, bytes, fraction of the disk's time, bits/s). Limits are stored
as a JSON array of the values of :data:`LIMIT_KEYS` when so keyed, else as their JSON object.
"""

from __future__ import annotations

import json
import sys
from array import array

import numpy as np

#: state.json's limits (LimitSet.to_json), stored as their values in this order when so keyed
LIMIT_KEYS = ("cpu.max", "cpu.weight", "memory.low", "memory.high", "memory.max", "io.max")
NAN = float("nan")
_BIG_ENDIAN = sys.byteorder == "big"


def _floats(values: list) -> bytes:
    packed = array("f", values)
    if _BIG_ENDIAN:
        packed.byteswap()
    return packed.tobytes()


def _number(x) -> float:
    """A float for any value a document may hold there; NaN for what is not a number."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return NAN
    return float(x)


def _encode_limits(limits) -> str:
    if isinstance(limits, dict) and tuple(limits) == LIMIT_KEYS:
        return json.dumps(list(limits.values()), separators=(",", ":"))
    return json.dumps(limits, separators=(",", ":"), sort_keys=True)


def _decode_limits(text: str):
    value = json.loads(text)
    return dict(zip(LIMIT_KEYS, value)) if isinstance(value, list) and len(value) == len(LIMIT_KEYS) else value


def _bitmap(positions, n: int) -> bytes:
    mask = 0
    for i in positions:
        mask |= 1 << i
    return mask.to_bytes((n + 7) // 8, "little")


def _unbits(blob: bytes, offset: int, n: int) -> np.ndarray:
    bits = np.unpackbits(np.frombuffer(blob, dtype=np.uint8, offset=offset), bitorder="little")
    return bits[:n].astype(bool)
