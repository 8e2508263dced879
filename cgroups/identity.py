"""A cgroup directory's identity: one per path, whatever the interface (v2's :class:`Cgroup`,
v1's :class:`cgroups_v1.cgroup.V1Cgroup`)."""

from __future__ import annotations

from pathlib import Path

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
