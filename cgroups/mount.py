"""Finding and verifying the cgroup v2 hierarchy.

Source: Documentation/admin-guide/cgroup-v2.rst, "Mounting" (``mount -t cgroup2``; a
controller bound to a v1 hierarchy is not available in v2) and statfs(2) (``f_type`` of a
cgroup2 mount is ``CGROUP2_SUPER_MAGIC`` 0x63677270, of a v1 mount ``CGROUP_SUPER_MAGIC``
0x27e0eb). Never guesses a path: it reads /proc/self/mountinfo and checks the filesystem.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from pathlib import Path

from cgroups.errors import NotCgroup2

__all__ = ["CGROUP2_SUPER_MAGIC", "Hierarchy", "filesystem_magic", "find_cgroup2", "parse_mountinfo"]

CGROUP2_SUPER_MAGIC = 0x63677270
CGROUP_SUPER_MAGIC = 0x27E0EB
REQUIRED_CONTROLLERS = ("cpu", "memory", "io")


@dataclass(frozen=True)
class Mount:
    """One /proc/self/mountinfo line: mount point, filesystem type and super options."""

    mount_point: Path
    fstype: str
    super_options: tuple[str, ...]


@dataclass(frozen=True)
class Hierarchy:
    """The cgroup v2 mount and what it offers."""

    root: Path
    controllers: frozenset[str]
    v1_controllers: frozenset[str]  # controllers bound to cgroup v1 hierarchies instead

    @property
    def missing(self) -> tuple[str, ...]:
        """The required controllers (cpu, memory, io) this hierarchy lacks."""
        return tuple(c for c in REQUIRED_CONTROLLERS if c not in self.controllers)


def parse_mountinfo(text: str) -> list[Mount]:
    """Mounts listed in /proc/self/mountinfo text (proc(5)), octal escapes decoded."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        after = right.split()
        if len(fields) < 5 or len(after) < 3:
            continue
        point = fields[4].encode().decode("unicode_escape")
        mounts.append(Mount(Path(point), after[0], tuple(after[2].split(","))))
    return mounts


def filesystem_magic(path: str | os.PathLike[str]) -> int:
    """``f_type`` from statfs(2) of ``path``."""
    class _Statfs(ctypes.Structure):  # struct statfs on 64-bit Linux
        _fields_ = [("f_type", ctypes.c_long), ("f_bsize", ctypes.c_long), ("rest", ctypes.c_byte * 112)]

    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    buf = _Statfs()
    if libc.statfs(os.fsencode(path), ctypes.byref(buf)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(path))
    return buf.f_type & 0xFFFFFFFF


def find_cgroup2(mountinfo: str | None = None, require_controllers: bool = True) -> Hierarchy:
    """The cgroup v2 hierarchy of this host, verified.

    Args:
        mountinfo: text of /proc/self/mountinfo (read when None).
        require_controllers: raise unless cpu, memory and io are available in it.

    Raises:
        NotCgroup2: no cgroup2 mount, a mount that is not really cgroup2, or (hybrid hosts)
            required controllers bound to cgroup v1 — the message names them and the fix.
    """
    text = Path("/proc/self/mountinfo").read_text() if mountinfo is None else mountinfo
    mounts = parse_mountinfo(text)
    v1 = frozenset(o for m in mounts if m.fstype == "cgroup" for o in m.super_options if o in _V1_CONTROLLERS)
    v2 = [m for m in mounts if m.fstype == "cgroup2"]
    if not v2:
        raise NotCgroup2(
            "no cgroup2 filesystem is mounted"
            + (f" (this host uses cgroup v1 for: {', '.join(sorted(v1))})" if v1 else "")
            + "; boot with systemd.unified_cgroup_hierarchy=1 or mount -t cgroup2 none /sys/fs/cgroup"
        )
    root = v2[0].mount_point
    magic = filesystem_magic(root)
    if magic != CGROUP2_SUPER_MAGIC:
        raise NotCgroup2(f"{root} is listed as cgroup2 but its filesystem magic is {magic:#x}, not {CGROUP2_SUPER_MAGIC:#x}")
    controllers = frozenset((root / "cgroup.controllers").read_text().split())
    hierarchy = Hierarchy(root, controllers, v1)
    if require_controllers and hierarchy.missing:
        bound = [_V1_NAME.get(c, c) for c in hierarchy.missing if _V1_NAME.get(c, c) in v1]
        why = (
            f"bound to cgroup v1 hierarchies ({', '.join(bound)}): this is a hybrid (v1+v2) host; "
            "boot with systemd.unified_cgroup_hierarchy=1 for a unified hierarchy"
            if bound else "not compiled in or not enabled in this kernel"
        )
        raise NotCgroup2(f"cgroup v2 at {root} lacks the {', '.join(hierarchy.missing)} controller(s): {why}")
    return hierarchy


_V1_NAME = {"io": "blkio"}  # the v1 name of the io controller
_V1_CONTROLLERS = frozenset(
    "cpu cpuacct cpuset memory blkio io devices freezer net_cls net_prio perf_event hugetlb pids rdma misc".split()
)
