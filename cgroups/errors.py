"""Errors of the cgroup v2 file layer. Every error names the file it is about."""

from __future__ import annotations

import errno
from pathlib import Path

__all__ = ["CgroupError", "CgroupGone", "ControllerMissing", "NotCgroup2", "ParseError", "ReadFailed", "WriteRefused"]


class CgroupError(Exception):
    """Base class of every error raised by :mod:`cgroups`."""


class NotCgroup2(CgroupError):
    """No usable cgroup v2 hierarchy: the message says what is missing and how to fix it."""


class CgroupGone(CgroupError):
    """The cgroup directory no longer exists (its last process exited, or it was removed)."""

    def __init__(self, path: Path):
        self.path = path
        super().__init__(f"{path}: cgroup vanished")


class ControllerMissing(CgroupError):
    """The cgroup exists but the interface file does not: its controller is not enabled here."""

    def __init__(self, path: Path):
        self.path = path
        controller = path.name.split(".", 1)[0]
        super().__init__(
            f"{path}: no such file: the {controller} controller is not enabled for this cgroup "
            f"(add +{controller} to the parent's cgroup.subtree_control)"
        )


class ReadFailed(CgroupError):
    """Reading an interface file failed for a reason other than the cgroup vanishing: which
    file, the errno and its text (EMFILE when the process ran out of descriptors, EACCES, EIO)."""

    def __init__(self, path: Path | str, err: int | None, text: str):
        self.path, self.errno = path, err
        super().__init__(f"{path}: cannot read: {errno.errorcode.get(err, err) if err else ''} ({text})")


class ParseError(CgroupError):
    """A kernel file did not have the documented format."""

    def __init__(self, path: Path | str, line_no: int, line: str, reason: str):
        self.path, self.line_no, self.line, self.reason = path, line_no, line, reason
        super().__init__(f"{path}:{line_no}: {reason}: {line!r}")


_WHY = {
    errno.EINVAL: "the kernel rejected the value as malformed or out of range",
    errno.ENODEV: "no such device for this file (io.max takes whole disks, not partitions)",
    errno.EBUSY: "the resource is busy",
    errno.ENOENT: "the cgroup vanished",
    errno.EACCES: "permission denied (the governor must run as root, or own the cgroup)",
    errno.EPERM: "operation not permitted (the governor must run as root, or own the cgroup)",
    errno.EOPNOTSUPP: "not supported by this kernel or cgroup",
}


class WriteRefused(CgroupError):
    """The kernel refused a write: which file, what value, the errno and what it means."""

    def __init__(self, path: Path, value: str, err: int):
        self.path, self.value, self.errno = path, value, err
        why = _WHY.get(err, errno.errorcode.get(err, "error"))
        super().__init__(f"{path}: kernel refused {value!r}: {errno.errorcode.get(err, err)} ({why})")
