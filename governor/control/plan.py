"""Limit planning: a DRF allocation → the cgroup limits to write (pure: no I/O, no clock).

Rules (kernel facts from Documentation/admin-guide/cgroup-v2.rst, "CPU", "Memory", "IO"):

* **Work conservation.** A resource that is not contended (total demand fits its capacity)
  caps nobody: ``cpu.max max``, ``memory.high``/``memory.max`` ``max``, no ``io.max`` (but
  memory growth not yet confirmed: see Memory).
* **No cap near zero on what she does not use.** On a contended rate resource (CPU, a disk)
  a user is capped at her DRF allocation — except on one she does not use, or started to use
  only in this interval (her demand for it is negligible now or was a tick ago, ``unused``:
  she started mid-interval, so her first reading is partial): there her cap is at least her
  *weighted static share* of it
  (``capacity × her weight ÷ everyone's``: what sharing incentive guarantees her anyway), so a
  user who starts using it gets that share at once and her true demand is measured within a
  tick, not a cap near zero she must probe her way out of (a shell's first cold read at
  1 KiB/s). Where she does use a resource the cap is her allocation even when she is not
  held back on it: DRF holds only if each user's use follows her allocation.
* **CPU.** ``cpu.max`` as above, in cores (quota clamped to the kernel's 1 ms). Always:
  ``cpu.weight`` proportional to her CPU weight (weight 1 → 100, clamped 1–10000), so the
  kernel's work-conserving scheduler also leans her way.
* **Memory — never an OOM kill.** ``memory.low`` = her guaranteed share (her weight's fraction
  of memory capacity, at most what she demands). Contended: ``memory.high`` = her allocation
  (memory is a stock: no floor above it, the room must exist; her demand already holds her
  projected growth and a headroom) — but never raised past her use plus her part of the
  memory that is actually free (``memory_bound_bytes``): when DRF moves memory from one user
  to another, the first still holds it until the kernel has reclaimed it, and a memory.high
  raised at once promises memory that does not exist (three growers overshot by 130 MiB
  that way, and the guest's MemAvailable fell to 63 MiB) — and never below what she holds
  within her ``memory.low``: DRF gives a user held back elsewhere (her CPU) ``x·D`` of memory
  too, but memory is a stock, and what she holds within her guarantee is hers (a user holding
  8 GiB of her guaranteed 8 had memory.high 4 GiB, below her memory.low) — lowered by at most
  ``high_step_bytes`` per tick;
  not contended, ``memory.high`` and ``memory.max`` are ``max`` — but for a user whose
  memory grew faster than her interval before showed (``memory_guard_bytes``: her demand
  does not hold that growth, :func:`governor.control.loop._growth_guards`): her
  ``memory.high`` is her demand plus her part of the free memory (never below what she
  holds), so one user's allocate-and-free spike makes nobody else's memory contended, and a
  real grower is held within the free memory until her next reading confirms her growth.
  Wherever ``memory.high`` is written, ``memory.max`` = the larger of ``memory.high`` and
  what the kernel holds for her now (``memory.current``, page cache included — not the
  "used" figure DRF shares), plus ``margin_bytes``. The loop re-reads memory.current just
  before writing memory.max and never writes it below that plus the margin
  (:func:`safe_memory_max`). Memory values are whole pages (the kernel keeps pages): low
  and high rounded down, max rounded up.
* **Disks.** A disk is one resource measured in *fraction of the disk's time*: reading at
  ``r`` B/s and writing at ``w`` B/s uses ``r/R + w/W`` of a disk that does ``R`` and ``W``.
  ``io.max`` splits her fraction by her observed read/write mix (when she did no I/O, each
  direction may take all of it: she is idle or starting), each direction keeping at least a tenth of her static share of it (a reader can
  still write a log).
* **An admin's own limits are ceilings.** The limits a slice had before the governor first
  saw it (``ceiling``) are never lifted: every planned ``cpu.max``, ``memory.high``,
  ``memory.max`` and ``io.max`` value is at most the original, and ``memory.low`` at least
  the original (her protection is not taken away).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field

from cgroups.limits import CPU_WEIGHT_MAX, CPU_WEIGHT_MIN, PAGE_SIZE, CpuMax, IoMax
from governor.control.hysteresis import moved
from governor.control.resources import CPU, MEMORY, Resource
from governor.enforce.model import (
    CPU_MAX, CPU_WEIGHT, MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, Knob, LimitSet,
)

__all__ = ["DiskPlan", "MemoryState", "Plan", "Reasons", "UserPlanInput", "changed_knobs", "plan_user", "safe_memory_max"]


@dataclass(frozen=True)
class DiskPlan:
    """One governed disk as the planner sees it: bandwidths (bytes/s)."""

    device: str  # "MAJ:MIN"
    resource: Resource  # disk:MAJ:MIN
    read_bytes_per_s: float
    write_bytes_per_s: float


@dataclass(frozen=True)
class MemoryState:
    """What the planner must know of her memory right now (bytes; None = max)."""

    current_bytes: int  # memory.current: everything the kernel holds for her, page cache included
    written_high_bytes: int | None  # memory.high we last wrote (None: max / never written)


@dataclass(frozen=True)
class UserPlanInput:
    """One user's DRF outcome and context.

    ``allocation`` maps a resource to her amount (``cpu`` cores, ``memory`` bytes,
    ``disk:MAJ:MIN`` fraction of that disk's time); ``static_share`` her weighted static share
    of each resource, same units; ``unused`` the resources whose demand is negligible for her now or was a tick ago;
    ``capped`` the contended resources that are enforced. ``guaranteed_memory_bytes``
    is her weighted share of memory capacity; ``io_mix`` maps a disk to her observed (read,
    write) bytes/s; ``ceiling`` the limits her slice had before the governor (an admin's);
    ``memory_bound_bytes`` the most her memory.high may be raised to — her use plus her part of
    the memory actually free, shares still being claimed served first (None: no bound; see
    :func:`governor.control.loop._memory_bounds`, the room rule); ``memory_guard_bytes`` where
    memory is not contended, the memory.high that holds growth of hers not yet confirmed to
    her demand plus her part of the free memory (None: nothing to hold; see
    :func:`governor.control.loop._growth_guards`).
    """

    cpu_weight: float
    allocation: Mapping[Resource, float]
    static_share: Mapping[Resource, float]
    unused: frozenset[Resource]
    capped: frozenset[Resource]
    memory: MemoryState
    guaranteed_memory_bytes: int
    memory_demand_bytes: float
    disks: tuple[DiskPlan, ...] = ()
    io_mix: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    ceiling: LimitSet | None = None
    memory_bound_bytes: float | None = None
    memory_guard_bytes: float | None = None


@dataclass(frozen=True)
class Plan:
    """The limits planned for one user, and the reason for each knob (for ``explain``; empty
    when planned with ``explain=False``)."""

    limits: LimitSet
    reasons: Mapping[Knob, str]


class _Words(dict):
    """The reasons of a plan, worded: ``say`` sets a knob's reason, ``add`` appends to it.
    Each takes a ``str.format`` template and its values."""

    def say(self, knob: Knob, template: str, *values) -> None:
        self[knob] = template.format(*values)

    def add(self, knob: Knob, template: str, *values, default: str = "") -> None:
        self[knob] = self.get(knob, default) + template.format(*values)


class _Silent:
    """The reasons of a plan nobody reads now: nothing is formatted (the loop plans over arrays,
    :mod:`governor.control.planarrays`, and words a plan only when its report is read —
    :class:`Reasons`)."""

    def say(self, knob: Knob, template: str, *values) -> None:
        pass

    def add(self, knob: Knob, template: str, *values, default: str = "") -> None:
        pass


_SILENT = _Silent()


def plan_user(user: UserPlanInput, margin_bytes: int, high_step_bytes: int, explain: bool = True) -> Plan:
    """The limits for one user; see the module docstring for the rules. With ``explain`` each
    knob's reason is worded (``Plan.reasons``); without, the same limits and no words (a third
    of the planning's time)."""
    reasons = _Words() if explain else _SILENT
    cpu_weight = min(CPU_WEIGHT_MAX, max(CPU_WEIGHT_MIN, round(100 * user.cpu_weight)))
    reasons.say(CPU_WEIGHT, "100 × her CPU weight {:g}", user.cpu_weight)
    if CPU in user.capped:
        cores, why = _cap(user, CPU, "{:.3f} cores")
        cpu_max = CpuMax.for_cores(cores)
        reasons.say(CPU_MAX, "CPU contended: " + why, cores)
    else:
        cpu_max = CpuMax(None)
        reasons.say(CPU_MAX, "CPU not contended: no cap (work conservation)")
    low = _pages_down(min(user.guaranteed_memory_bytes, max(0.0, user.memory_demand_bytes)))
    reasons.say(MEMORY_LOW, "her guaranteed weighted share of memory, at most her demand")
    high = _memory_high(user, high_step_bytes, low, reasons)
    if high is None:
        memory_max = None
        reasons.say(MEMORY_MAX, "memory not contended: no cap")
    else:
        memory_max = safe_memory_max(high, user.memory.current_bytes, margin_bytes)
        reasons.say(MEMORY_MAX, "max(memory.high, what the kernel holds for her) + margin {} B: "
                    "our write never forces reclaim", margin_bytes)
    io_max = {}
    for disk in user.disks:
        if disk.resource not in user.capped:
            continue
        fraction, why = _cap(user, disk.resource, "{:.1%} of its time")
        io_max[disk.device] = _io_limit(disk, fraction, user.static_share.get(disk.resource, 0.0),
                                        user.io_mix.get(disk.device))
        reasons.say(Knob.io_max(disk.device), "disk contended: " + why + ", split by her read/write mix", fraction)
    if user.ceiling is not None and _limits_anything(user.ceiling):
        cpu_max, low, high, memory_max, io_max = _within_ceiling(cpu_max, low, high, memory_max, io_max,
                                                                 user.ceiling, reasons)
    return Plan(LimitSet(cpu_max, cpu_weight, low, high, memory_max, io_max), reasons if explain else {})


class Reasons(MutableMapping[Knob, str]):
    """A plan's reason per knob, worded when first read. The loop plans every user every tick;
    her reasons are read only when her report is (state.json, ``explain``, the journal line
    of a write), so they are worded then: ``explain()`` returns them. A reason set here (the
    loop's own, e.g. memory.max raised at the write) stands over the worded one."""

    __slots__ = ("_explain", "_words")

    def __init__(self, explain: Callable[[], Mapping[Knob, str]]):
        self._explain: Callable[[], Mapping[Knob, str]] | None = explain
        self._words: dict[Knob, str] | None = None  # worded (one a user a tick, most never read)

    def _worded(self) -> dict[Knob, str]:
        if self._explain is not None:
            explain, self._explain = self._explain, None
            self._words = {**explain(), **(self._words or {})}
        elif self._words is None:  # wording them failed once: none
            self._words = {}
        return self._words

    def __getitem__(self, knob: Knob) -> str:
        return self._worded()[knob]

    def __setitem__(self, knob: Knob, why: str) -> None:
        self._worded()[knob] = why

    def __delitem__(self, knob: Knob) -> None:
        del self._worded()[knob]

    def __iter__(self) -> Iterator[Knob]:
        return iter(self._worded())

    def __len__(self) -> int:
        return len(self._worded())

    def __repr__(self) -> str:
        return f"Reasons({self._worded()!r})"


def _cap(user: UserPlanInput, resource: Resource, amount: str) -> tuple[float, str]:
    """Her cap on a contended rate resource, and why — a template holding ``amount``, the
    template of the cap in its unit: her allocation, or where she does not use it at least her
    weighted static share (see the module docstring)."""
    allocation = user.allocation.get(resource, 0.0)
    share = user.static_share.get(resource, 0.0)
    if resource in user.unused and share > allocation:
        return share, "she does not use it: her weighted static share, " + amount + ", room to start"
    return allocation, "her DRF allocation, " + amount


def safe_memory_max(memory_max_bytes: int, current_bytes: int, margin_bytes: int) -> int:
    """A memory.max the kernel can take without reclaiming or killing: at least what it holds
    for her (``current_bytes``, memory.current) plus ``margin_bytes``, in whole pages."""
    return _pages_up(max(memory_max_bytes, current_bytes) + margin_bytes)


def _limits_anything(original: LimitSet) -> bool:
    """Whether the admin's limits hold anything to respect (most slices have none at all)."""
    return (original.cpu_max.quota_usec is not None or original.memory_high is not None
            or original.memory_max is not None or bool(original.memory_low) or bool(original.io_max))


def _lower(value: int | None, ceiling: int | None) -> int | None:
    """The lower of two limits, None being max."""
    return ceiling if value is None else value if ceiling is None else min(value, ceiling)


def _within_ceiling(cpu_max: CpuMax, memory_low: int | None, memory_high: int | None, memory_max: int | None,
                    io_max: Mapping[str, IoMax], original: LimitSet, reasons: _Words | _Silent
                    ) -> tuple[CpuMax, int | None, int | None, int | None, Mapping[str, IoMax]]:
    """Planned limits (a :class:`LimitSet`'s fields but cpu.weight, which has no ceiling) with
    every limit at most, and memory.low at least, the admin's ``original``."""
    # runs for every slice with limits of its own each tick, before her LimitSet is built:
    # no dataclasses.replace, no field-name lookups, no new IoMax where hers is unlimited (issue 16)
    theirs = original.cpu_max
    if theirs.quota_usec is not None and (cpu_max.quota_usec is None or theirs.cores < cpu_max.cores):
        cpu_max = theirs
        reasons.add(CPU_MAX, "; her own cpu.max {} is lower: kept", theirs)
    theirs = original.memory_high
    if theirs is not None and (memory_high is None or theirs < memory_high):
        memory_high = theirs
        reasons.add(MEMORY_HIGH, "; her own {} {} is lower: kept", MEMORY_HIGH, theirs)
    theirs = original.memory_max
    if theirs is not None and (memory_max is None or theirs < memory_max):
        memory_max = theirs
        reasons.add(MEMORY_MAX, "; her own {} {} is lower: kept", MEMORY_MAX, theirs)
    if (original.memory_low or 0) > (memory_low or 0):
        memory_low = original.memory_low
        reasons.add(MEMORY_LOW, "; her own memory.low {} is higher: kept", original.memory_low)
    if original.io_max:
        io_max = dict(io_max)
        for device, theirs in original.io_max.items():
            mine = io_max.get(device)
            if mine is None or mine.unlimited:
                if theirs.unlimited:
                    continue
                merged = theirs  # each of hers is max: the lower is theirs
            else:
                merged = IoMax(_lower(mine.rbps, theirs.rbps), _lower(mine.wbps, theirs.wbps),
                               _lower(mine.riops, theirs.riops), _lower(mine.wiops, theirs.wiops))
                if merged == mine:
                    continue
            io_max[device] = merged
            reasons.add(Knob.io_max(device), "; her own io.max {} is lower: kept", theirs,
                        default="disk not contended: no cap")
    return cpu_max, memory_low, memory_high, memory_max, io_max


def _memory_high(user: UserPlanInput, step: int, low: int, reasons: _Words | _Silent) -> int | None:
    """memory.high (bytes) while memory is contended; else her guard (``memory_guard_bytes``,
    at least what she holds) or None. ``low``: her memory.low."""
    if MEMORY not in user.capped:
        guard = user.memory_guard_bytes
        if guard is None:
            reasons.say(MEMORY_HIGH, "memory not contended: no cap (work conservation)")
            return None
        high = _pages_down(max(guard, user.memory.current_bytes))
        reasons.say(MEMORY_HIGH, "memory not contended, but she grew faster than in the interval before, "
                    "not yet confirmed: held to her demand plus her part of the free memory, at least what "
                    "she holds, until a reading confirms it")
        return high
    allocation = target = _pages_down(user.allocation.get(MEMORY, 0.0))
    why = "her DRF allocation, {0} B"
    if user.memory_bound_bytes is not None and user.memory_bound_bytes < target:
        target = _pages_down(user.memory_bound_bytes)
        why += ", bounded by her use plus her part of the free memory ({1} B): the others still hold the rest"
    # memory is a stock: a user held back elsewhere (her CPU, say: DRF's x of her whole vector)
    # keeps what she holds within her guaranteed share — never reclaimed below her memory.low
    kept = min(low, _pages_down(user.memory.current_bytes))
    if kept > target:
        target = kept
        why = "what she holds within her guaranteed share, {1} B (her DRF allocation, {0} B, is less)"
    was = user.memory.written_high_bytes
    start = max(user.memory.current_bytes, target) if was is None else was
    lowered = target if target >= start else max(target, _pages_up(start - step))  # step ≥ one page: progress
    if lowered > target:
        reasons.say(MEMORY_HIGH, "memory contended: moving down to " + why + " by at most {2} B per tick",
                    allocation, target, step)
    else:
        reasons.say(MEMORY_HIGH, "memory contended: " + why, allocation, target)
    return lowered


def _pages_down(n_bytes: float) -> int:
    """Whole pages, rounded down: what the kernel keeps of a memory.low/high value."""
    return int(n_bytes) // PAGE_SIZE * PAGE_SIZE


def _pages_up(n_bytes: float) -> int:
    return -(-int(n_bytes) // PAGE_SIZE) * PAGE_SIZE


def _io_limit(disk: DiskPlan, time_fraction: float, static_share: float, mix: tuple[float, float] | None) -> IoMax:
    read, write = mix if mix else (0.0, 0.0)
    busy = read / disk.read_bytes_per_s + write / disk.write_bytes_per_s
    if busy > 0:
        scale = time_fraction / busy
        rbps, wbps = read * scale, write * scale
    else:  # she did no I/O: either direction may take all of it (she is starting, or idle)
        rbps, wbps = time_fraction * disk.read_bytes_per_s, time_fraction * disk.write_bytes_per_s
    # each direction keeps a tenth of her static share of it (and never less than 1 KiB/s): a
    # zero limit would stall that direction entirely
    floor = 0.1 * static_share
    return IoMax(rbps=max(1024, round(rbps), round(floor * disk.read_bytes_per_s)),
                 wbps=max(1024, round(wbps), round(floor * disk.write_bytes_per_s)))


def changed_knobs(written: LimitSet | None, planned: LimitSet, hysteresis: float,
                  memory_floor_bytes: int = 0) -> list[Knob]:
    """Knobs of ``planned`` worth writing over ``written`` (None: nothing written yet — all of
    them): new, switching between a value and max, or moving by more than ``hysteresis`` (a
    fraction; :func:`governor.control.hysteresis.moved`). A lowered ``memory.max``/``memory.high``
    is always written (safety follows the plan exactly); so is a ``memory.max`` in force below
    ``memory_floor_bytes`` (her use has grown toward it), and any ``io.max`` disk added or removed.
    """
    if written is None:
        return planned.knobs()
    out = []
    if moved(written.cpu_max.quota_usec, planned.cpu_max.quota_usec, hysteresis) or \
            written.cpu_max.period_usec != planned.cpu_max.period_usec:
        out.append(CPU_MAX)
    if moved(written.cpu_weight, planned.cpu_weight, hysteresis):
        out.append(CPU_WEIGHT)
    # the fields themselves, not LimitSet.value: this runs for every user every tick (issue 16)
    if moved(written.memory_low, planned.memory_low, hysteresis):
        out.append(MEMORY_LOW)
    for knob, old, new in ((MEMORY_HIGH, written.memory_high, planned.memory_high),
                           (MEMORY_MAX, written.memory_max, planned.memory_max)):
        lowered = old is not None and new is not None and new < old
        too_tight = knob is MEMORY_MAX and old is not None and old < memory_floor_bytes and new != old
        if lowered or too_tight or moved(old, new, hysteresis):
            out.append(knob)
    if not written.io_max and not planned.io_max:
        return out
    for device in sorted(written.io_max.keys() | planned.io_max.keys()):
        old, new = written.io_max.get(device), planned.io_max.get(device)
        if old is None or new is None or moved(old.rbps, new.rbps, hysteresis) or moved(old.wbps, new.wbps, hysteresis):
            out.append(Knob.io_max(device))
    return out
