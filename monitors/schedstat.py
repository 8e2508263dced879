"""Her threads' scheduler accounting: time on a CPU and time waiting for one, per thread.

Source: ``/proc/TID/schedstat`` (Documentation/scheduler/sched-stats.rst, "/proc/<pid>/schedstat":
time spent on the CPU, time spent waiting on a run queue, in ns; CONFIG_SCHED_INFO, which
Debian, Ubuntu and EL kernels enable). A task's wait counts from the moment it is queued until
it runs, and CFS bandwidth throttling keeps a throttled group's tasks queued, so a thread held
back by ``cpu.max`` accrues its throttled time as wait, like the time other users' threads ran
before it (kernel/sched/stats.h, ``sched_info_enqueue``/``sched_info_arrive``). Measured on this
project's build host (Linux 6.18): one busy loop under a 0.3-core quota read run 0.296 + wait
0.704 = 1.000 s per second, while its cgroup's ``throttled_time`` read 0.576.

That is what her CPU demand needs and no cgroup counter gives: cpu.stat ``throttled_usec`` sums
the throttled time of each CPU's run queue of hers (one loop throttled on two CPUs counts twice;
waiting behind other users' threads not at all), and PSI ``some`` is a share of wall time, not
of threads. :func:`monitors.rates.usage_between` turns two readings into her threads' demand.

Read only for users throttled by their CPU quota over the last interval (``cpu_detail`` of
the monitor's ``sample``; two readings in a row make the first figure, so it comes the second
tick after throttling starts and the cgroup counters serve until then):
``cgroup.threads`` (v1: ``tasks`` in the cpu hierarchy) of her slice and of each cgroup below
it, then one small file per thread,
opened and closed (thread ids come and go; none is kept open), and its ``status``. A user with more than
:data:`MAX_THREADS` threads or :data:`MAX_CGROUPS` cgroups is not read (None): her CPU demand
then comes from cpu.stat and PSI.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from monitors.model import ThreadSchedstats

__all__ = ["MAX_CGROUPS", "MAX_THREADS", "THREADS_V1", "THREADS_V2", "read_threads", "thread_schedstats"]

THREADS_V2 = "cgroup.threads"  # Documentation/admin-guide/cgroup-v2.rst, "Threads"
THREADS_V1 = "tasks"  # Documentation/admin-guide/cgroup-v1/cgroups.rst, 1.5: thread ids

#: The most threads read for one user in one tick (two /proc files each).
MAX_THREADS = 512
#: The most cgroups of hers walked in one tick (one cgroup.threads and one listing each).
MAX_CGROUPS = 256
_VOLUNTARY = b"\nvoluntary_ctxt_switches:"


def read_threads(cgroup_dir: str | os.PathLike[str], clock: Callable[[], float], procfs: str = "/proc",
                 threads_file: str = THREADS_V2) -> ThreadSchedstats | None:
    """:func:`thread_schedstats`, timed on its own (``clock()`` just before): read after her
    other files, it must not share their time, or a late reading of a busy loop counts as sleep."""
    now = clock()
    found = thread_schedstats(cgroup_dir, procfs, threads_file=threads_file)
    return None if found is None else ThreadSchedstats(now, found)


def thread_schedstats(cgroup_dir: str | os.PathLike[str], procfs: str = "/proc", max_threads: int = MAX_THREADS,
                      threads_file: str = THREADS_V2, max_cgroups: int = MAX_CGROUPS
                      ) -> dict[int, tuple[int, int, int]] | None:
    """``{tid: (run_ns, wait_ns, voluntary_ctxt_switches)}`` (cumulative) for every thread in
    ``cgroup_dir`` and the cgroups below it, listed by ``threads_file`` (v2's
    ``cgroup.threads``, v1's ``tasks``). The switches come from ``/proc/TID/status``
    (proc(5)): a thread that blocked — on its disk, a timer, a lock — switched voluntarily; a
    busy loop, preempted or throttled, never does.

    Threads that exit while being read, and cgroups below hers removed meanwhile, are left out.
    Returns None when she has more than ``max_threads`` threads or ``max_cgroups`` cgroups (her
    delegated ``user@UID.service`` subtree is hers to fill), or when her cgroup or /proc cannot
    be read (a kernel without CONFIG_SCHED_INFO; her slice being removed): the caller then has
    no thread accounting for her. Raises nothing.
    """
    root = os.fspath(cgroup_dir)
    tids: list[int] = []
    pending, walked = [root], 0
    while pending:
        directory = pending.pop()
        walked += 1
        if walked > max_cgroups:
            return None  # her delegated subtree may hold any number of cgroups: not walked
        try:
            with open(os.path.join(directory, threads_file), "rb") as f:
                tids.extend(int(line) for line in f.read().split())
            with os.scandir(directory) as entries:
                for e in entries:  # lazily: one directory of hers may hold any number of children
                    if e.is_dir(follow_symlinks=False):
                        pending.append(e.path)
                        if walked + len(pending) > max_cgroups:
                            return None
        except (FileNotFoundError, ProcessLookupError):
            if directory == root:
                return None  # her slice is gone
            continue  # a scope removed while walking (a logout): its threads are gone
        except (OSError, ValueError):
            return None
        if len(tids) > max_threads:
            return None
    out: dict[int, tuple[int, int, int]] = {}
    for tid in tids:
        try:
            with open(os.path.join(procfs, str(tid), "schedstat"), "rb") as f:
                fields = f.read().split()
            with open(os.path.join(procfs, str(tid), "status"), "rb") as f:
                status = f.read()
            at = status.index(_VOLUNTARY) + len(_VOLUNTARY)
            out[tid] = (int(fields[0]), int(fields[1]), int(status[at:status.index(b"\n", at)]))
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited since cgroup.threads was read (ESRCH: between open and read)
        except (OSError, ValueError, IndexError):
            return None  # no schedstat on this kernel, or a format we do not know
    return out
