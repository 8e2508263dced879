"""Per-uid measurement from /proc (psutil), for hosts without per-user cgroups.

Rates are built from *per-process* deltas, so a process that
exits between two samples never makes a user's total go backwards: processes seen in both
samples contribute their CPU time difference, processes started since the previous sample
contribute all of theirs, exited ones contribute nothing for that interval.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import psutil

from monitors.model import LAST_UID

__all__ = ["ProcessSample", "UidUsage", "ProcSampler"]

_ATTRS = ["pid", "uids", "cpu_times", "memory_info", "io_counters", "create_time"]


@dataclass(frozen=True)
class ProcessSample:
    """What one process had used by ``time_s``: CPU seconds, resident bytes, disk bytes."""

    uid: int
    cpu_s: float
    rss_bytes: int
    read_bytes: int | None
    write_bytes: int | None


@dataclass
class UidUsage:
    """One uid's use over an interval: cores, resident memory (bytes), disk bytes/s, process count."""

    cpu_cores: float = 0.0
    memory_rss_bytes: int = 0
    read_bytes_per_s: float = 0.0
    write_bytes_per_s: float = 0.0
    processes: int = 0
    pids: list[int] = field(default_factory=list)


class ProcSampler:
    """Samples every process each call and turns per-process deltas into per-uid usage.

    Args:
        clock: monotonic seconds.
        min_uid: ignore processes of uids below this (system accounts).
        max_uid: ignore processes of uids above this (none by default; 60000 leaves out systemd's
            dynamic users). nobody is left out by the caller (:func:`monitors.users.is_governed`).
        processes: iterable factory yielding psutil-like process info dicts (tests inject).
    """

    def __init__(self, clock: Callable[[], float], min_uid: int = 0,
                 processes: Callable[[], Iterable[dict]] | None = None,
                 wall_clock: Callable[[], float] = time.time, max_uid: int = LAST_UID):
        self._clock, self._wall_clock = clock, wall_clock
        self._prev_wall = 0.0
        self._min_uid, self._max_uid = min_uid, max_uid
        self._processes = processes or _psutil_processes
        self._prev: dict[tuple[int, float], ProcessSample] = {}
        self._prev_time: float | None = None
        self.last_interval_s: float | None = None  # length of the interval the last sample covered

    def sample(self) -> dict[int, UidUsage]:
        """Usage per uid since the previous call (rates are 0 on the first call)."""
        now, wall = self._clock(), self._wall_clock()
        current: dict[tuple[int, float], ProcessSample] = {}
        usage: dict[int, UidUsage] = defaultdict(UidUsage)
        dt = None if self._prev_time is None else now - self._prev_time
        for info in self._processes():
            uid = info["uids"].real if info.get("uids") else None
            if uid is None or not self._min_uid <= uid <= self._max_uid or info.get("cpu_times") is None:
                continue
            io = info.get("io_counters")
            proc = ProcessSample(
                uid, info["cpu_times"].user + info["cpu_times"].system,
                info["memory_info"].rss if info.get("memory_info") else 0,
                io.read_bytes if io else None, io.write_bytes if io else None,
            )
            key = (info["pid"], info.get("create_time") or 0.0)
            current[key] = proc
            u = usage[uid]
            u.memory_rss_bytes += proc.rss_bytes
            u.processes += 1
            u.pids.append(info["pid"])
            if dt and dt > 0:
                was = self._prev.get(key)
                started_since = was is None and key[1] >= self._prev_wall  # create_time is wall-clock
                if was is not None or started_since:
                    u.cpu_cores += max(0.0, proc.cpu_s - (was.cpu_s if was else 0.0)) / dt
                    u.read_bytes_per_s += _delta(was and was.read_bytes, proc.read_bytes) / dt
                    u.write_bytes_per_s += _delta(was and was.write_bytes, proc.write_bytes) / dt
        self._prev, self._prev_time, self._prev_wall = current, now, wall
        self.last_interval_s = dt
        return dict(usage)


def _delta(prev: int | None, cur: int | None) -> int:
    if cur is None:
        return 0
    return max(0, cur - (prev or 0))


def _psutil_processes() -> Iterable[dict]:
    for proc in psutil.process_iter(_ATTRS, ad_value=None):
        yield proc.info
