"""The one hysteresis rule: when a planned value differs enough from the one in force to be
written (pure). Used for cgroup knobs (:mod:`governor.control.plan`) and HTB classes
(:mod:`governor.control.netplan`), so a value jittering inside the band costs no write.
"""

from __future__ import annotations

__all__ = ["moved"]


def moved(in_force: float | None, planned: float | None, hysteresis: float) -> bool:
    """Whether ``planned`` is worth writing over ``in_force``: one is None (max) and the other is
    not, or they differ by more than ``hysteresis`` (a fraction) of the value in force (of 1
    when it is below 1, so a zero in force does not make every change "infinite").
    """
    if in_force is None or planned is None:
        return in_force is not planned
    if in_force == planned:
        return False
    return abs(planned - in_force) > hysteresis * max(abs(in_force), 1)
