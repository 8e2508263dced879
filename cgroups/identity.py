"""A cgroup directory's identity and its one write path, whatever the interface (v2's
:class:`Cgroup`, v1's :class:`cgroups_v1.cgroup.V1Cgroup`)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from cgroups.errors import CgroupError, CgroupGone, ControllerMissing, ReadFailed, WriteRefused

__all__ = ["CgroupDirectory"]


class CgroupDirectory:
    """Equal, hashed and shown by ``path`` (and type); it exists while its ``cgroup.procs`` does
    (every cgroup directory has one, in v1 and v2 alike)."""

    __slots__ = ()
    path: Path

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def exists(self) -> bool:
        return (self.path / "cgroup.procs").exists()

    def write_text(self, name: str, value: str) -> None:
        """Write ``value`` to interface file ``name`` in one ``write(2)``; never creates it.

        Raises:
            ControllerMissing: no such file in a cgroup that exists.
            CgroupGone: the cgroup was removed (before the open, or under the write: ENODEV).
            WriteRefused: the kernel refused the value (errno kept).
        """
        path = self.path / name
        try:
            fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC)  # O_TRUNC: as shells do; fake trees need it
        except FileNotFoundError:
            raise self._missing(name) from None
        except OSError as exc:
            raise WriteRefused(path, value, exc.errno) from None
        try:
            os.write(fd, value.encode())
        except OSError as exc:
            if exc.errno in (errno.ENODEV, errno.ENOENT) and not self.path.is_dir():
                raise CgroupGone(self.path) from None
            raise WriteRefused(path, value, exc.errno) from None
        finally:
            os.close(fd)

    def _read_error(self, name: str, exc: OSError) -> CgroupError:
        """What an OSError opening or reading interface file ``name`` means: no such file in a
        cgroup that exists (ControllerMissing), the cgroup gone (ENODEV), or ReadFailed."""
        if isinstance(exc, FileNotFoundError):
            return self._missing(name)
        if exc.errno == errno.ENODEV:
            return CgroupGone(self.path)
        return ReadFailed(self.path / name, exc.errno, exc.strerror or str(exc))

    def _missing(self, name: str) -> CgroupError:
        return ControllerMissing(self.path / name) if self.path.is_dir() else CgroupGone(self.path)
