"""The loop's Monitor on a mixed host (cpu on a cgroup v1 hierarchy, memory and maybe io in
cgroup v2): each controller's counters read from the interface it is bound to, into the one
:class:`~monitors.model.CgroupSample` the loop takes.

Composition of the two samplers, neither changed:

* CPU from the v1 side (:func:`monitors.samplev1.sample_v1_slice` over the v1-homed
  hierarchies only): ``cpuacct.usage``, ``cpuacct.stat``, ``cpu.stat`` throttling; her threads
  from ``tasks`` in the cpu hierarchy;
* memory from the v2 side (:func:`monitors.sample.sample_cgroup`): ``memory.current``,
  ``memory.stat``, ``memory.events`` — v2's own, with ``high`` and ``low`` events;
* io from the side it is on (v2 ``io.stat``, or v1 ``blkio.throttle.*``), nothing when neither;
* pressure from the v2 side: PSI is kept for every cgroup of the default hierarchy, whatever
  controllers it has (Documentation/accounting/psi.rst "Cgroup2 interface"), so her
  ``cpu.pressure`` is there even with cpu bound to v1.

Users are discovered where the cpu controller is, as on a v1 host
(:class:`monitors.cgroupv1monitor.CgroupV1Monitor`: ``PARENT/user.slice/user-UID.slice`` in the
cpu hierarchy), and governed once her v2 cgroup is there too with the memory controller
(:meth:`~cgroups_v1.mixed.MixedSlice.v2_has_memory`): her originals — an admin's memory limits
among them, ceilings the governor never lifts and puts back at stop — are read when she is first
governed, so both sides must exist by then (a v2 cgroup that appeared later would have had its
limits lifted and never restored). A v2 cgroup that vanishes while she is governed leaves her
sampled with no memory or io; a user gone from the cpu hierarchy raises :class:`cgroups.CgroupGone`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from cgroups.cgroup import Descriptors
from cgroups.errors import CgroupGone
from cgroups_v1.mixed import MixedLayout, MixedSlice
from monitors.cgroupv1monitor import CgroupV1Monitor
from monitors.model import DEFAULT_MAX_UID, DEFAULT_MIN_UID, CgroupSample, GovernedUser, HostSample
from monitors.sample import sample_cgroup
from monitors.samplev1 import sample_v1_slice
from monitors.users import descriptor_budget, slice_id_now

__all__ = ["MixedMonitor", "sample_mixed"]


def sample_mixed(s: MixedSlice, clock: Callable[[], float], memory_detail: bool = True, io_detail: bool = True,
                 cpu_detail: bool = False, procfs: str = "/proc", kept: CgroupSample | None = None) -> CgroupSample:
    """Her counters now, each from its controller's interface (details and ``kept`` as
    :func:`monitors.sample.sample_cgroup`). ``time_s`` is the v1 side's (read first, with CPU).

    Raises:
        CgroupGone: her slice left the cpu hierarchy.
    """
    io_home = s.layout.interface("io")
    cpu = sample_v1_slice(s.v1, clock, memory_detail=False, io_detail=io_detail and io_home == "v1",
                          cpu_detail=cpu_detail, procfs=procfs)
    try:
        v2 = sample_cgroup(s.v2, clock, memory_detail, io_detail and io_home == "v2", False, procfs, kept)
    except CgroupGone:
        if not s.exists():
            raise
        v2 = CgroupSample(time_s=cpu.time_s, cpu=None, memory_current_bytes=None)  # no v2 slice: nothing there
    return CgroupSample(
        time_s=cpu.time_s,
        cpu=cpu.cpu,
        memory_current_bytes=v2.memory_current_bytes,
        memory_stat=v2.memory_stat,
        memory_events=v2.memory_events,
        io=v2.io if io_home == "v2" else cpu.io if io_home == "v1" else {},
        pressure=v2.pressure,
        thread_schedstats=cpu.thread_schedstats,
        memory_stat_origin=v2.memory_stat_origin,
    )


class MixedMonitor:
    """Users with a slice under ``PARENT/user.slice`` in the cpu hierarchy (uid ``min_uid`` …
    ``max_uid``, not ``exempt``: :func:`monitors.users.governed`), sampled by :func:`sample_mixed`.

    Args:
        layout: the host's :class:`~cgroups_v1.mixed.MixedLayout`.
        parent: the policy's ``cgroup_v1.parent`` (v1 side only).
        descriptors: how many of the users' v2 counter files may stay open between ticks
            (default :func:`monitors.users.descriptor_budget`); the rest are opened and closed
            at each read.
    """

    def __init__(self, layout: MixedLayout, clock: Callable[[], float], min_uid: int = DEFAULT_MIN_UID,
                 exempt: Collection[int | str] = (), parent: str = "", procfs: str = "/proc",
                 descriptors: int | None = None, *, max_uid: int = DEFAULT_MAX_UID):
        self.layout, self.clock, self.procfs = layout, clock, procfs
        self.discovery = CgroupV1Monitor(layout.v1, clock, min_uid, exempt, parent, procfs, max_uid=max_uid)
        self.descriptors = Descriptors(descriptors if descriptors is not None else descriptor_budget())
        self._known: dict[Path, GovernedUser] = {}

    @property
    def exempt(self) -> Collection[int | str]:
        return self.discovery.exempt

    @exempt.setter
    def exempt(self, value: Collection[int | str]) -> None:
        self.discovery.exempt = value

    @property
    def user_slice(self) -> str:
        """``[PARENT/]user.slice``, relative to the v1 hierarchy roots."""
        return self.discovery.user_slice

    @property
    def user_slice_path(self) -> Path:
        """``user.slice`` in the cpu hierarchy (where users are discovered)."""
        return self.discovery.user_slice_path

    def users(self) -> list[GovernedUser]:
        """Users with both sides of their slice (see the module docstring), by uid."""
        known, found = self._known, self.discovery.users()
        current = {u.cgroup.path: known[u.cgroup.path] for u in found
                   if u.cgroup.path in known and known[u.cgroup.path].slice_id == u.slice_id}
        for path in known.keys() - current.keys():
            known[path].cgroup.close()
        for user in found:
            if user.cgroup.path in current:
                continue
            mine = MixedSlice(self.layout, user.cgroup.relative, keep_open=self.descriptors)
            if mine.v2_has_memory():  # files are opened at the first read: nothing to close otherwise
                current[mine.path] = GovernedUser(user.uid, user.name, mine, user.slice_id)
        self._known = current
        return [current[u.cgroup.path] for u in found if u.cgroup.path in current]

    def close(self) -> None:
        for user in self._known.values():
            user.cgroup.close()
        self._known = {}
        self.discovery.close()

    def host_sample(self) -> HostSample:
        return self.discovery.host_sample()

    def sample(self, user: GovernedUser, memory_detail: bool = True, io_detail: bool = True,
               cpu_detail: bool = False, kept: CgroupSample | None = None) -> CgroupSample:
        """Her slice's counters now (:func:`sample_mixed`). Raises :class:`cgroups.CgroupGone`
        when it left the cpu hierarchy."""
        return sample_mixed(user.cgroup, self.clock, memory_detail, io_detail, cpu_detail, self.procfs, kept)

    def slice_id(self, user: GovernedUser) -> int:
        """Her slice directory's inode in the cpu hierarchy now (:func:`monitors.users.slice_id_now`). Raises
        :class:`cgroups.CgroupGone` when it is gone."""
        return slice_id_now(user.cgroup.path)

    def unmoved(self, user: GovernedUser, kept: CgroupSample, io_detail: bool) -> bool:
        """False: every user is read in full each tick (only a cgroup v2 monitor skips reads)."""
        return False
