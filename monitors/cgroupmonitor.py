"""The loop's Monitor on a cgroup v2 host: users are the ``user-UID.slice`` cgroups.

Discovery (:func:`monitors.users.discover`) runs every tick, so users appear and vanish as
they log in and out; each user's sample is her slice's counters (:func:`monitors.sample.sample_cgroup`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from cgroups import Cgroup
from monitors.sample import CgroupSample, sample_cgroup
from monitors.users import GovernedUser, discover

__all__ = ["CgroupMonitor"]


class CgroupMonitor:
    """Users with a slice under ``user_slice`` (uid ≥ ``min_uid``, not ``exempt`` uids or names)."""

    def __init__(self, user_slice: Cgroup, clock: Callable[[], float], min_uid: int = 1000,
                 exempt: Collection[int | str] = ()):
        self.user_slice, self.clock, self.min_uid, self.exempt = user_slice, clock, min_uid, exempt

    def users(self) -> list[GovernedUser]:
        return discover(self.user_slice, self.min_uid, self.exempt)

    def sample(self, user: GovernedUser) -> CgroupSample:
        """Her slice's counters now. Raises :class:`cgroups.CgroupGone` when it vanished."""
        return sample_cgroup(user.cgroup, self.clock)
