"""One ``hourly`` row from a user's ``samples`` rows of an hour (pure: numpy on rows already read).

Beyond the full-resolution window, :mod:`.maintenance` replaces an hour's samples by one row
per user: mean dominant and weighted share, maximum dominant share, per resource mean usage and
allocation, maximum demand, and the share of the hour's samples in which she was held back.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from governor.service.history.codec import _unbits


def _aggregate(hour: int, uid: int, rows: list[tuple], layouts: dict[int, list[int]], layout_id) -> tuple:
    """One ``hourly`` row from a user's ``samples`` rows of that hour."""
    k = len(rows)
    layout_ids = {r[2] for r in rows}
    if len(layout_ids) == 1:
        key = layouts[rows[0][2]]
        n = len(key)
        raw = np.frombuffer(b"".join(r[6] for r in rows), dtype=np.uint8).reshape(k, -1)
        floats = np.ascontiguousarray(raw[:, :12 * n]).view("<f4").reshape(k, 3, n).astype(np.float64)
        held = np.unpackbits(raw[:, 12 * n:], axis=1, bitorder="little")[:, :n].astype(bool)
        lid = rows[0][2]
    else:  # her resources changed within the hour: every row onto the union
        key = list(dict.fromkeys(i for lid in sorted(layout_ids) for i in layouts[lid]))
        n = len(key)
        floats = np.full((k, 3, n), np.nan)
        held = np.zeros((k, n), dtype=bool)
        for j, r in enumerate(rows):
            own = layouts[r[2]]
            m = len(own)
            cols = [key.index(i) for i in own]
            floats[j][:, cols] = np.frombuffer(r[6], dtype="<f4", count=3 * m).reshape(3, m)
            held[j, cols] = _unbits(r[6], 12 * m, m)
        lid = layout_id(key)
    usage, demand, allocation = floats[:, 0], floats[:, 1], floats[:, 2]
    vectors = np.concatenate([_nanmean(usage), _nanmean(allocation), _nanmax(demand), held.mean(axis=0)])
    dominant = Counter(r[3] for r in rows if r[3] is not None).most_common(1)
    dominant_shares = np.array([r[4] for r in rows], dtype=float)
    return (hour, uid, k, lid, dominant[0][0] if dominant else None, float(_nanmean(dominant_shares[:, None])[0]),
            float(_nanmax(dominant_shares[:, None])[0]), float(_nanmean(np.array([[r[5]] for r in rows], dtype=float))[0]),
            float(held.any(axis=1).mean()), vectors.astype("<f4").tobytes())


def _nanmean(x: np.ndarray) -> np.ndarray:
    """Column means over the rows that have a value (NaN where none has); no warnings (threads)."""
    valid = ~np.isnan(x)
    counts = valid.sum(axis=0)
    sums = np.where(valid, x, 0.0).sum(axis=0)
    return np.divide(sums, counts, out=np.full(x.shape[1], np.nan), where=counts > 0)


def _nanmax(x: np.ndarray) -> np.ndarray:
    valid = ~np.isnan(x)
    top = np.where(valid, x, -np.inf).max(axis=0)
    return np.where(valid.any(axis=0), top, np.nan)
