"""Resolving paths and block devices to the whole disks that ``io.max`` accepts.

``io.max`` takes whole disks only; a partition's ``MAJ:MIN`` is refused with ENODEV
(Documentation/admin-guide/cgroup-v2.rst, "IO Interface Files"). A path resolves to the
device of its filesystem; a partition to its disk (``/sys/dev/block/M:N/partition`` exists,
the parent directory is the disk); device-mapper and md devices to every disk under their
``slaves/``, recursively.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cgroups.errors import CgroupError

__all__ = ["Disk", "DeviceError", "disk_present", "whole_disks", "disks_of_device"]


class DeviceError(CgroupError):
    """A path or device that no whole disk backs."""


@dataclass(frozen=True, order=True)
class Disk:
    """A whole disk: its kernel name (``sda``, ``vda``, ``nvme0n1``) and ``"MAJ:MIN"``."""

    name: str
    device: str


def whole_disks(target: str | os.PathLike[str], sysfs: str | os.PathLike[str] = "/sys") -> list[Disk]:
    """Whole disks behind ``target``: a block device node or any path on a filesystem.

    Raises:
        DeviceError: ``target`` does not exist, or no block device backs it (tmpfs, overlay,
            network filesystems).
    """
    try:
        st = os.stat(target)
    except OSError as exc:
        raise DeviceError(f"{target}: {exc.strerror}") from None
    dev = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    major, minor = os.major(dev), os.minor(dev)
    if major == 0:
        raise DeviceError(f"{target}: on a filesystem with no block device (device 0:{minor}); nothing to limit with io.max")
    return disks_of_device(f"{major}:{minor}", sysfs)


def disk_present(device: str, sysfs: str | os.PathLike[str] = "/sys") -> bool:
    """Whether block device ``"MAJ:MIN"`` is on the host now (``/sys/dev/block/MAJ:MIN``): a disk
    unplugged takes its io.max lines with it, and the kernel refuses a write naming it."""
    return Path(sysfs, "dev", "block", device).exists()


def disks_of_device(device: str, sysfs: str | os.PathLike[str] = "/sys") -> list[Disk]:
    """Whole disks behind block device ``"MAJ:MIN"`` (itself, its disk, or its slaves')."""
    node = Path(sysfs, "dev", "block", device)
    if not node.exists():
        raise DeviceError(f"block device {device}: not in {node.parent}")
    found = _walk(node.resolve(), set())
    if not found:
        raise DeviceError(f"block device {device}: no whole disk found under it")
    return sorted(found)


def _walk(node: Path, seen: set[Path]) -> set[Disk]:
    if node in seen:
        return set()
    seen.add(node)
    if (node / "partition").exists():
        return _walk(node.parent, seen)
    slaves = node / "slaves"
    members = sorted(slaves.iterdir()) if slaves.is_dir() else []
    if members:
        return set().union(*(_walk(m.resolve(), seen) for m in members))
    return {Disk(node.name, (node / "dev").read_text().strip())}
