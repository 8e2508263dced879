"""Typed values of cgroup v2 interface files, with the kernel's rules (pure, no I/O).

Source: Documentation/admin-guide/cgroup-v2.rst, sections "CPU Interface Files"
(cpu.stat, cpu.weight, cpu.max), "Memory Interface Files" (memory.events), "IO Interface
Files" (io.stat, io.max) and "PSI - Pressure Stall Information" (Documentation/accounting/psi.rst).
``None`` always means ``max`` (no limit); no ``-1`` sentinels. Counter readings (cpu.stat,
memory.events, io.stat, PSI) are named tuples: built a few times per user per tick, they cost a
third of what a frozen dataclass does (issue 16); limits are dataclasses with their rules.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields
from typing import NamedTuple

from cgroups.errors import CgroupError

__all__ = [
    "CPU_PERIOD_DEFAULT_USEC", "CPU_PERIOD_MAX_USEC", "CPU_PERIOD_MIN_USEC", "CPU_QUOTA_MIN_USEC",
    "CPU_WEIGHT_DEFAULT", "CPU_WEIGHT_MAX", "CPU_WEIGHT_MIN",
    "BYTES_LIMIT_MAX", "CpuMax", "CpuStat", "DEVICE", "InvalidLimit", "IoMax", "IoStat", "MemoryEvents", "Pressure",
    "PressureLine", "PressureTotals", "check_bytes", "check_device",
]

CPU_PERIOD_MIN_USEC = 1_000  # kernel/sched/core.c: min_cfs_quota_period = 1 ms
CPU_PERIOD_MAX_USEC = 1_000_000  # max_cfs_quota_period = 1 s
CPU_QUOTA_MIN_USEC = 1_000  # quotas below 1 ms are refused (EINVAL)
CPU_PERIOD_DEFAULT_USEC = 100_000
CPU_WEIGHT_MIN, CPU_WEIGHT_DEFAULT, CPU_WEIGHT_MAX = 1, 100, 10_000
# memory.low/high/max are kept in pages (mm/page_counter.c): a byte value reads back rounded
# down to a multiple of the page size.
PAGE_SIZE = os.sysconf("SC_PAGESIZE")
#: The largest byte limit (memory.low|high|max, and v1's memory.limit_in_bytes and
#: memory.soft_limit_in_bytes): the kernel keeps them in page counters of at most LONG_MAX
#: bytes (mm/page_counter.c, PAGE_COUNTER_MAX). It parses the text with memparse(), which
#: wraps past 2^64 - 1 without an error: 2^64 written to memory.max becomes 0, an immediate OOM.
BYTES_LIMIT_MAX = 2**63 - 1

#: A block device ``MAJ:MIN`` (ASCII digits), as io.stat and io.max key their lines; fullmatch it.
DEVICE = re.compile(r"[0-9]+:[0-9]+")


class InvalidLimit(CgroupError, ValueError):
    """A limit that the kernel would refuse, caught before writing."""


class CpuStat(NamedTuple):
    """cpu.stat. All times in µs; counters are cumulative. The throttling keys exist only
    when the cpu controller is enabled (None otherwise)."""

    usage_usec: int
    user_usec: int
    system_usec: int
    nr_periods: int | None = None
    nr_throttled: int | None = None
    throttled_usec: int | None = None
    nr_bursts: int | None = None
    burst_usec: int | None = None


@dataclass(frozen=True)
class CpuMax:
    """cpu.max: ``$QUOTA $PERIOD`` in µs; ``quota_usec=None`` is ``max`` (unlimited).

    The quota may exceed the period (2 cores = ``200000 100000``).
    """

    quota_usec: int | None
    period_usec: int = CPU_PERIOD_DEFAULT_USEC

    @classmethod
    def for_cores(cls, cores: float | None, period_usec: int = CPU_PERIOD_DEFAULT_USEC) -> CpuMax:
        """The limit allowing ``cores`` CPUs (None = unlimited), the quota clamped up to 1 ms."""
        if cores is None:
            return cls(None, period_usec)
        return cls(max(CPU_QUOTA_MIN_USEC, round(cores * period_usec)), period_usec)

    @property
    def cores(self) -> float | None:
        return None if self.quota_usec is None else self.quota_usec / self.period_usec

    def validate(self) -> CpuMax:
        """Raises :class:`InvalidLimit` unless 1 ms ≤ period ≤ 1 s and quota ≥ 1 ms."""
        if not CPU_PERIOD_MIN_USEC <= self.period_usec <= CPU_PERIOD_MAX_USEC:
            raise InvalidLimit(f"cpu.max period {self.period_usec} µs outside 1000..1000000 µs")
        if self.quota_usec is not None and self.quota_usec < CPU_QUOTA_MIN_USEC:
            raise InvalidLimit(f"cpu.max quota {self.quota_usec} µs below the kernel's 1000 µs minimum")
        return self

    def render(self) -> str:
        """The file's text, e.g. ``50000 100000`` or ``max 100000``."""
        return f"{'max' if self.quota_usec is None else self.quota_usec} {self.period_usec}"

    __str__ = render


class MemoryEvents(NamedTuple):
    """memory.events counters (cumulative): times the cgroup hit memory.low protection, was
    throttled over memory.high, reached memory.max, hit OOM, and had processes OOM-killed."""

    low: int
    high: int
    max: int
    oom: int
    oom_kill: int
    oom_group_kill: int | None = None


class IoStat(NamedTuple):
    """io.stat for one device: cumulative bytes and I/Os read, written and discarded."""

    rbytes: int
    wbytes: int
    rios: int
    wios: int
    dbytes: int | None = None
    dios: int | None = None


@dataclass(frozen=True)
class IoMax:
    """io.max for one whole disk: bytes/s and IO/s limits; None is ``max``."""

    rbps: int | None = None
    wbps: int | None = None
    riops: int | None = None
    wiops: int | None = None

    def validate(self) -> IoMax:
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InvalidLimit(f"io.max {f.name}={value!r}: expected a whole number ≥ 1, or None for max")
        return self

    def render(self) -> str:
        # the four keys spelled out: dataclasses.fields() per call was 6% of a daemon tick (issue 16)
        r, w, ri, wi = self.rbps, self.wbps, self.riops, self.wiops
        return (f"rbps={'max' if r is None else r} wbps={'max' if w is None else w} "
                f"riops={'max' if ri is None else ri} wiops={'max' if wi is None else wi}")

    __str__ = render

    @property
    def unlimited(self) -> bool:
        return self.rbps is None and self.wbps is None and self.riops is None and self.wiops is None


class PressureLine(NamedTuple):
    """One PSI line: share of wall time stalled (percent) over 10 s, 60 s, 300 s, and the
    cumulative stall time in µs."""

    avg10: float
    avg60: float
    avg300: float
    total_usec: int


class Pressure(NamedTuple):
    """cpu|memory|io.pressure: ``some`` (at least one task stalled) and ``full`` (all
    non-idle tasks stalled; None where the kernel does not report it)."""

    some: PressureLine
    full: PressureLine | None = None


class PressureTotals(NamedTuple):
    """The cumulative stall times of a cpu|memory|io.pressure file, µs: the ``total`` of its
    ``some`` line and of its ``full`` line (None where the kernel does not report one) — what
    a monitor differences each tick, without the averages (:meth:`cgroups.Cgroup.pressure_totals`)."""

    some_total_usec: int
    full_total_usec: int | None


def check_cpu_weight(weight: int) -> int:
    """A cpu.weight the kernel takes (a whole number in 1..10000), or :class:`InvalidLimit`."""
    if isinstance(weight, bool) or not isinstance(weight, int) or not CPU_WEIGHT_MIN <= weight <= CPU_WEIGHT_MAX:
        raise InvalidLimit(f"cpu.weight {weight!r}: expected a whole number in {CPU_WEIGHT_MIN}..{CPU_WEIGHT_MAX}")
    return weight


def check_bytes(name: str, value: int | None) -> int | None:
    """A byte limit for memory file ``name`` — a whole number in 0 … :data:`BYTES_LIMIT_MAX`
    (2^63 - 1), or None for max (unlimited) — else :class:`InvalidLimit`. The one rule for byte
    limits: the v2 and v1 writers check what they write with it, the v2 readers what they read."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not 0 <= value <= BYTES_LIMIT_MAX):
        raise InvalidLimit(f"{name} {value!r}: expected whole bytes in 0 … 2^63 - 1, or None for max")
    return value


def check_device(device: str) -> str:
    """``"MAJ:MIN"`` or :class:`InvalidLimit`."""
    if not isinstance(device, str) or not DEVICE.fullmatch(device):
        raise InvalidLimit(f"device {device!r}: expected MAJ:MIN, e.g. 8:0")
    return device
