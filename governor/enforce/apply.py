"""Writing knobs through any backend: one knob, a whole limit set, a restore of originals.

Pure given its backend: the only path from a :class:`~governor.enforce.model.Knob` to a
backend call, used by the control loop, by restore at stop, and by ``drfgov restore``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from cgroups.limits import PAGE_SIZE
from governor.enforce.model import (
    CPU_MAX, CPU_WEIGHT, MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, Backend, DiskGone, EnforceError, Knob, LimitSet,
    Target, TargetGone,
)

__all__ = ["apply_limit_set", "restore_originals", "write_knob"]


def write_knob(backend: Backend, target: Target, knob: Knob, limits: LimitSet) -> None:
    """Set ``knob`` of ``target`` to its value in ``limits`` (an io.max disk absent there: max).

    Raises:
        EnforceError: the backend could not (TargetGone: the slice vanished).
    """
    if knob.device is not None:
        backend.set_io_max(target, knob.device, limits.value(knob))
    elif knob == CPU_MAX:
        backend.set_cpu_max(target, limits.cpu_max)
    elif knob == CPU_WEIGHT:
        backend.set_cpu_weight(target, limits.cpu_weight)
    else:
        backend.set_memory(target, knob, limits.value(knob))


def apply_limit_set(backend: Backend, target: Target, limits: LimitSet, margin_bytes: int = 0) -> str | None:
    """Make every managed knob of ``target`` equal ``limits`` (used to restore originals): an io.max
    of a disk no longer on the host (:class:`DiskGone`) is skipped, its limit gone with it.

    Disks limited now but absent from ``limits.io_max`` are set back to max. Memory goes in
    the kernel's own order, low, high, max — except that an original memory.max below what the
    kernel holds for her now (memory.current) is not written: that write would make the kernel
    reclaim and then OOM-kill inside her slice. Then memory.high takes the original memory.max
    (the kernel reclaims and throttles her toward it, and kills nobody), memory.max is her use
    plus ``margin_bytes``, and the returned note says so (for the log). An original at or
    above her use, read just before memory.high and memory.max are written, is written as it
    is: the kernel reclaims nothing for it (the governor's own memory.max never lets her past
    it while she holds less: :meth:`governor.control.loop.Governor._fresh_memory_max`).

    Raises:
        EnforceError: as :func:`write_knob`.
    """
    for knob in (CPU_MAX, CPU_WEIGHT, MEMORY_LOW):
        write_knob(backend, target, knob, limits)
    note = None
    memory_max = limits.memory_max
    if memory_max is not None:  # what she holds read just before memory.high and memory.max are written
        current = _or_none(lambda: backend.memory_current(target))
        if current is not None and memory_max < current:
            high = memory_max if limits.memory_high is None else min(limits.memory_high, memory_max)
            safe = -(-(current + margin_bytes) // PAGE_SIZE) * PAGE_SIZE
            note = (f"{target.unit}: original memory.max {memory_max} B is below what the kernel holds for her "
                    f"({current} B): memory.high set to {high} B (reclaimed toward it, no OOM kill) "
                    f"and memory.max to her use plus the margin, {safe} B")
            limits = replace(limits, memory_high=high, memory_max=safe)
    for knob in (MEMORY_HIGH, MEMORY_MAX):
        write_knob(backend, target, knob, limits)
    in_force = _or_none(lambda: backend.read(target))
    current_io = in_force.io_max if in_force is not None else {}
    for device in sorted(set(current_io) | set(limits.io_max)):
        try:
            write_knob(backend, target, Knob.io_max(device), limits)
        except DiskGone:
            pass  # unplugged since: its limit went with it, and no restore would ever get past it
            # (the cgroup audit of 2026-11-26: a snapshot kept it and failed at every start)
    return note


def _or_none(read):
    """A read of a slice that may not be running (restore within :meth:`Backend.releasing`)."""
    try:
        return read()
    except TargetGone:
        return None


def restore_originals(backend: Backend, originals: Mapping[int, tuple[Target, LimitSet]], margin_bytes: int = 0,
                      notes: list[str] | None = None, on_progress: Callable[[], object] | None = None
                      ) -> tuple[list[str], dict[int, str]]:
    """Put every slice's original limits back (:func:`apply_limit_set`), trying them all.

    Returns the units restored and, per uid that failed, the error; what was written instead
    of an original memory.max below use is appended to ``notes``; ``on_progress`` is called
    after each slice (the daemon's watchdog: a restore of many slices through slow writes
    outlasted ``WatchdogSec``; the service audit of 2026-11-27). Writes go through
    :meth:`Backend.releasing`: where limits outlive a slice (systemd's drop-ins) a logged-out
    user's originals are put back too; where they do not, a gone slice needs nothing.
    """
    restored, failed = [], {}
    with backend.releasing():
        for uid, (target, limits) in sorted(originals.items()):
            try:
                note = apply_limit_set(backend, target, limits, margin_bytes)
                if note and notes is not None:
                    notes.append(note)
                restored.append(target.unit)
            except TargetGone:
                pass
            except EnforceError as exc:
                failed[uid] = f"{target.unit}: {exc}"
            if on_progress is not None:
                on_progress()
    return restored, failed
