"""Typed values of cgroup v1 interface files, with the kernel's rules (pure, no I/O).

Sources (Documentation/admin-guide/cgroup-v1/ and Documentation/scheduler/):

* ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` — sched-bwc.rst: µs; quota ``-1`` is unlimited
  (here None; the one v1 file the kernel writes ``-1`` in); 1 ms ≤ period ≤ 1 s; quota ≥ 1 ms,
  and a signed 64-bit number (kernel/sched/core.c: ``read_s64``/``write_s64``, printed
  ``%lld``; the cgroup core's kstrtoll refuses more with ERANGE).
* ``cpu.shares`` — sched-design-CFS.rst "Group scheduler extensions": a relative weight,
  default 1024; the kernel clamps to 2 … 262144 (``MIN_SHARES``/``MAX_SHARES``): we refuse
  instead of letting it clamp silently.
* ``cpu.stat`` — sched-bwc.rst "Statistics": ``nr_periods``, ``nr_throttled``,
  ``throttled_time`` (**ns**, unlike v2's ``throttled_usec``).
* ``cpuacct.usage`` — cpuacct.rst: CPU time in **ns**, cumulative.
* ``memory.*_in_bytes`` — memory.rst §2.5, §5: bytes, kept in pages; "unlimited" reads as
  ``PAGE_COUNTER_MAX × PAGE_SIZE`` (9223372036854771712 with 4 KiB pages; here None) and is
  written as ``-1``. ``memory.oom_control`` (§10): ``oom_kill_disable``, ``under_oom`` and,
  since Linux 4.13, ``oom_kill`` (processes the OOM killer killed in this cgroup).
* ``blkio.throttle.*`` — blkio-controller.rst "Throttling/Upper Limit policy": limits are
  ``MAJ:MIN VALUE`` lines (bytes/s or IO/s), a device without a rule is not listed, writing
  ``MAJ:MIN 0`` removes the rule; ``io_service_bytes(_recursive)`` lists ``MAJ:MIN Read|Write|
  Sync|Async|Discard|Total BYTES`` lines and a closing ``Total BYTES``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cgroups.limits import (
    CPU_PERIOD_MAX_USEC, CPU_PERIOD_MIN_USEC, CPU_QUOTA_MIN_USEC, InvalidLimit, check_bytes, check_device,
)

__all__ = [
    "CFS_QUOTA_MAX_USEC", "CPU_SHARES_DEFAULT", "CPU_SHARES_MAX", "CPU_SHARES_MIN", "MEMORY_UNLIMITED_BYTES",
    "BlkioPair", "OomControl", "V1CpuStat", "check_bytes_or_unlimited", "check_cfs", "check_cfs_period",
    "check_cfs_quota", "check_cpu_shares", "check_throttle", "in_bytes_or_none",
]

CPU_SHARES_MIN, CPU_SHARES_DEFAULT, CPU_SHARES_MAX = 2, 1024, 262144
#: The largest cpu.cfs_quota_us the cgroup core takes or prints: a signed 64-bit number.
CFS_QUOTA_MAX_USEC = 2**63 - 1
PAGE_SIZE = os.sysconf("SC_PAGESIZE")
#: What ``memory.limit_in_bytes`` (and the soft limit) read when unlimited: PAGE_COUNTER_MAX pages
#: (LONG_MAX / PAGE_SIZE on 64-bit) in bytes.
MEMORY_UNLIMITED_BYTES = (2**63 - 1) // PAGE_SIZE * PAGE_SIZE


@dataclass(frozen=True)
class V1CpuStat:
    """cpu.stat of the v1 cpu controller: CFS periods, throttled periods, throttled time (ns)."""

    nr_periods: int
    nr_throttled: int
    throttled_time: int


@dataclass(frozen=True)
class OomControl:
    """memory.oom_control: OOM killer disabled (1/0), under OOM now (1/0), and processes it
    killed in this cgroup (None before Linux 4.13)."""

    oom_kill_disable: int
    under_oom: int
    oom_kill: int | None = None


@dataclass(frozen=True)
class BlkioPair:
    """One device's ``Read`` and ``Write`` lines in blkio.throttle.io_service_bytes(_recursive)
    (bytes) or blkio.throttle.io_serviced(_recursive) (I/Os); cumulative."""

    read: int
    write: int


def in_bytes_or_none(value: int | None) -> int | None:
    """A ``memory.*_in_bytes`` limit read (bytes): None when it is the kernel's "unlimited",
    :data:`MEMORY_UNLIMITED_BYTES` or more (kernels before 3.19's page counters print more:
    2^63 - 1 on 3.10, 2^64 - 1 reported from 3.x Docker hosts, performancecopilot/pcp#85), or
    None already."""
    return None if value is None or value >= MEMORY_UNLIMITED_BYTES else value


def check_cfs_period(period_usec: int) -> int:
    """A cpu.cfs_period_us the kernel takes (1000..1000000 µs), or :class:`InvalidLimit`. The one
    rule for the period: the writer checks what it writes with it, the reader what it reads."""
    if isinstance(period_usec, bool) or not isinstance(period_usec, int) \
            or not CPU_PERIOD_MIN_USEC <= period_usec <= CPU_PERIOD_MAX_USEC:
        raise InvalidLimit(f"cpu.cfs_period_us {period_usec!r}: expected 1000..1000000 µs")
    return period_usec


def check_cfs_quota(quota_usec: int | None) -> int | None:
    """A cpu.cfs_quota_us the kernel takes (1000 … :data:`CFS_QUOTA_MAX_USEC` µs; None =
    unlimited, ``-1``), or :class:`InvalidLimit`. The one rule for the quota, as for the period."""
    if quota_usec is not None and (isinstance(quota_usec, bool) or not isinstance(quota_usec, int)
                                   or not CPU_QUOTA_MIN_USEC <= quota_usec <= CFS_QUOTA_MAX_USEC):
        raise InvalidLimit(f"cpu.cfs_quota_us {quota_usec!r}: expected 1000 … 2^63 - 1 µs, "
                           "or None for unlimited (-1)")
    return quota_usec


def check_cfs(quota_usec: int | None, period_usec: int) -> tuple[int | None, int]:
    """A quota/period pair the kernel takes (:func:`check_cfs_period`, :func:`check_cfs_quota`),
    or :class:`InvalidLimit` naming the file."""
    period_usec = check_cfs_period(period_usec)
    return check_cfs_quota(quota_usec), period_usec


def check_cpu_shares(shares: int) -> int:
    """A cpu.shares value in 2..262144, or :class:`InvalidLimit` (the kernel would clamp it)."""
    if isinstance(shares, bool) or not isinstance(shares, int) or not CPU_SHARES_MIN <= shares <= CPU_SHARES_MAX:
        raise InvalidLimit(f"cpu.shares {shares!r}: expected a whole number in {CPU_SHARES_MIN}..{CPU_SHARES_MAX}")
    return shares


#: A byte limit for memory file ``name`` (None = unlimited, written ``-1``), or
#: :class:`InvalidLimit`: v2's rule, :func:`cgroups.limits.check_bytes` (one copy of it).
check_bytes_or_unlimited = check_bytes


def check_throttle(name: str, device: str, value: int | None) -> tuple[str, int | None]:
    """A blkio.throttle rule: whole disk ``MAJ:MIN`` and a limit ≥ 1 (None removes the rule)."""
    check_device(device)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidLimit(f"{name} {device} {value!r}: expected a whole number ≥ 1, or None for no rule")
    return device, value
