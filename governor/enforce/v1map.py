"""The planner's cgroup v2 knobs in cgroup v1 files, and back (pure: no I/O).

The planner speaks v2 (:mod:`governor.enforce.model`); a v1 host has other files with other
meanings. Sources: Documentation/admin-guide/cgroup-v1/memory.rst, blkio-controller.rst,
Documentation/scheduler/sched-bwc.rst, sched-design-CFS.rst.

=================  ======================================  =====================================
v2 knob            v1 file(s)                              difference
=================  ======================================  =====================================
``cpu.max``        ``cpu.cfs_quota_us``/``cfs_period_us``  none (same CFS bandwidth control)
``cpu.weight``     ``cpu.shares``                          1024 shares per 100 of weight
``memory.max``     ``memory.limit_in_bytes``               none: reclaim, then OOM kill in the
                                                           cgroup; the never-below-use rule
                                                           (:func:`governor.control.plan.safe_memory_max`)
                                                           applies unchanged
``memory.low``     ``memory.soft_limit_in_bytes``          not a protection: under *global*
                                                           pressure the kernel reclaims first
                                                           from cgroups above their soft limit;
                                                           0 (no protection) is written as
                                                           unlimited (no preference), the v1
                                                           default
``memory.high``    (nothing)                               v1 has no throttle below the limit;
                                                           not written, reads as max
``io.max``         ``blkio.throttle.{read,write}_``        none; ``MAJ:MIN 0`` removes a rule
                   ``{bps,iops}_device``
=================  ======================================  =====================================
"""

from __future__ import annotations

from cgroups.limits import CPU_WEIGHT_MAX, CPU_WEIGHT_MIN, CpuMax, IoMax
from cgroups_v1.values import CPU_SHARES_DEFAULT, CPU_SHARES_MAX, CPU_SHARES_MIN

__all__ = ["SHARES_PER_WEIGHT", "cpu_max_from_cfs", "cpu_weight_from_shares", "io_max_from_throttle",
           "memory_low_from_soft_limit", "shares_for_cpu_weight", "shares_to_write", "soft_limit_for_memory_low",
           "soft_limit_to_write"]

#: cpu.shares per unit of cpu.weight: the defaults (1024 and 100) line up.
SHARES_PER_WEIGHT = CPU_SHARES_DEFAULT / 100


def shares_for_cpu_weight(weight: int) -> int:
    """cpu.weight (1–10000) → cpu.shares: ×10.24, rounded, within 2–262144."""
    return min(CPU_SHARES_MAX, max(CPU_SHARES_MIN, round(weight * SHARES_PER_WEIGHT)))


def cpu_weight_from_shares(shares: int) -> int:
    """cpu.shares → cpu.weight: ÷10.24, rounded, within 1–10000 (exact for the default and for
    every value :func:`shares_for_cpu_weight` writes)."""
    return min(CPU_WEIGHT_MAX, max(CPU_WEIGHT_MIN, round(shares / SHARES_PER_WEIGHT)))


def shares_to_write(weight: int, original_shares: int | None) -> int:
    """The cpu.shares to write for ``weight``: the slice's original shares when they read as
    this very weight (so a restore puts an odd value such as 1000 back exactly), else
    :func:`shares_for_cpu_weight`. ``original_shares``: the first reading, None if unknown."""
    if original_shares is not None and cpu_weight_from_shares(original_shares) == weight:
        return original_shares
    return shares_for_cpu_weight(weight)


def cpu_max_from_cfs(quota_usec: int | None, period_usec: int) -> CpuMax:
    return CpuMax(quota_usec, period_usec)


def soft_limit_for_memory_low(low_bytes: int | None) -> int | None:
    """memory.low → memory.soft_limit_in_bytes (None = unlimited): 0 and max are both "no
    preference" in v1 (unlimited)."""
    return None if not low_bytes else low_bytes


def soft_limit_to_write(low_bytes: int | None, original: tuple[int | None] | None) -> int | None:
    """The memory.soft_limit_in_bytes to write for memory.low ``low_bytes``: the original (a
    1-tuple of the first reading, None if unknown) when it reads as this very memory.low (a
    soft limit of 0 and an unlimited one both read as 0), else :func:`soft_limit_for_memory_low`."""
    if original is not None and memory_low_from_soft_limit(original[0]) == (low_bytes or 0):
        return original[0]
    return soft_limit_for_memory_low(low_bytes)


def memory_low_from_soft_limit(soft_bytes: int | None) -> int:
    """memory.soft_limit_in_bytes → memory.low: unlimited (the default) reads as 0."""
    return 0 if soft_bytes is None else soft_bytes


def io_max_from_throttle(rules: dict[str, dict[str, int]]) -> dict[str, IoMax]:
    """``{key: {MAJ:MIN: value}}`` of the four throttle files (keys rbps, wbps, riops, wiops)
    → io.max per disk with at least one rule."""
    devices = sorted({d for per_key in rules.values() for d in per_key})
    return {d: IoMax(**{k: rules.get(k, {}).get(d) for k in ("rbps", "wbps", "riops", "wiops")}) for d in devices}
