"""Backend that writes the cgroup v2 files directly, and the reader every backend shares.

Use it only where nothing else owns the cgroups (no systemd managing ``user.slice``): the
single-writer rule of Documentation/admin-guide/cgroup-v2.rst ("Delegation", and systemd's
"Control Group APIs and Delegation") says one manager per cgroup. Reads always come from the
files, the effective truth, whichever backend wrote them.
"""

from __future__ import annotations

import errno
from contextlib import nullcontext

from cgroups import Cgroup, CgroupError, CgroupGone, ControllerMissing, CpuMax, IoMax
from cgroups.devices import disk_present
from cgroups.errors import WriteRefused
from cgroups.limits import DEVICE
from governor.enforce.model import KERNEL_DEFAULTS, DiskGone, EnforceError, Knob, LimitSet, Target, TargetGone

__all__ = ["CgroupfsBackend", "enforce_error", "read_limit_set", "read_memory_current"]


def enforce_error(exc: CgroupError) -> EnforceError:
    """The backend error for a cgroup-layer error (the boundary's one translation): a cgroup gone
    is :class:`TargetGone`; an io.max (or v1 blkio.throttle) write refused with ENODEV for a
    disk no longer on the host (:func:`cgroups.devices.disk_present`) is :class:`DiskGone`."""
    if isinstance(exc, CgroupGone):
        return TargetGone(str(exc))
    if isinstance(exc, WriteRefused) and exc.errno == errno.ENODEV:
        device = exc.value.split(" ", 1)[0]
        if DEVICE.fullmatch(device) and not disk_present(device):
            return DiskGone(f"{exc}: the disk is no longer on the host")
    return EnforceError(str(exc))


def read_limit_set(cg: Cgroup) -> LimitSet:
    """Read every managed knob from ``cg``'s files.

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
            raise enforce_error(exc) from None
    return LimitSet(*values)


def read_memory_current(cg: Cgroup) -> int | None:
    """memory.current of ``cg`` (bytes), None without the memory controller.

    Raises:
        TargetGone: the cgroup vanished.
        EnforceError: the file is unreadable or malformed.
    """
    try:
        return cg.memory_current()
    except ControllerMissing:
        return None
    except CgroupError as exc:
        raise enforce_error(exc) from None


class CgroupfsBackend:
    """Writes cpu.max, cpu.weight, memory.low|high|max and io.max with :class:`cgroups.Cgroup`."""

    name = "cgroupfs"
    limits_outlive_cgroup = False
    memory_high_throttles = True

    def read(self, target: Target) -> LimitSet:
        return read_limit_set(target.cgroup)

    def releasing(self):
        """Nothing outlives a cgroup here: a vanished slice took its limits with it."""
        return nullcontext()

    def memory_current(self, target: Target) -> int | None:
        return read_memory_current(target.cgroup)

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None:
        self._do(target.cgroup.set_cpu_max, limit)

    def set_cpu_weight(self, target: Target, weight: int) -> None:
        self._do(target.cgroup.set_cpu_weight, weight)

    def set_memory(self, target: Target, knob: Knob, limit_bytes: int | None) -> None:
        writer = {"memory.low": target.cgroup.set_memory_low, "memory.high": target.cgroup.set_memory_high,
                  "memory.max": target.cgroup.set_memory_max}[knob.file]
        self._do(writer, limit_bytes)

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None:
        self._do(target.cgroup.set_io_max, device, limit)

    @staticmethod
    def _do(write, *args) -> None:
        try:
            write(*args)
        except CgroupError as exc:  # InvalidLimit and WriteRefused are CgroupErrors too
            raise enforce_error(exc) from None
