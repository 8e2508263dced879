"""The enforcement protocol: every backend sets the same knobs on a user's slice.

Knobs are named after the cgroup v2 files they end up in (cpu.max, cpu.weight, memory.low,
memory.high, memory.max, io.max; Documentation/admin-guide/cgroup-v2.rst). ``None`` means
``max``. Backends decide *how* a value reaches the kernel (a file write, a systemd property,
nothing at all); the planner decides *what* to set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from cgroups import Cgroup, CgroupError, ControllerMissing, CpuMax, IoMax
from cgroups.limits import CPU_WEIGHT_DEFAULT

__all__ = ["Backend", "EnforceError", "LimitSet", "MemoryKnob", "Target", "TargetGone", "KERNEL_DEFAULTS", "apply_limit_set", "read_limit_set"]

MemoryKnob = Literal["low", "high", "max"]


class EnforceError(Exception):
    """A backend could not apply a setting; the message names the unit, knob and cause."""


class TargetGone(EnforceError):
    """The user's slice no longer exists (she logged out): drop her, do not retry."""


@dataclass(frozen=True)
class Target:
    """A governed user's slice: her uid and cgroup (``…/user.slice/user-UID.slice``)."""

    uid: int
    cgroup: Cgroup

    @property
    def unit(self) -> str:
        """The systemd unit name of the slice."""
        return self.cgroup.path.name


@dataclass(frozen=True)
class LimitSet:
    """Every knob the governor manages, as the kernel has it now (None = max)."""

    cpu_max: CpuMax
    cpu_weight: int
    memory_low: int | None
    memory_high: int | None
    memory_max: int | None
    io_max: dict[str, IoMax] = field(default_factory=dict)


@runtime_checkable
class Backend(Protocol):
    """How settings reach the kernel. Methods raise :class:`EnforceError` (or
    :class:`TargetGone`); values were validated by the caller's types."""

    name: str

    def read(self, target: Target) -> LimitSet: ...

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None: ...

    def set_cpu_weight(self, target: Target, weight: int) -> None: ...

    def set_memory(self, target: Target, knob: MemoryKnob, limit_bytes: int | None) -> None: ...

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None: ...


#: What each knob is when its controller is not enabled on the cgroup: no limit at all.
#: (systemd enables a slice's controllers lazily, when a unit first asks for them.)
KERNEL_DEFAULTS = LimitSet(CpuMax(None), CPU_WEIGHT_DEFAULT, 0, None, None, {})


def read_limit_set(cg: Cgroup) -> LimitSet:
    """Read every managed knob from ``cg``'s files (the truth, whichever backend wrote them).

    A knob whose controller is not enabled reads as its kernel default (it limits nothing).

    Raises:
        TargetGone: the cgroup vanished.
        EnforceError: a file is unreadable or malformed.
    """
    values = []
    for reader, default in ((cg.cpu_max, KERNEL_DEFAULTS.cpu_max), (cg.cpu_weight, KERNEL_DEFAULTS.cpu_weight),
                            (cg.memory_low, 0), (cg.memory_high, None), (cg.memory_max, None), (cg.io_max, {})):
        try:
            values.append(reader())
        except ControllerMissing:
            values.append(default)
        except CgroupError as exc:
            raise _enforce_error(exc) from None
    return LimitSet(*values)


def _enforce_error(exc: CgroupError) -> EnforceError:
    from cgroups import CgroupGone

    return TargetGone(str(exc)) if isinstance(exc, CgroupGone) else EnforceError(str(exc))


def apply_limit_set(backend: Backend, target: Target, limits: LimitSet) -> None:
    """Make every managed knob of ``target`` equal ``limits`` (used to restore snapshots).

    Disks limited now but absent from ``limits.io_max`` are set back to max.
    """
    backend.set_cpu_max(target, limits.cpu_max)
    backend.set_cpu_weight(target, limits.cpu_weight)
    # memory.max first when raising and last when lowering would matter only below use;
    # a snapshot was valid when taken, so restore in the kernel's own order: low, high, max.
    backend.set_memory(target, "low", limits.memory_low)
    backend.set_memory(target, "high", limits.memory_high)
    backend.set_memory(target, "max", limits.memory_max)
    current = backend.read(target).io_max
    for device in sorted(set(current) | set(limits.io_max)):
        backend.set_io_max(target, device, limits.io_max.get(device, IoMax()))
