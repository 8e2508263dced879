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
from dataclasses import dataclass, field, replace

from cgroups import CpuMax, IoMax
from cgroups.limits import CPU_WEIGHT_MAX, CPU_WEIGHT_MIN, PAGE_SIZE

__all__ = ["DiskPlan", "Limits", "MemoryState", "UserPlanInput", "changed_knobs", "in_force", "plan_user"]


@dataclass(frozen=True)
class DiskPlan:
    """One disk as the planner sees it: bandwidths (bytes/s) and whether it is contended."""

    device: str  # "MAJ:MIN"
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

    ``allocation`` maps resource kind to amount: ``cpu`` in cores, ``memory`` in bytes, and
    ``disk:MAJ:MIN`` in fraction of that disk's time. ``guaranteed_memory_bytes`` is her
    weighted share of memory capacity; ``io_mix`` maps a disk to her observed (read, write)
    bytes/s.
    """

    cpu_weight: float
    allocation: Mapping[str, float]
    cpu_contended: bool
    memory_contended: bool
    memory: MemoryState
    guaranteed_memory_bytes: int
    memory_demand_bytes: float
    disks: tuple[DiskPlan, ...] = ()
    io_mix: Mapping[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class Limits:
    """Planned values of every knob (None = max), with a reason per knob for ``explain``."""

    cpu_max: CpuMax
    cpu_weight: int
    memory_low: int | None
    memory_high: int | None
    memory_max: int | None
    io_max: dict[str, IoMax]
    reasons: dict[str, str] = field(default_factory=dict, compare=False)


def plan_user(user: UserPlanInput, margin_bytes: int, high_step_bytes: int) -> Limits:
    """The limits for one user; see the module docstring for the rules."""
    reasons: dict[str, str] = {}
    cpu_weight = min(CPU_WEIGHT_MAX, max(CPU_WEIGHT_MIN, round(100 * user.cpu_weight)))
    reasons["cpu.weight"] = f"100 × her CPU weight {user.cpu_weight:g}"
    if user.cpu_contended:
        cores = user.allocation.get("cpu", 0.0)
        cpu_max = CpuMax.for_cores(cores)
        reasons["cpu.max"] = f"CPU contended: her DRF allocation, {cores:.3f} cores"
    else:
        cpu_max = CpuMax(None)
        reasons["cpu.max"] = "CPU not contended: no cap (work conservation)"
    low = _pages_down(min(user.guaranteed_memory_bytes, max(0.0, user.memory_demand_bytes)))
    reasons["memory.low"] = "her guaranteed weighted share of memory, at most her demand"
    high, high_reason = _memory_high(user, high_step_bytes)
    reasons["memory.high"] = high_reason
    if high is None:
        memory_max = None
        reasons["memory.max"] = "memory not contended: no cap"
    else:
        memory_max = _pages_up(max(high, user.memory.current_bytes) + margin_bytes)
        reasons["memory.max"] = f"max(memory.high, current use) + margin {margin_bytes} B: our write never forces reclaim"
    io_max = {}
    for disk in user.disks:
        if not disk.contended:
            continue
        io_max[disk.device] = _io_limit(disk, user.allocation.get(f"disk:{disk.device}", 0.0), user.io_mix.get(disk.device))
        reasons[f"io.max {disk.device}"] = "disk contended: her DRF share of disk time, split by her read/write mix"
    return Limits(cpu_max, cpu_weight, low, high, memory_max, io_max, reasons)


def _memory_high(user: UserPlanInput, step: int) -> tuple[int | None, str]:
    if not user.memory_contended:
        return None, "memory not contended: no cap (work conservation)"
    target = _pages_down(user.allocation.get("memory", 0.0))
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


def changed_knobs(written: Limits | None, planned: Limits, hysteresis: float, memory_floor_bytes: int = 0) -> list[str]:
    """Knobs of ``planned`` worth writing: new, switching between a value and max, or moving by
    more than ``hysteresis`` (a fraction). A lowered ``memory.max``/``memory.high`` is always
    written (safety follows the plan exactly); so is a ``memory.max`` in force below
    ``memory_floor_bytes`` (her use has grown toward it), and any ``io.max`` disk added or removed.
    """
    if written is None:
        return ["cpu.max", "cpu.weight", "memory.low", "memory.high", "memory.max"] + \
            [f"io.max {d}" for d in sorted(planned.io_max)]
    out = []
    if _moved(written.cpu_max.quota_usec, planned.cpu_max.quota_usec, hysteresis) or \
            written.cpu_max.period_usec != planned.cpu_max.period_usec:
        out.append("cpu.max")
    if _moved(written.cpu_weight, planned.cpu_weight, hysteresis):
        out.append("cpu.weight")
    for knob in ("memory_low", "memory_high", "memory_max"):
        old, new = getattr(written, knob), getattr(planned, knob)
        lowered = old is not None and new is not None and new < old and knob != "memory_low"
        too_tight = knob == "memory_max" and old is not None and old < memory_floor_bytes and new != old
        if lowered or too_tight or _moved(old, new, hysteresis):
            out.append(knob.replace("_", "."))
    for device in sorted(set(written.io_max) | set(planned.io_max)):
        old, new = written.io_max.get(device), planned.io_max.get(device)
        if old is None or new is None or _moved(old.rbps, new.rbps, hysteresis) or _moved(old.wbps, new.wbps, hysteresis):
            out.append(f"io.max {device}")
    return out


def in_force(before: Limits, planned: Limits, written_knobs: list[str]) -> Limits:
    """What the kernel holds after writing ``written_knobs`` of ``planned`` over ``before``:
    knobs not written keep their values (inside the hysteresis band the plan may differ)."""
    values = {}
    io_max = dict(before.io_max)
    for knob in written_knobs:
        if knob.startswith("io.max "):
            device = knob.split(" ", 1)[1]
            if device in planned.io_max:
                io_max[device] = planned.io_max[device]
            else:
                io_max.pop(device, None)
        else:
            attr = knob.replace(".", "_")
            values[attr] = getattr(planned, attr)
    return replace(before, **values, io_max=io_max, reasons=planned.reasons)


def _moved(old: float | None, new: float | None, hysteresis: float) -> bool:
    if old is None or new is None:
        return old is not new
    if old == new:
        return False
    return abs(new - old) > hysteresis * max(abs(old), 1)
