"""What measurement produces, as values (pure): a governed user, one sample of her counters.

The control loop imports these; :mod:`monitors.sample` and :mod:`monitors.procmonitor` fill
them from cgroup files and /proc, :mod:`monitors.users` finds the users.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from cgroups.limits import CpuStat, IoStat, MemoryEvents, PressureTotals

if TYPE_CHECKING:
    from cgroups.cgroup import Cgroup
    from cgroups_v1.slice import V1Slice

__all__ = ["CgroupSample", "DEFAULT_MAX_UID", "DEFAULT_MIN_UID", "GovernedUser", "HostSample", "LAST_UID", "OVERFLOW_UID",
           "MEMORY_STAT_KEYS", "NOTHING_READ", "StatOrigin", "ThreadSchedstats", "uid_never_governed"]

#: The largest uid: uid_t is 32 bits and 2^32 − 1 is "no uid" (UIDS-GIDS.md; setresuid(2) and
#: chown(2) read −1 as "leave unchanged").
LAST_UID = 2**32 - 2
#: Who is governed by default: uids from 1000 (below: system accounts; systemd's "Users, Groups,
#: UIDs and GIDs on systemd Systems", UIDS-GIDS.md, and Debian's login.defs UID_MIN) with no
#: upper bound — LDAP and AD users are people too (sssd's id mapping starts at 200000). Where
#: every user is local, ``governed.max_uid: 60000`` (login.defs UID_MAX) also leaves out
#: systemd's DynamicUser= services (61184–65519) and container ranges (524288 and up).
DEFAULT_MIN_UID, DEFAULT_MAX_UID = 1000, LAST_UID
#: The kernel's overflow uid (/proc/sys/kernel/overflowuid, 65534: ``nobody``), what an unmapped
#: uid shows as and the account daemons drop to: never a person (UIDS-GIDS.md), never governed
#: — on a host measured from /proc its daemons would otherwise be one "user".
OVERFLOW_UID = 65534


def uid_never_governed(uid: int, min_uid: int, max_uid: int) -> str | None:
    """Why ``uid`` is never governed, whatever its name or the exempt lists, or None when it may
    be: ``"below"`` ``min_uid`` (root and the system accounts, by default), ``"above"``
    ``max_uid``, or ``"nobody"`` (:data:`OVERFLOW_UID`). The one rule of governable uids, here
    (pure) so that both sides ask it: who is governed (:func:`monitors.users.is_governed`) and
    the policy's check of what it names (``governor.config.policy``, which may not import the
    monitors that read the host)."""
    if uid < min_uid:
        return "below"
    if uid > max_uid:
        return "above"
    if uid == OVERFLOW_UID:
        return "nobody"
    return None

MEMORY_STAT_KEYS = ("file", "shmem")  # what memory_used_bytes needs of memory.stat


@dataclass(frozen=True)
class ThreadSchedstats:
    """Her threads' scheduler accounting at ``time_s`` (monotonic seconds, read just before
    them): tid → (ns on a CPU, ns waiting for one, voluntary context switches), cumulative
    (:mod:`monitors.schedstat`)."""

    time_s: float
    by_tid: dict[int, tuple[int, int, int]]


@dataclass(frozen=True, order=True)
class GovernedUser:
    """A user and her slice cgroup (a v2 ``Cgroup``, or a ``V1Slice`` on cgroup v1 hosts).

    ``slice_id``: which slice of that name this is — its directory's inode number (on cgroup
    v2 the cgroup's id; on v1 the cpu hierarchy's directory), 0 when not known. A logout and
    login between two ticks removes her slice and makes a new one under the same name: a new
    id (:meth:`governor.control.loop.Governor._sample` starts her afresh)."""

    uid: int
    name: str
    cgroup: Cgroup | V1Slice
    slice_id: int = field(default=0, compare=False)


#: The empty mapping a sample's optional readings default to (shared: read-only).
NOTHING_READ: Mapping = MappingProxyType({})


class StatOrigin(NamedTuple):
    """When a sample's memory.stat was read (monotonic seconds) and memory.current then (bytes):
    a later sample that reuses it (:func:`monitors.sample.sample_cgroup`) keeps its origin."""

    time_s: float
    memory_current_bytes: int


class CgroupSample(NamedTuple):
    """Counters of one cgroup at ``time_s`` (monotonic seconds). Memory in bytes. A named tuple:
    one is built per user per tick (a frozen dataclass cost 0.75 µs more; issue 16)."""

    time_s: float
    cpu: CpuStat | None
    memory_current_bytes: int | None
    memory_stat: Mapping[str, int] = NOTHING_READ
    memory_events: MemoryEvents | None = None
    io: Mapping[str, IoStat] = NOTHING_READ
    pressure: Mapping[str, PressureTotals] = NOTHING_READ  # per controller: cpu, memory, io
    thread_schedstats: ThreadSchedstats | None = None  # None: not read (monitors.schedstat)
    memory_stat_origin: StatOrigin | None = None  # when memory_stat was read (None: not said)

    def readings_equal(self, other: CgroupSample) -> bool:
        """Whether every reading of ``other`` is this one's (the times aside): nothing of hers
        moved between the two. Never with her threads read (their accounting moves with time)."""
        return (self.cpu == other.cpu and self.memory_current_bytes == other.memory_current_bytes
                and self.memory_stat == other.memory_stat and self.memory_events == other.memory_events
                and self.io == other.io and self.pressure == other.pressure
                and self.thread_schedstats is None and other.thread_schedstats is None)

    @property
    def memory_used_bytes(self) -> int | None:
        """memory.current less reclaimable page cache: ``current − (file − shmem)``.

        Shared memory is counted in ``file`` but cannot be reclaimed without swap, so it stays.
        """
        if self.memory_current_bytes is None:
            return None
        cache = self.memory_stat.get("file", 0) - self.memory_stat.get("shmem", 0)
        return max(0, self.memory_current_bytes - max(0, cache))


@dataclass(frozen=True)
class HostSample:
    """The host as a whole at ``time_s`` (monotonic seconds): CPU time all CPUs spent busy since
    boot (µs; /proc/stat, everything but idle and iowait) and ``MemAvailable`` (bytes;
    /proc/meminfo: what can be allocated without swapping, reclaimable cache included). None
    where the kernel does not say."""

    time_s: float
    cpu_busy_usec: int | None
    memory_available_bytes: int | None
