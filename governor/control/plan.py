"""Limit planning: a DRF allocation → the cgroup limits to write (pure: no I/O, no clock).

Rules (the governor issue; kernel facts from Documentation/admin-guide/cgroup-v2.rst):

* **Work conservation.** A resource that is not contended (total demand fits its capacity)
  caps nobody: ``cpu.max max``, ``memory.high``/``memory.max`` ``max``, no ``io.max``.
* **CPU.** Contended: ``cpu.max`` = her allocation in cores (quota clamped to the kernel's 1 ms).
  Always: ``cpu.weight`` proportional to her CPU weight (weight 1 → 100, clamped 1–10000), so
  the kernel's work-conserving scheduler also leans her way.
* **Memory — never an OOM kill.** ``memory.low`` = her guaranteed share (her weight's fraction
  of memory capacity, at most what she demands). Contended: ``memory.high`` = her allocation,
  but lowered by at most ``high_step_bytes`` per tick; ``memory.max`` = the larger of
  ``memory.high`` and her current use, plus ``margin_bytes`` — never below use + margin, so a
  write of ours never makes the kernel reclaim-or-kill. Memory values are whole pages (the
  kernel keeps pages): low and high rounded down, max rounded up.
* **Disks.** A disk is one resource measured in *fraction of the disk's time*: reading at
  ``r`` B/s and writing at ``w`` B/s uses ``r/R + w/W`` of a disk that does ``R`` and ``W``.
  Contended: ``io.max`` splits her allocation by her observed read/write mix (evenly when she
  did no I/O), in bytes/s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cgroups.limits import CPU_WEIGHT_MAX, CPU_WEIGHT_MIN, PAGE_SIZE, CpuMax, IoMax
from governor.control.hysteresis import moved
from governor.control.resources import CPU, MEMORY, Resource
from governor.enforce.model import (
    CPU_MAX, CPU_WEIGHT, MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, Knob, LimitSet,
)

__all__ = ["DiskPlan", "MemoryState", "Plan", "UserPlanInput", "changed_knobs", "plan_user"]


@dataclass(frozen=True)
class DiskPlan:
    """One disk as the planner sees it: bandwidths (bytes/s) and whether it is contended."""

    device: str  # "MAJ:MIN"
    resource: Resource  # disk:MAJ:MIN
    read_bytes_per_s: float
    write_bytes_per_s: float
    contended: bool


@dataclass(frozen=True)
class MemoryState:
    """What the planner must know of her memory right now (bytes; None = max)."""

    current_bytes: int
    written_high_bytes: int | None  # memory.high we last wrote (None: max / never written)


@dataclass(frozen=True)
class UserPlanInput:
    """One user's DRF outcome and context.

    ``allocation`` maps a resource to her amount: ``cpu`` in cores, ``memory`` in bytes, and
    ``disk:MAJ:MIN`` in fraction of that disk's time. ``guaranteed_memory_bytes`` is her
    weighted share of memory capacity; ``io_mix`` maps a disk to her observed (read, write)
    bytes/s.
    """

    cpu_weight: float
    allocation: Mapping[Resource, float]
    cpu_contended: bool
    memory_contended: bool
    memory: MemoryState
    guaranteed_memory_bytes: int
    memory_demand_bytes: float
    disks: tuple[DiskPlan, ...] = ()
    io_mix: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    """The limits planned for one user, and the reason for each knob (for ``explain``)."""

    limits: LimitSet
    reasons: Mapping[Knob, str]


def plan_user(user: UserPlanInput, margin_bytes: int, high_step_bytes: int) -> Plan:
    """The limits for one user; see the module docstring for the rules."""
    reasons: dict[Knob, str] = {}
    cpu_weight = min(CPU_WEIGHT_MAX, max(CPU_WEIGHT_MIN, round(100 * user.cpu_weight)))
    reasons[CPU_WEIGHT] = f"100 × her CPU weight {user.cpu_weight:g}"
    if user.cpu_contended:
        cores = user.allocation.get(CPU, 0.0)
        cpu_max = CpuMax.for_cores(cores)
        reasons[CPU_MAX] = f"CPU contended: her DRF allocation, {cores:.3f} cores"
    else:
        cpu_max = CpuMax(None)
        reasons[CPU_MAX] = "CPU not contended: no cap (work conservation)"
    low = _pages_down(min(user.guaranteed_memory_bytes, max(0.0, user.memory_demand_bytes)))
    reasons[MEMORY_LOW] = "her guaranteed weighted share of memory, at most her demand"
    high, high_reason = _memory_high(user, high_step_bytes)
    reasons[MEMORY_HIGH] = high_reason
    if high is None:
        memory_max = None
        reasons[MEMORY_MAX] = "memory not contended: no cap"
    else:
        memory_max = _pages_up(max(high, user.memory.current_bytes) + margin_bytes)
        reasons[MEMORY_MAX] = f"max(memory.high, current use) + margin {margin_bytes} B: our write never forces reclaim"
    io_max = {}
    for disk in user.disks:
        if not disk.contended:
            continue
        io_max[disk.device] = _io_limit(disk, user.allocation.get(disk.resource, 0.0), user.io_mix.get(disk.device))
        reasons[Knob.io_max(disk.device)] = "disk contended: her DRF share of disk time, split by her read/write mix"
    return Plan(LimitSet(cpu_max, cpu_weight, low, high, memory_max, io_max), reasons)


def _memory_high(user: UserPlanInput, step: int) -> tuple[int | None, str]:
    if not user.memory_contended:
        return None, "memory not contended: no cap (work conservation)"
    target = _pages_down(user.allocation.get(MEMORY, 0.0))
    was = user.memory.written_high_bytes
    start = max(user.memory.current_bytes, target) if was is None else was
    if target >= start:
        return target, f"memory contended: her DRF allocation, {target} B"
    lowered = max(target, _pages_up(start - step))  # step ≥ one page (policy): still progress
    if lowered > target:
        return lowered, f"memory contended: moving down to her allocation {target} B by at most {step} B per tick"
    return target, f"memory contended: her DRF allocation, {target} B"


def _pages_down(n_bytes: float) -> int:
    """Whole pages, rounded down: what the kernel keeps of a memory.low/high value."""
    return int(n_bytes) // PAGE_SIZE * PAGE_SIZE


def _pages_up(n_bytes: float) -> int:
    return -(-int(n_bytes) // PAGE_SIZE) * PAGE_SIZE


def _io_limit(disk: DiskPlan, time_fraction: float, mix: tuple[float, float] | None) -> IoMax:
    read, write = mix if mix else (0.0, 0.0)
    busy = read / disk.read_bytes_per_s + write / disk.write_bytes_per_s
    if busy > 0:
        scale = time_fraction / busy
        rbps, wbps = read * scale, write * scale
    else:
        rbps, wbps = time_fraction / 2 * disk.read_bytes_per_s, time_fraction / 2 * disk.write_bytes_per_s
    # a zero limit would stall her I/O entirely: keep at least 1 KiB/s on each side
    return IoMax(rbps=max(1024, round(rbps)), wbps=max(1024, round(wbps)))


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
    for knob in (MEMORY_LOW, MEMORY_HIGH, MEMORY_MAX):
        old, new = written.value(knob), planned.value(knob)
        lowered = old is not None and new is not None and new < old and knob != MEMORY_LOW
        too_tight = knob == MEMORY_MAX and old is not None and old < memory_floor_bytes and new != old
        if lowered or too_tight or moved(old, new, hysteresis):
            out.append(knob)
    for device in sorted(set(written.io_max) | set(planned.io_max)):
        old, new = written.io_max.get(device), planned.io_max.get(device)
        if old is None or new is None or moved(old.rbps, new.rbps, hysteresis) or moved(old.wbps, new.wbps, hysteresis):
            out.append(Knob.io_max(device))
    return out
