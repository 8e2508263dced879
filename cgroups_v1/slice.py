"""A user's slice on a cgroup v1 host: one directory per hierarchy, read and written as one.

systemd on a v1 (or hybrid) host creates ``user.slice/user-UID.slice`` in each controller's
hierarchy (systemd.special(7); Documentation/admin-guide/cgroup-v1/cgroups.rst §2: a task
is in one cgroup per hierarchy). A :class:`V1Slice` is that set of directories: the same
relative path under the cpu, cpuacct, memory and (if mounted) blkio hierarchies. Its
:attr:`path` is the directory in the cpu hierarchy: the name a snapshot keeps, and from which
:meth:`V1Slice.from_path` finds the others again.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from cgroups.errors import CgroupGone, ControllerMissing
from cgroups_v1.cgroup import V1Cgroup
from cgroups_v1.mounts import V1Mounts

__all__ = ["V1Slice"]


class V1Slice:
    """The directories ``RELATIVE`` under each governed v1 hierarchy.

    Args:
        mounts: the hierarchies (:func:`cgroups_v1.mounts.find_v1`).
        relative: e.g. ``user.slice/user-1000.slice`` (no leading ``/``, no ``..``).

    :meth:`in_` gives the :class:`V1Cgroup` of one controller; it raises
    :class:`ControllerMissing` when that hierarchy is not mounted or has no such directory while
    the slice still exists in the cpu hierarchy, :class:`CgroupGone` when the slice is gone.
    """

    __slots__ = ("mounts", "relative", "path", "_cgroups")

    def __init__(self, mounts: V1Mounts, relative: str):
        rel = PurePosixPath(relative)
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"{relative!r}: expected a path relative to the hierarchy roots, without '..'")
        self.mounts, self.relative = mounts, str(rel)
        self.path = Path(mounts["cpu"]) / self.relative
        self._cgroups = {c: V1Cgroup(Path(p) / self.relative) for c, p in mounts.points.items()}

    @classmethod
    def from_path(cls, mounts: V1Mounts, path: str | Path) -> V1Slice:
        """The slice whose directory in any one hierarchy is ``path``.

        Raises:
            ValueError: ``path`` is under none of the hierarchies.
        """
        relative = mounts.relative(Path(path))
        if relative is None:
            raise ValueError(f"{path}: not under any cgroup v1 hierarchy ({', '.join(map(str, mounts.points.values()))})")
        return cls(mounts, relative)

    def __repr__(self) -> str:
        return f"V1Slice({self.relative!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, V1Slice) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __lt__(self, other: V1Slice) -> bool:
        return str(self.path) < str(other.path)

    def exists(self) -> bool:
        return self._cgroups["cpu"].exists()

    def close(self) -> None:
        """Nothing is kept open (the v2 Cgroup's interface, for discovery)."""

    def in_(self, controller: str) -> V1Cgroup:
        """The directory in ``controller``'s hierarchy (see the class docstring for errors)."""
        cg = self._cgroups.get(controller)
        if cg is None:
            raise ControllerMissing(Path(f"{self.path}/{controller}.*"))
        if not cg.path.is_dir():
            if not self.exists():
                raise CgroupGone(self.path)
            raise ControllerMissing(cg.path / f"{controller}.*")
        return cg

    def directories(self) -> dict[str, Path]:
        """Controller → directory, for every hierarchy mounted."""
        return {c: cg.path for c, cg in self._cgroups.items()}
