"""Where each controller lives on this host: a cgroup v1 hierarchy, the cgroup v2 one, or nowhere.

Source: Documentation/admin-guide/cgroup-v1/cgroups.rst §2.1 (a v1 hierarchy is a ``cgroup``
mount whose super options name its controllers; ``cpu`` and ``cpuacct`` may share one mount,
``cpu,cpuacct``, or have one each), cgroup-v2.rst "Mounting" (a controller bound to a v1
hierarchy is not available in v2) and statfs(2) (``CGROUP_SUPER_MAGIC`` 0x27e0eb). Like
:mod:`cgroups.mount`, it reads /proc/self/mountinfo and checks each filesystem; it never guesses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cgroups.errors import CgroupError
from cgroups.mount import CGROUP_SUPER_MAGIC, filesystem_magic, parse_mountinfo

__all__ = ["GOVERNED", "NotCgroupV1", "V1Mounts", "V1_NAME", "V2_NAME", "find_v1", "controller_homes"]

#: The v1 controllers the governor reads or writes: cpu (quota, shares, throttling), cpuacct
#: (usage), memory, blkio (throttling, bytes). cpu, cpuacct and memory are required; blkio is not.
GOVERNED = ("cpu", "cpuacct", "memory", "blkio")
REQUIRED = ("cpu", "cpuacct", "memory")
#: The v2 name of each governed v1 controller (v2 has no cpuacct: its cpu.stat counts usage).
V2_NAME = {"cpu": "cpu", "cpuacct": "cpu", "memory": "memory", "blkio": "io"}
#: The v1 controller of each governed v2 controller (cpu's usage is in cpuacct beside it).
V1_NAME = {"cpu": "cpu", "memory": "memory", "io": "blkio"}


class NotCgroupV1(CgroupError):
    """The v1 hierarchies the governor needs are not all mounted; the message names them."""


@dataclass(frozen=True)
class V1Mounts:
    """The mount point of each governed v1 controller present on this host (``blkio`` may be absent)."""

    points: dict[str, Path]

    def __getitem__(self, controller: str) -> Path:
        return self.points[controller]

    def __contains__(self, controller: str) -> bool:
        return controller in self.points

    def relative(self, path: Path) -> str | None:
        """``path`` relative to the hierarchy it lies in (``user.slice/user-1000.slice``), or None."""
        for point in sorted(set(self.points.values()), key=lambda p: -len(p.parts)):
            try:
                return str(Path(path).relative_to(point))
            except ValueError:
                continue
        return None


def controller_homes(mountinfo: str | None = None) -> dict[str, str]:
    """For each of cpu, memory, io: ``"v2"`` (offered by the cgroup2 root's cgroup.controllers),
    ``"v1"`` (bound to a v1 hierarchy) or ``"none"``. The v1 name of io is blkio."""
    text = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
    mounts = parse_mountinfo(text)
    v1 = {o for m in mounts if m.fstype == "cgroup" for o in m.super_options}
    v2: set[str] = set()
    for m in mounts:
        if m.fstype == "cgroup2":
            try:
                v2 = set((m.mount_point / "cgroup.controllers").read_text().split())
            except OSError:
                v2 = set()
            break
    out = {}
    for name, v1_name in V1_NAME.items():
        out[name] = "v2" if name in v2 else "v1" if v1_name in v1 else "none"
    return out


def find_v1(mountinfo: str | None = None, check_magic: bool = True,
            required: tuple[str, ...] = REQUIRED) -> V1Mounts:
    """The v1 hierarchies of cpu, cpuacct, memory (required) and blkio (if mounted), verified.

    Args:
        mountinfo: text of /proc/self/mountinfo (read when None).
        check_magic: verify each mount point is really a v1 cgroup filesystem (statfs).
        required: the controllers that must have a hierarchy (a mixed host, whose memory is in
            cgroup v2, needs only cpu and cpuacct: :mod:`cgroups_v1.mixed`).

    Raises:
        NotCgroupV1: a required controller has no v1 hierarchy, or a mount is not what it claims.
    """
    text = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
    points: dict[str, Path] = {}
    for m in parse_mountinfo(text):
        if m.fstype != "cgroup":
            continue
        for controller in GOVERNED:
            if controller in m.super_options and controller not in points:
                points[controller] = m.mount_point
    missing = [c for c in required if c not in points]
    if missing:
        raise NotCgroupV1(f"no cgroup v1 hierarchy for {', '.join(missing)} "
                          "(mount -t cgroup -o CONTROLLER cgroup /sys/fs/cgroup/CONTROLLER)")
    if check_magic:
        for controller, point in points.items():
            magic = filesystem_magic(point)
            if magic != CGROUP_SUPER_MAGIC:
                raise NotCgroupV1(f"{point} is listed as the {controller} hierarchy but its filesystem magic is "
                                  f"{magic:#x}, not {CGROUP_SUPER_MAGIC:#x}")
    return V1Mounts(points)
