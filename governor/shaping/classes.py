"""Which class each user gets and how fast it may go (pure: no I/O).

Per governed user on a link of capacity ``C`` bits/s: ``rate`` (what HTB guarantees) is her
weighted share of the link, ``C·w_i/Σw``; ``ceil`` (how far she may borrow) is her DRF
allocation of the link when it is contended, else the whole link — HTB lends unused
guarantees, so the link stays work-conserving either way.
"""

from __future__ import annotations

from collections.abc import Mapping

from governor.shaping.model import ClassRate

__all__ = ["FIRST_MINOR", "LAST_MINOR", "MinorAllocator", "plan_classes"]

FIRST_MINOR, LAST_MINOR = 0x10, 0xFFFE  # 1 is the link class, ffff the default class


class MinorAllocator:
    """Stable uid → class minor: a user keeps her class while governed; freed minors are reused."""

    def __init__(self, known: Mapping[int, int] | None = None):
        self.by_uid: dict[int, int] = dict(known or {})

    def assign(self, uids) -> dict[int, int]:
        """Minors for exactly ``uids`` (others released). Raises OverflowError past 65,519 users."""
        wanted = set(uids)
        self.by_uid = {uid: m for uid, m in self.by_uid.items() if uid in wanted}
        used = set(self.by_uid.values())
        free = (m for m in range(FIRST_MINOR, LAST_MINOR + 1) if m not in used)
        for uid in sorted(wanted - self.by_uid.keys()):
            minor = next(free, None)
            if minor is None:
                raise OverflowError("more governed users than HTB class ids")
            self.by_uid[uid] = minor
        return dict(self.by_uid)


def plan_classes(link_bits_per_s: float, weights: Mapping[int, float],
                 allocation_bits_per_s: Mapping[int, float] | None = None) -> dict[int, ClassRate]:
    """uid → :class:`ClassRate`. ``allocation_bits_per_s`` (her DRF allocation of this link) is
    given when the link is contended; without it every ceil is the link."""
    total = sum(weights.values()) or 1.0
    out = {}
    for uid, weight in weights.items():
        rate = max(8000, int(link_bits_per_s * weight / total))
        ceil = link_bits_per_s if allocation_bits_per_s is None else allocation_bits_per_s.get(uid, rate)
        out[uid] = ClassRate(rate, max(rate, int(ceil)))
    return out
