"""Measuring a disk's sequential bandwidth for the capacity vector (``drfgov calibrate io``).

sysfs does not know a disk's bandwidth, so DRF's disk capacity comes from configuration;
this measures it. With ``O_DIRECT`` (open(2)) the page cache is bypassed and the disk itself
is timed. On a directory it writes then reads a scratch file there (removed afterwards); on a
block device it only reads (writing would destroy data).
"""

from __future__ import annotations

import mmap
import os
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cgroups.devices import Disk, whole_disks

__all__ = ["Bandwidth", "CalibrationError", "calibrate_io"]

BLOCK_BYTES = 1 << 20
Progress = Callable[[str, int, int], None]  # (phase, bytes done, bytes total)


class CalibrationError(Exception):
    """The measurement could not be made; the message says why and what to try."""


@dataclass(frozen=True)
class Bandwidth:
    """Sequential bandwidth of the disk(s) behind ``target``; write None when not measured."""

    target: str
    disks: list[Disk]
    size_bytes: int
    read_bytes_per_s: float
    write_bytes_per_s: float | None


def calibrate_io(target: str | os.PathLike[str], size_bytes: int = 256 << 20, progress: Progress | None = None) -> Bandwidth:
    """Time ``size_bytes`` of O_DIRECT I/O in 1 MiB blocks on ``target`` (directory or block device).

    Raises:
        CalibrationError: no such path, no block device behind it, O_DIRECT unsupported
            (tmpfs, some network filesystems), no space, a scratch file of more than half the
            free space (:func:`_check_room`), or a device smaller than ``size_bytes``.
    """
    size_bytes = max(BLOCK_BYTES, size_bytes - size_bytes % BLOCK_BYTES)
    try:
        disks = whole_disks(target)
        mode = os.stat(target).st_mode
    except OSError as exc:
        raise CalibrationError(f"{target}: {exc.strerror}") from None
    except Exception as exc:  # DeviceError
        raise CalibrationError(str(exc)) from None
    report = progress or (lambda phase, done, total: None)
    buf = mmap.mmap(-1, BLOCK_BYTES)  # page-aligned, as O_DIRECT requires
    buf.write(os.urandom(BLOCK_BYTES))
    try:
        if stat.S_ISBLK(mode):
            read = _timed(target, os.O_RDONLY, size_bytes, buf, "read", report)
            return Bandwidth(str(target), disks, size_bytes, read, None)
        if not stat.S_ISDIR(mode):
            raise CalibrationError(f"{target}: expected a directory (scratch file goes there) or a block device")
        _check_room(target, size_bytes)
        scratch = _new_scratch(Path(target))
        try:  # O_NOFOLLOW: in a directory others may write, the name must not become a link to elsewhere
            write = _timed(scratch, os.O_WRONLY | os.O_NOFOLLOW, size_bytes, buf, "write", report)
            read = _timed(scratch, os.O_RDONLY | os.O_NOFOLLOW, size_bytes, buf, "read", report)
        finally:
            scratch.unlink(missing_ok=True)
        return Bandwidth(str(target), disks, size_bytes, read, write)
    finally:
        buf.close()


def _check_room(directory, size_bytes: int) -> None:
    """Refuse a scratch file of more than half the space free to users in ``directory``
    (``statvfs``: ``f_bavail × f_frsize``): the measurement must not fill the filesystem that
    others (and the system) write to.

    Raises:
        CalibrationError: naming the sizes and what to do.
    """
    try:
        st = os.statvfs(directory)
    except OSError as exc:
        raise CalibrationError(f"{directory}: cannot tell its free space: {exc.strerror}") from None
    free = st.f_bavail * st.f_frsize
    if size_bytes > free // 2:
        raise CalibrationError(f"{directory}: a {size_bytes >> 20} MiB scratch file is more than half of the "
                               f"{free >> 20} MiB free there; use --size-mib {max(free // 2, 0) >> 20} or less, "
                               "or a directory with more room")


def _new_scratch(directory: Path) -> Path:
    """A new, empty file of ours in ``directory`` (0600) under a name nobody can guess, so
    another user cannot take it first (nor is a file of hers ever reused or removed).

    Raises:
        CalibrationError: it cannot be created.
    """
    for _ in range(16):
        path = directory / f".drfgov-calibrate-{secrets.token_hex(8)}"
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            continue
        except OSError as exc:
            raise CalibrationError(f"{path}: cannot create the scratch file: {exc.strerror}") from None
        return path
    raise CalibrationError(f"{directory}: no free scratch file name after 16 tries")


def _timed(path, flags: int, size_bytes: int, buf: mmap.mmap, phase: str, report: Progress) -> float:
    try:
        fd = os.open(path, flags | os.O_DIRECT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        hint = " (the filesystem does not support O_DIRECT: pick a directory on a real disk)" if exc.errno == 22 else ""
        raise CalibrationError(f"{path}: cannot open with O_DIRECT: {exc.strerror}{hint}") from None
    done = 0
    try:
        start = time.perf_counter()
        while done < size_bytes:
            n = os.write(fd, buf) if phase == "write" else os.readv(fd, [buf])
            if n <= 0:
                raise CalibrationError(f"{path}: device ended after {done} bytes; use a smaller --size-mib")
            done += n
            report(phase, done, size_bytes)
        if phase == "write":
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    except OSError as exc:
        raise CalibrationError(f"{path}: {phase} failed: {exc.strerror}") from None
    finally:
        os.close(fd)
    return done / elapsed
