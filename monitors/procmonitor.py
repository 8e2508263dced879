"""The loop's Monitor on hosts without per-user cgroups: per-uid counters from /proc.

:class:`ProcMonitor` turns :class:`monitors.procfs.ProcSampler`'s per-interval, per-uid
usage into cumulative, cgroup-shaped samples (``cpu.stat usage_usec``, ``memory.current``,
one pseudo-disk of read/write bytes), so :mod:`governor.control.loop` runs unchanged on such hosts,
for ``--dry-run``: there is no cgroup to write to, and each user's "cgroup" path is only a
name (``/sys/fs/cgroup/user.slice/user-UID.slice``, where systemd would put it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from cgroups import Cgroup, CgroupGone, CpuStat, IoStat
from monitors.host import HostReader
from monitors.model import DEFAULT_MAX_UID, DEFAULT_MIN_UID, CgroupSample, GovernedUser, HostSample
from monitors.procfs import ProcSampler
from monitors.users import is_governed, user_name

__all__ = ["PROC_DISK", "ProcMonitor"]

PROC_DISK = "0:0"  # /proc counts a process's disk bytes, not per disk: one pseudo-disk
SLICES = Path("/sys/fs/cgroup/user.slice")


@dataclass
class _Counters:
    usage_usec: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    rss_bytes: int = 0


class ProcMonitor:
    """Governed users are the uids that own processes and that :func:`monitors.users.is_governed`
    takes (``min_uid`` … ``max_uid``, never nobody, not ``exempt``; the sampler leaves out uids
    outside the range). Here nothing but the uid tells a daemon from a person: nobody (65534)
    is never one, and ``max_uid: 60000`` leaves out systemd's DynamicUser= services
    (61184–65519).

    Call :meth:`users` once per tick before :meth:`sample`: it takes the /proc sample.
    """

    def __init__(self, clock: Callable[[], float], min_uid: int = DEFAULT_MIN_UID, exempt: Collection[int | str] = (),
                 sampler: ProcSampler | None = None, *, max_uid: int = DEFAULT_MAX_UID):
        self.clock = clock
        self.sampler = sampler or ProcSampler(clock, min_uid=min_uid, max_uid=max_uid)
        self.min_uid, self.max_uid, self.exempt = min_uid, max_uid, exempt
        self.counters: dict[int, _Counters] = {}
        self.time_s = 0.0
        self.host = HostReader(clock)

    def close(self) -> None:
        """Close /proc/stat and /proc/meminfo (the per-process files are read afresh each tick)."""
        self.host.close()

    def host_sample(self) -> HostSample:
        return self.host()

    def users(self) -> list[GovernedUser]:
        self.time_s = self.clock()
        usage = self.sampler.sample()
        interval = self.sampler.last_interval_s or 0.0
        out = []
        for uid, u in sorted(usage.items()):
            name = user_name(uid)
            if not is_governed(uid, name, self.min_uid, self.max_uid, self.exempt):
                continue
            c = self.counters.setdefault(uid, _Counters())
            c.usage_usec += round(u.cpu_cores * interval * 1e6)
            c.read_bytes += round(u.read_bytes_per_s * interval)
            c.write_bytes += round(u.write_bytes_per_s * interval)
            c.rss_bytes = u.memory_rss_bytes
            out.append(GovernedUser(uid, name, Cgroup(SLICES / f"user-{uid}.slice")))
        for uid in set(self.counters) - set(usage):
            del self.counters[uid]  # no processes left: she is gone
        return out

    def sample(self, user: GovernedUser, memory_detail: bool = True, io_detail: bool = True,
               cpu_detail: bool = False, kept: CgroupSample | None = None) -> CgroupSample:
        """Her counters from the last /proc pass (all of them: they cost nothing more; ``kept``
        is not used; no thread accounting: without a cgroup there is no quota to be held back by)."""
        c = self.counters.get(user.uid)
        if c is None:
            raise CgroupGone(user.cgroup.path)
        return CgroupSample(
            time_s=self.time_s, cpu=CpuStat(c.usage_usec, c.usage_usec, 0), memory_current_bytes=c.rss_bytes,
            io={PROC_DISK: IoStat(c.read_bytes, c.write_bytes, 0, 0)},
        )

    def slice_id(self, user: GovernedUser) -> int:
        """``user.slice_id``: users measured from /proc have no slice to be made again."""
        return user.slice_id

    def unmoved(self, user: GovernedUser, kept: CgroupSample, io_detail: bool) -> bool:
        """False: every user is read in full each tick (her counters cost nothing more here)."""
        return False
