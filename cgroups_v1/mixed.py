"""A user's slice on a *mixed* host: cpu on a cgroup v1 hierarchy, memory (and io) in cgroup v2.

A controller is either bound to a v1 hierarchy or offered by cgroup v2, never both
(Documentation/admin-guide/cgroup-v2.rst "Mounting": a controller can be moved to v1 only when
it is not in use in v2). A host booted with ``cgroup_no_v1=memory``, or whose admin mounted
``cpu,cpuacct`` on v1 by hand, so splits the governed controllers between the two interfaces.
Her processes are then in one cgroup per hierarchy (cgroup-v1/cgroups.rst §2) *and* in one v2
cgroup:

* v1 side: ``PARENT/user.slice/user-UID.slice`` in the cpu and cpuacct hierarchies (PARENT is
  the policy's ``cgroup_v1.parent``, as on a v1 host), plus memory's and blkio's when those are
  on v1 too — a :class:`~cgroups_v1.slice.V1Slice` over just those hierarchies;
* v2 side: ``user.slice/user-UID.slice`` under the cgroup2 mount, as on a v2 host (the v2 side
  has no parent setting) — a :class:`~cgroups.cgroup.Cgroup`.

:class:`MixedLayout` says which controller lives where; :class:`MixedSlice` is one user's pair.
Only layouts with cpu on v1 are built (cpu and cpuacct together give usage and throttling; the
cpu-in-v2, memory-on-v1 layout is not: :func:`governor.service.cgroupkind.choose` says so).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cgroups.cgroup import Cgroup, Descriptors
from cgroups.errors import CgroupError
from cgroups.mount import find_cgroup2
from cgroups_v1.mounts import V1_NAME, V1Mounts, controller_homes, find_v1
from cgroups_v1.slice import V1Slice

__all__ = ["MixedLayout", "MixedSlice", "NotMixed", "find_mixed"]


class NotMixed(CgroupError):
    """This host does not split cpu (v1) and memory (v2); the message says where they are."""


@dataclass(frozen=True)
class MixedLayout:
    """Where each governed controller lives on a mixed host.

    Attributes:
        homes: ``cpu``, ``memory``, ``io`` → ``"v1"``, ``"v2"`` or ``"none"``
            (:func:`cgroups_v1.mounts.controller_homes`); ``cpu`` is ``"v1"``.
        v1: the v1 hierarchies of the controllers homed on v1 only (cpu and cpuacct always;
            memory and blkio when their home is v1), so a :class:`V1Slice` never reads a
            hierarchy whose controller is governed through v2.
        v2_root: the cgroup2 mount point.

    Raises (construction): ValueError when cpu is not on v1 or a v1 home lacks its hierarchy.
    """

    homes: dict[str, str]
    v1: V1Mounts
    v2_root: Path

    def __post_init__(self):
        if self.homes.get("cpu") != "v1" or "cpuacct" not in self.v1:
            raise ValueError(f"a mixed layout needs cpu and cpuacct on cgroup v1 (homes {self.homes})")
        for controller, home in self.homes.items():
            if home == "v1" and V1_NAME[controller] not in self.v1:
                raise ValueError(f"{controller} is homed on v1 but no {V1_NAME[controller]} hierarchy was given")

    @classmethod
    def of(cls, homes: dict[str, str], mounts: V1Mounts, v2_root: Path) -> MixedLayout:
        """The layout of ``homes``, keeping of ``mounts`` only the hierarchies homed on v1."""
        keep = {"cpu", "cpuacct"} | {V1_NAME[c] for c, h in homes.items() if h == "v1"}
        return cls(dict(homes), V1Mounts({c: p for c, p in mounts.points.items() if c in keep}), Path(v2_root))

    def interface(self, controller: str) -> str:
        """``"v1"``, ``"v2"`` or ``"none"`` for ``cpu``, ``memory`` or ``io``."""
        return self.homes.get(controller, "none")

    def describe(self) -> str:
        """Which controller is governed through which interface, for logs and doctor:
        ``cpu on cgroup v1 (/sys/fs/cgroup/cpu,cpuacct), memory and io on cgroup v2 (/sys/fs/cgroup/unified)``."""
        by_home: dict[str, list[str]] = {}
        for controller, home in self.homes.items():
            by_home.setdefault(home, []).append(controller)
        parts = []
        if "v1" in by_home:
            points = ", ".join(sorted({str(self.v1[V1_NAME[c]]) for c in by_home["v1"]}))
            parts.append(f"{_and(by_home['v1'])} on cgroup v1 ({points})")
        if "v2" in by_home:
            parts.append(f"{_and(by_home['v2'])} on cgroup v2 ({self.v2_root})")
        if "none" in by_home:
            parts.append(f"{_and(by_home['none'])} on neither (not governed)")
        return "; ".join(parts)


def find_mixed(mountinfo: str | None = None, check_magic: bool = True) -> MixedLayout:
    """This host's mixed layout, verified: cpu (with cpuacct) on v1 hierarchies, memory offered
    by the cgroup2 root, io wherever it is (blkio's hierarchy when on v1).

    Args:
        mountinfo: text of /proc/self/mountinfo (read when None).
        check_magic: verify each mount with statfs (:func:`cgroups_v1.mounts.find_v1`).

    Raises:
        NotMixed: cpu is not on v1 or memory is not in v2 (the message gives each home).
        CgroupError: a v1 hierarchy or the cgroup2 mount is missing or not what it claims
            (:class:`~cgroups_v1.mounts.NotCgroupV1`, :class:`~cgroups.errors.NotCgroup2`).
    """
    homes = controller_homes(mountinfo)
    if homes["cpu"] != "v1" or homes["memory"] != "v2":
        raise NotMixed("not a mixed host (cpu on v1, memory on v2): "
                       + ", ".join(f"{c} on {h}" for c, h in homes.items()))
    required = ("cpu", "cpuacct") + (("blkio",) if homes["io"] == "v1" else ())
    mounts = find_v1(mountinfo, check_magic=check_magic, required=required)
    hierarchy = find_cgroup2(mountinfo, require_controllers=False)
    return MixedLayout.of(homes, mounts, hierarchy.root)


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


class MixedSlice:
    """One user's slice on a mixed host: :attr:`v1` (a :class:`V1Slice` over the v1-homed
    hierarchies) and :attr:`v2` (her v2 :class:`Cgroup`).

    Args:
        layout: the host's :class:`MixedLayout`.
        v1_relative: ``[PARENT/]user.slice/user-UID.slice`` relative to the v1 hierarchy roots.
        keep_open: keep the v2 counter files open between reads, within a budget if one is
            given (:class:`Cgroup`).

    :attr:`path` is her directory in the cpu hierarchy (where users are discovered, the name a
    restore snapshot keeps); :meth:`exists` asks there. Her v2 cgroup is
    ``V2_ROOT/user.slice/<the same name>``.

    Raises (construction): ValueError as :class:`V1Slice`.
    """

    __slots__ = ("layout", "v1", "v2", "path")

    def __init__(self, layout: MixedLayout, v1_relative: str, keep_open: bool | Descriptors = False):
        self.layout = layout
        self.v1 = V1Slice(layout.v1, v1_relative)
        self.path = self.v1.path
        self.v2 = Cgroup(layout.v2_root / "user.slice" / self.path.name, keep_open=keep_open)

    @classmethod
    def from_path(cls, layout: MixedLayout, path: str | Path) -> MixedSlice:
        """The slice whose directory in a v1 hierarchy is ``path`` (a snapshot's).

        Raises:
            ValueError: ``path`` is under none of the layout's v1 hierarchies.
        """
        relative = layout.v1.relative(Path(path))
        if relative is None:
            raise ValueError(f"{path}: not under the cgroup v1 hierarchies of this mixed host "
                             f"({', '.join(sorted({str(p) for p in layout.v1.points.values()}))})")
        return cls(layout, relative)

    def __repr__(self) -> str:
        return f"MixedSlice({self.v1.relative!r}, v2={str(self.v2.path)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MixedSlice) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __lt__(self, other: MixedSlice) -> bool:
        return str(self.path) < str(other.path)

    def exists(self) -> bool:
        """Whether her slice is still in the cpu hierarchy."""
        return self.v1.exists()

    def v2_has_memory(self) -> bool:
        """Whether her v2 cgroup exists with the memory controller enabled for it (its
        ``memory.current``): both sides of her slice are there to govern."""
        return os.path.exists(self.v2.path / "memory.current")

    @property
    def keeps_open(self) -> bool:
        return self.v2.keeps_open

    def close(self) -> None:
        """Close the v2 counter files kept open (nothing is kept open on the v1 side)."""
        self.v2.close()
