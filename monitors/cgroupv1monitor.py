"""The loop's Monitor on a cgroup v1 host: users are the ``user-UID.slice`` directories.

Discovery lists ``PARENT/user.slice/user-UID.slice`` in the cpu hierarchy (where systemd, or
the admin, creates them; PARENT is the policy's ``cgroup_v1.parent``, empty for the hierarchy
root) every tick; each user's cgroup is a :class:`cgroups_v1.slice.V1Slice` spanning the cpu,
cpuacct, memory and blkio hierarchies, sampled by :func:`monitors.samplev1.sample_v1_slice`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection
from pathlib import Path

from cgroups_v1.mounts import V1Mounts
from cgroups_v1.slice import V1Slice
from monitors.host import HostReader
from monitors.model import DEFAULT_MAX_UID, DEFAULT_MIN_UID, CgroupSample, GovernedUser, HostSample
from monitors.samplev1 import sample_v1_slice
from monitors.users import governed, slice_id_now, slice_uid, user_name

__all__ = ["CgroupV1Monitor"]

class CgroupV1Monitor:
    """Users with a slice under ``PARENT/user.slice`` (uid ``min_uid`` … ``max_uid``, not
    ``exempt``: :func:`monitors.users.governed`)."""

    def __init__(self, mounts: V1Mounts, clock: Callable[[], float], min_uid: int = DEFAULT_MIN_UID,
                 exempt: Collection[int | str] = (), parent: str = "", procfs: str = "/proc", *,
                 max_uid: int = DEFAULT_MAX_UID):
        self.mounts, self.clock, self.min_uid, self.exempt = mounts, clock, min_uid, exempt
        self.max_uid = max_uid
        self.user_slice = str(Path(parent) / "user.slice") if parent else "user.slice"
        self.host = HostReader(clock, procfs)
        self.procfs = procfs
        self._known: dict[str, GovernedUser] = {}

    @property
    def user_slice_path(self) -> Path:
        """``user.slice`` in the cpu hierarchy (where users are discovered)."""
        return Path(self.mounts["cpu"]) / self.user_slice

    def users(self) -> list[GovernedUser]:
        current = {}
        try:
            with os.scandir(self.user_slice_path) as entries:
                for entry in entries:
                    uid = slice_uid(entry.name)
                    if uid is None or not entry.is_dir():
                        continue
                    user = self._known.get(entry.name)
                    if user is None or user.slice_id != entry.inode():  # new, or removed and made again
                        user = GovernedUser(uid, user_name(uid), V1Slice(self.mounts, f"{self.user_slice}/{entry.name}"),
                                            entry.inode())
                    current[entry.name] = user
        except FileNotFoundError:
            pass  # no user.slice yet
        self._known = current
        return governed(current.values(), self.min_uid, self.max_uid, self.exempt)

    def close(self) -> None:
        self.host.close()

    def host_sample(self) -> HostSample:
        return self.host()

    def sample(self, user: GovernedUser, memory_detail: bool = True, io_detail: bool = True,
               cpu_detail: bool = False, kept: CgroupSample | None = None) -> CgroupSample:
        """Her slice's counters now, every one read (``kept`` is not used). Raises
        :class:`cgroups.CgroupGone` when it vanished."""
        return sample_v1_slice(user.cgroup, self.clock, memory_detail, io_detail, cpu_detail, self.procfs)

    def slice_id(self, user: GovernedUser) -> int:
        """Her slice directory's inode in the cpu hierarchy now (:func:`monitors.users.slice_id_now`). Raises
        :class:`cgroups.CgroupGone` when it is gone."""
        return slice_id_now(user.cgroup.path)

    def unmoved(self, user: GovernedUser, kept: CgroupSample, io_detail: bool) -> bool:
        """False: every user is read in full each tick (only a cgroup v2 monitor skips reads)."""
        return False
