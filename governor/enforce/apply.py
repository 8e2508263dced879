"""Writing knobs through any backend: one knob, a whole limit set, a restore of originals.

Pure given its backend: the only path from a :class:`~governor.enforce.model.Knob` to a
backend call, used by the control loop, by restore at stop, and by ``drfgov restore``.
"""

from __future__ import annotations

from collections.abc import Mapping

from governor.enforce.model import (
    CPU_MAX, CPU_WEIGHT, MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, Backend, EnforceError, Knob, LimitSet, Target,
    TargetGone,
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


def apply_limit_set(backend: Backend, target: Target, limits: LimitSet) -> None:
    """Make every managed knob of ``target`` equal ``limits`` (used to restore originals).

    Disks limited now but absent from ``limits.io_max`` are set back to max. Memory goes in
    the kernel's own order, low, high, max.

    Raises:
        EnforceError: as :func:`write_knob`.
    """
    for knob in (CPU_MAX, CPU_WEIGHT, MEMORY_LOW, MEMORY_HIGH, MEMORY_MAX):
        write_knob(backend, target, knob, limits)
    current = backend.read(target).io_max
    for device in sorted(set(current) | set(limits.io_max)):
        write_knob(backend, target, Knob.io_max(device), limits)


def restore_originals(backend: Backend, originals: Mapping[int, tuple[Target, LimitSet]]
                      ) -> tuple[list[str], dict[int, str]]:
    """Put every slice's original limits back, trying them all.

    Returns the units restored and, per uid that failed, the error. A slice that is gone needs
    nothing: its limits went with it.
    """
    restored, failed = [], {}
    for uid, (target, limits) in sorted(originals.items()):
        try:
            apply_limit_set(backend, target, limits)
            restored.append(target.unit)
        except TargetGone:
            pass
        except EnforceError as exc:
            failed[uid] = f"{target.unit}: {exc}"
    return restored, failed
