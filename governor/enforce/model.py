"""What enforcement is about, as values (pure): knobs, limit sets, targets, the backend protocol.

Knobs are named after the cgroup v2 files they end up in (Documentation/admin-guide/cgroup-v2.rst,
"CPU", "Memory", "IO"): ``cpu.max``, ``cpu.weight``, ``memory.low``, ``memory.high``,
``memory.max`` and ``io.max`` per whole disk. ``None`` means ``max``. Backends decide *how* a
value reaches the kernel (a file write, a systemd property, nothing at all); the planner
decides *what* to set. The control loop and the views import this module; it does no I/O.

A :class:`LimitSet`'s JSON (:meth:`LimitSet.to_json`) is in the kernel's own words — keys are the
file names, values what the file would read (``cpu.max`` ``"$QUOTA $PERIOD"``; memory in bytes,
null for ``max``; ``io.max`` per ``"MAJ:MIN"`` its ``rbps=… wbps=… riops=… wiops=…`` line) — so
state.json, the restore snapshot and ``drfgov shares --json`` compare with the files directly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from cgroups.limits import CPU_WEIGHT_DEFAULT, CpuMax, IoMax, check_bytes, check_cpu_weight
from cgroups.parse import int_or_max

if TYPE_CHECKING:
    from cgroups.cgroup import Cgroup
    from cgroups_v1.mixed import MixedSlice
    from cgroups_v1.slice import V1Slice

__all__ = [
    "BACKENDS", "CPU_MAX", "CPU_WEIGHT", "KERNEL_DEFAULTS", "MEMORY_HIGH", "MEMORY_LOW", "MEMORY_MAX", "SCALAR_KNOBS",
    "Backend", "DiskGone", "EnforceError", "Knob", "LimitSet", "Target", "TargetGone",
]

#: The backends a policy may name (``auto`` picks systemd or cgroupfs; see :mod:`governor.enforce`).
BACKENDS = ("auto", "systemd", "cgroupfs", "dry-run")


class EnforceError(Exception):
    """A backend could not apply a setting; the message names the unit, knob and cause."""


class TargetGone(EnforceError):
    """The user's slice no longer exists (she logged out): drop her, do not retry."""


class DiskGone(EnforceError):
    """An io.max write the kernel refused because its disk is no longer on the host (unplugged):
    its limit went with it."""


class Knob:
    """One managed setting: a cgroup v2 file, and for ``io.max`` the whole disk it limits.

    ``str(knob)`` is ``cpu.max`` or ``io.max 8:0`` (state.json's ``written`` and ``reasons``).

    Raises:
        ValueError: an unmanaged file, or ``io.max`` without a ``MAJ:MIN`` device.
    """

    __slots__ = ("file", "device", "name", "_hash")
    FILES = ("cpu.max", "cpu.weight", "memory.low", "memory.high", "memory.max", "io.max")

    def __init__(self, file: str, device: str | None = None):
        if file not in self.FILES:
            raise ValueError(f"unmanaged knob {file!r}; expected one of: {', '.join(self.FILES)}")
        if (file == "io.max") != (device is not None):
            raise ValueError(f"{file}: {'a device MAJ:MIN is needed' if device is None else 'takes no device'}")
        self.file, self.device = file, device
        self.name = file if device is None else f"{file} {device}"
        self._hash = hash(self.name)

    @classmethod
    def io_max(cls, device: str) -> Knob:
        """``io.max`` of whole disk ``MAJ:MIN``."""
        return cls("io.max", device)

    @classmethod
    def parse(cls, text: str) -> Knob:
        """The knob named ``text`` (``cpu.max``, ``io.max 8:0``). Raises ValueError."""
        file, _, device = str(text).partition(" ")
        return cls(file, device or None)

    @property
    def is_memory(self) -> bool:
        return self.file.startswith("memory.")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Knob) and other.name == self.name

    def __hash__(self) -> int:
        return self._hash

    def __lt__(self, other: Knob) -> bool:
        return self.name < other.name

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Knob({self.name!r})"


CPU_MAX, CPU_WEIGHT = Knob("cpu.max"), Knob("cpu.weight")
MEMORY_LOW, MEMORY_HIGH, MEMORY_MAX = Knob("memory.low"), Knob("memory.high"), Knob("memory.max")
SCALAR_KNOBS = (CPU_MAX, CPU_WEIGHT, MEMORY_LOW, MEMORY_HIGH, MEMORY_MAX)
_ATTRIBUTE = {"cpu.max": "cpu_max", "cpu.weight": "cpu_weight", "memory.low": "memory_low",
              "memory.high": "memory_high", "memory.max": "memory_max"}
_NO_IO_LIMIT = IoMax()


@dataclass(frozen=True)
class LimitSet:
    """A value for every managed knob (None = max): what the kernel holds, or what a plan wants.

    ``io_max`` maps a whole disk ``MAJ:MIN`` to its limits; a disk absent from it is unlimited.
    """

    cpu_max: CpuMax
    cpu_weight: int
    memory_low: int | None
    memory_high: int | None
    memory_max: int | None
    io_max: Mapping[str, IoMax] = field(default_factory=dict)

    def knobs(self) -> list[Knob]:
        """Every knob this set gives a value: the five scalar knobs, then io.max per disk."""
        return [*SCALAR_KNOBS, *(Knob.io_max(d) for d in sorted(self.io_max))]

    def value(self, knob: Knob) -> CpuMax | IoMax | int | None:
        """``knob``'s value here; an io.max disk absent from :attr:`io_max` is ``IoMax()`` (max)."""
        if knob.device is not None:
            return self.io_max.get(knob.device, _NO_IO_LIMIT)
        return getattr(self, _ATTRIBUTE[knob.file])

    def text(self, knob: Knob) -> str:
        """``knob``'s value as its kernel file shows it (``150000 100000``, ``max``,
        ``rbps=1048576 wbps=max riops=max wiops=max``): the logs' and the journal's form."""
        value = self.value(knob)
        if value is None:
            return "max"
        return str(value) if isinstance(value, int) else value.render()

    def with_values_of(self, other: LimitSet, knobs: Iterable[Knob]) -> LimitSet:
        """This set with ``knobs`` taken from ``other`` (an io.max disk ``other`` lacks is dropped):
        what the kernel holds after writing those knobs of ``other`` over this."""
        values: dict[str, object] = {}
        io_max = dict(self.io_max)
        for knob in knobs:
            if knob.device is None:
                values[_ATTRIBUTE[knob.file]] = getattr(other, _ATTRIBUTE[knob.file])
            elif knob.device in other.io_max:
                io_max[knob.device] = other.io_max[knob.device]
            else:
                io_max.pop(knob.device, None)
        return replace(self, **values, io_max=io_max)

    def to_json(self) -> dict:
        """The kernel-file form (see the module docstring)."""
        cpu = self.cpu_max
        return {
            "cpu.max": f"{'max' if cpu.quota_usec is None else cpu.quota_usec} {cpu.period_usec}",
            "cpu.weight": self.cpu_weight,
            "memory.low": self.memory_low,
            "memory.high": self.memory_high,
            "memory.max": self.memory_max,
            "io.max": {device: io.render() for device, io in sorted(self.io_max.items())},
        }

    @classmethod
    def from_json(cls, doc: Mapping) -> LimitSet:
        """Inverse of :meth:`to_json`, with every value validated as the kernel would.

        Raises:
            ValueError: a missing key, a malformed value, or one the kernel would refuse
                (:class:`cgroups.limits.InvalidLimit` is a ValueError).
        """
        try:
            quota, period = str(doc["cpu.max"]).split()
            cpu_max = CpuMax(int_or_max(quota), int(period)).validate()
            io_max = {}
            for device, line in dict(doc["io.max"]).items():
                fields = dict(part.split("=", 1) for part in str(line).split())
                io_max[str(device)] = IoMax(**{k: int_or_max(v) for k, v in fields.items()}).validate()
            weight = doc["cpu.weight"]
            if isinstance(weight, bool) or not isinstance(weight, int):
                raise ValueError(f"cpu.weight: expected a whole number, got {weight!r}")
            limits = cls(cpu_max, check_cpu_weight(weight), *(check_bytes(knob, doc[knob])
                                                               for knob in ("memory.low", "memory.high", "memory.max")),
                         io_max)
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"malformed limits: {exc!r}") from None
        from cgroups.limits import check_device

        for device in limits.io_max:
            check_device(device)
        return limits


#: What each knob is when its controller is not enabled on the cgroup: no limit at all.
#: (systemd enables a slice's controllers lazily, when a unit first asks for them.)
KERNEL_DEFAULTS = LimitSet(CpuMax(None), CPU_WEIGHT_DEFAULT, 0, None, None, {})


@dataclass(frozen=True)
class Target:
    """A governed user's slice: her uid and cgroup (``…/user.slice/user-UID.slice``): a v2
    :class:`~cgroups.cgroup.Cgroup`, on cgroup v1 hosts a :class:`~cgroups_v1.slice.V1Slice`, on
    mixed hosts a :class:`~cgroups_v1.mixed.MixedSlice` (all have ``path`` and ``exists()``; each
    backend knows which it takes)."""

    uid: int
    cgroup: Cgroup | V1Slice | MixedSlice

    @property
    def unit(self) -> str:
        """The systemd unit name of the slice."""
        return self.cgroup.path.name


@runtime_checkable
class Backend(Protocol):
    """How settings reach the kernel. Every method raises only :class:`EnforceError` (or
    :class:`TargetGone`): a value the kernel would refuse is an EnforceError too."""

    name: str
    #: Whether a slice's limits outlive its cgroup (systemd keeps them in the unit's drop-ins, and
    #: a slice made again at her next login has them); False where they die with it (cgroupfs).
    limits_outlive_cgroup: bool
    #: Whether ``memory.high`` throttles (cgroup v2, and v2 memory on a mixed host); False on
    #: v1, which has no such limit: only ``memory.max`` (``memory.limit_in_bytes``) is written
    #: there, a hard limit whose breach is reclaim and an OOM kill (Documentation/admin-guide/
    #: cgroup-v2.rst, "memory.high"; governor.enforce.v1map).
    memory_high_throttles: bool

    def read(self, target: Target) -> LimitSet: ...

    def memory_current(self, target: Target) -> int | None:
        """What the kernel holds for her now (memory.current, bytes), read afresh; None when
        the memory controller is not enabled on her slice."""
        ...

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None: ...

    def set_cpu_weight(self, target: Target, weight: int) -> None: ...

    def set_memory(self, target: Target, knob: Knob, limit_bytes: int | None) -> None:
        """``knob`` is one of MEMORY_LOW, MEMORY_HIGH, MEMORY_MAX."""
        ...

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None: ...

    def releasing(self) -> AbstractContextManager[None]:
        """Within it, writes reach a slice even when it is not running now (she logged out):
        what restore needs where limits outlive the cgroup (systemd keeps runtime properties
        in drop-ins that come back at her next login). Elsewhere a write to a vanished slice
        raises TargetGone."""
        ...
