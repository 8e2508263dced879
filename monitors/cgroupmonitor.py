"""The loop's Monitor on a cgroup v2 host: users are the ``user-UID.slice`` cgroups.

Discovery (:class:`monitors.users.SliceDiscovery`) runs every tick, so users appear and vanish
as they log in and out; each user's sample is her slice's counters
(:func:`monitors.sample.sample_cgroup`), read from files kept open between ticks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from cgroups import Cgroup
from monitors.host import HostReader
from monitors.model import DEFAULT_MAX_UID, DEFAULT_MIN_UID, CgroupSample, GovernedUser, HostSample
from monitors.sample import sample_cgroup, unmoved
from monitors.users import SliceDiscovery, slice_id_now

__all__ = ["CgroupMonitor"]


class CgroupMonitor:
    """Users with a slice under ``user_slice`` (uid ``min_uid`` … ``max_uid``, not ``exempt`` uids
    or names: :func:`monitors.users.governed`)."""

    def __init__(self, user_slice: Cgroup, clock: Callable[[], float], min_uid: int = DEFAULT_MIN_UID,
                 exempt: Collection[int | str] = (), procfs: str = "/proc", *, max_uid: int = DEFAULT_MAX_UID):
        self.clock = clock
        self.discovery = SliceDiscovery(user_slice, min_uid, exempt, max_uid=max_uid)
        self.host = HostReader(clock, procfs)
        self.procfs = procfs

    @property
    def exempt(self) -> Collection[int | str]:
        return self.discovery.exempt

    @exempt.setter
    def exempt(self, value: Collection[int | str]) -> None:
        self.discovery.exempt = value

    def users(self) -> list[GovernedUser]:
        return self.discovery()

    def close(self) -> None:
        """Close the files kept open (the users' interface files, /proc/stat and /proc/meminfo)."""
        self.discovery.close()
        self.host.close()

    def host_sample(self) -> HostSample:
        """The host's CPU busy time and available memory (:class:`monitors.host.HostReader`)."""
        return self.host()

    def sample(self, user: GovernedUser, memory_detail: bool = True, io_detail: bool = True,
               cpu_detail: bool = False, kept: CgroupSample | None = None) -> CgroupSample:
        """Her slice's counters now (the details and ``kept`` as :func:`monitors.sample.sample_cgroup`).
        Raises :class:`cgroups.CgroupGone` when it vanished."""
        return sample_cgroup(user.cgroup, self.clock, memory_detail, io_detail, cpu_detail, self.procfs, kept)

    def slice_id(self, user: GovernedUser) -> int:
        """Her slice directory's inode now (:func:`monitors.users.slice_id_now`). Raises
        :class:`cgroups.CgroupGone` when it is gone."""
        return slice_id_now(user.cgroup.path)

    def unmoved(self, user: GovernedUser, kept: CgroupSample, io_detail: bool) -> bool:
        """Whether her slice's fast counters are still ``kept``'s (:func:`monitors.sample.unmoved`).
        Raises :class:`cgroups.CgroupGone` when it vanished."""
        return unmoved(user.cgroup, kept, io_detail)
