"""A simulated host for control-loop tests: users with true demands, and a fake kernel that
obeys the limits the governor writes (cpu.max, cpu.weight, memory.high, io.max on one disk).
Counters are cumulative like the real files, so the loop's rate code runs unchanged.

The disk: a user wants a fraction ``want_disk`` of its read bandwidth (what she reads alone;
1.0 = she would read as fast as it goes). She reads ``min(want, her io.max)``, and when the
readers want more than the disk does they share it max-min fairly. Her I/O stall (PSI io
``some``) follows Amdahl's law: alone she spends ``want`` of her time waiting on the disk and
the rest on other work; given ``got < want`` her other work slows by ``got/want``. The CPU
her reading costs (``io_cpu_cores`` at her full rate) scales with what she reads.
"""

from dataclasses import dataclass, field
from pathlib import Path

from cgroups import Cgroup, CgroupGone, CpuMax, CpuStat, IoMax, IoStat, MemoryEvents, PressureTotals
from governor.enforce.model import EnforceError, LimitSet, Target, TargetGone
from monitors.model import CgroupSample, GovernedUser, HostSample

PERIOD_S = 0.1  # CFS period: 100 ms


@dataclass
class SimUser:
    uid: int
    name: str
    want_cores: float
    want_memory_bytes: int = 0
    usage_usec: int = 0
    nr_periods: int = 0
    nr_throttled: int = 0
    memory_bytes: int = 0
    high_events: int = 0
    throttled_usec: int = 0
    cpu_some_usec: int = 0
    want_disk: float = 0.0
    io_cpu_cores: float = 0.0  # CPU her reading costs at the full disk (it scales with what she reads)
    disk_got: float = 0.0
    read_bytes: int = 0
    io_some_usec: int = 0
    io_full_usec: int = 0
    cpu_full_usec: int = 0
    limits: LimitSet = field(default_factory=lambda: LimitSet(CpuMax(None), 100, 0, None, None, {}))


class SimHost:
    """``cores`` CPUs shared by the users; ``step(seconds)`` advances time and counters."""

    DISK = "8:0"

    def __init__(self, cores: float, memory_bytes: int = 16 * 2**30, disk_bytes_per_s: float = 100 * 2**20):
        self.cores, self.memory_bytes, self.now = cores, memory_bytes, 0.0
        self.disk_bytes_per_s = disk_bytes_per_s
        self.users: dict[int, SimUser] = {}
        self.fail_writes_for: set[int] = set()
        self.busy_usec = 0  # all CPUs' busy time, as /proc/stat counts it
        self.system_cores = 0.0  # what runs outside the users' slices (it takes its CPUs first)
        self.system_memory_bytes = 0  # what the rest of the host holds

    def add(self, uid, name, want_cores, want_memory_bytes=0) -> SimUser:
        self.users[uid] = SimUser(uid, name, want_cores, want_memory_bytes)
        return self.users[uid]

    def clock(self) -> float:
        return self.now

    def step(self, seconds: float = 1.0) -> None:
        """CPU: each user runs min(want, quota); leftover capacity goes by cpu.weight to the
        users not at their quota or want (a fair-share scheduler). Memory: capped by memory.high."""
        self._step_disk(seconds)
        got = {}
        for u in self.users.values():
            quota = u.limits.cpu_max.cores
            got[u.uid] = min(self._cpu_want(u), quota if quota is not None else float("inf"))
        total, cores = sum(got.values()), self.cores - self.system_cores
        if total > cores:  # the scheduler shares by weight among the runnable
            weights = {uid: self.users[uid].limits.cpu_weight for uid in got}
            got = _weighted_fill(got, weights, cores)
        self.busy_usec += round((sum(got.values()) + self.system_cores) * seconds * 1e6)
        for u in self.users.values():
            quota = u.limits.cpu_max.cores
            u.usage_usec += round(got[u.uid] * seconds * 1e6)
            # PSI cpu some: the share of time she had runnable work waiting for a CPU
            want = self._cpu_want(u)
            periods = round(seconds / PERIOD_S) if want else 0  # the period timer runs while she has work
            u.nr_periods += periods
            waiting = max(0.0, want - got[u.uid])  # cores' worth of runnable threads not running
            if quota is not None and want > quota:
                u.nr_throttled += periods
                u.throttled_usec += round(min(waiting, want - quota) * seconds * 1e6)  # per throttled run queue
            u.cpu_some_usec += round(min(1.0, waiting) * seconds * 1e6)  # PSI some: at least one waiting
            if not u.want_disk and want:  # PSI full: all her tasks wait for a CPU (a reader would be in I/O)
                u.cpu_full_usec += round(waiting / want * seconds * 1e6)
            high = u.limits.memory_high
            u.memory_bytes = u.want_memory_bytes if high is None else min(u.want_memory_bytes, high)
            if high is not None and u.want_memory_bytes > high:
                u.high_events += 10
        self.now += seconds

    @staticmethod
    def _cpu_want(u: SimUser) -> float:
        return u.want_cores + (u.io_cpu_cores * u.disk_got / u.want_disk if u.want_disk else 0.0)

    def _step_disk(self, seconds: float) -> None:
        readers = {}
        for u in self.users.values():
            if u.want_disk > 0:
                io = u.limits.io_max.get(self.DISK)
                cap = io.rbps / self.disk_bytes_per_s if io is not None and io.rbps is not None else float("inf")
                readers[u.uid] = min(u.want_disk, cap)
        if sum(readers.values()) > 1.0:
            readers = _weighted_fill(readers, {uid: 1.0 for uid in readers}, 1.0)
        for u in self.users.values():
            u.disk_got = readers.get(u.uid, 0.0)
        for uid, got in readers.items():
            u = self.users[uid]
            u.read_bytes += round(got * self.disk_bytes_per_s * seconds)
            stalled = 1.0 - (1.0 - u.want_disk) * got / u.want_disk
            u.io_some_usec += round(stalled * seconds * 1e6)
            if not u.want_cores:  # PSI full: only when nothing of hers runs beside the reader
                u.io_full_usec += round(stalled * seconds * 1e6)

    # -- Monitor protocol -------------------------------------------------------------------------

    def host_sample(self) -> HostSample:
        """The simulated host: busy = what the users ran (nothing else runs), memory available
        = total less what the users hold."""
        held = sum(u.memory_bytes for u in self.users.values())
        return HostSample(self.now, self.busy_usec, self.memory_bytes - held - self.system_memory_bytes)

    def governed(self) -> list[GovernedUser]:
        """Users with a "slice"; like SliceDiscovery, a user's object lives as long as she does."""
        cache = self.__dict__.setdefault("_governed", {})
        out = []
        for u in self.users.values():
            user = cache.get(u.uid)
            if user is None or user.name != u.name:
                user = cache[u.uid] = GovernedUser(u.uid, u.name, Cgroup(Path(f"/sim/user.slice/user-{u.uid}.slice")))
            out.append(user)
        return out

    def sample(self, user: GovernedUser) -> CgroupSample:
        u = self.users.get(user.uid)
        if u is None:
            raise CgroupGone(user.cgroup.path)
        return CgroupSample(
            time_s=self.now, cpu=CpuStat(u.usage_usec, u.usage_usec, 0, u.nr_periods, u.nr_throttled, u.throttled_usec),
            memory_current_bytes=u.memory_bytes, memory_stat={"file": 0, "shmem": 0},
            memory_events=MemoryEvents(0, u.high_events, 0, 0, 0),
            io={self.DISK: IoStat(u.read_bytes, 0, 0, 0)},
            pressure={"cpu": PressureTotals(u.cpu_some_usec, u.cpu_full_usec),
                      "io": PressureTotals(u.io_some_usec, u.io_full_usec)},
        )


def run_ticks(host: SimHost, gov, ticks: int) -> list:
    """``ticks`` ticks of ``gov`` (a :class:`governor.control.loop.Governor`), the host stepping a
    second after each; their reports."""
    reports = []
    for _ in range(ticks):
        reports.append(gov.tick())
        host.step(1.0)
    return reports


class SimMonitor:
    def __init__(self, host: SimHost):
        self.host = host
        self.exempt = ()

    def close(self):
        pass

    def users(self):
        return self.host.governed()

    def host_sample(self):
        return self.host.host_sample()

    def sample(self, user, memory_detail=True, io_detail=True, cpu_detail=False, kept=None):
        return self.host.sample(user)

    def slice_id(self, user):
        return user.slice_id

    def unmoved(self, user, kept, io_detail):
        """As the cgroup monitor tells it: her CPU time, memory (and disk bytes) are ``kept``'s."""
        now = self.host.sample(user)
        return (now.cpu == kept.cpu and now.memory_current_bytes == kept.memory_current_bytes
                and (not io_detail or now.io == kept.io))


@dataclass
class SimBackend:
    """The fake kernel's write side: stores limits in the simulated users; records every write."""

    host: SimHost
    name: str = "sim"
    limits_outlive_cgroup = False  # a user removed takes her limits with her
    memory_high_throttles = True  # the simulated kernel caps memory at memory.high
    writes: list = field(default_factory=list)

    def _user(self, target: Target) -> SimUser:
        if target.uid not in self.host.users:
            raise TargetGone(f"{target.unit}: gone")
        if target.uid in self.host.fail_writes_for:
            raise EnforceError(f"{target.unit}: refused (simulated EBUSY)")
        return self.host.users[target.uid]

    def _set(self, target, **changes):
        u = self._user(target)
        self.writes.append((self.host.now, target.uid, changes))
        values = {**u.limits.__dict__, **changes}
        u.limits = LimitSet(**values)

    def read(self, target):
        return self._user(target).limits

    def memory_current(self, target):
        return self._user(target).memory_bytes

    def releasing(self):
        from contextlib import nullcontext

        return nullcontext()

    def set_cpu_max(self, target, limit):
        self._set(target, cpu_max=limit)

    def set_cpu_weight(self, target, weight):
        self._set(target, cpu_weight=weight)

    def set_memory(self, target, knob, limit_bytes):
        self._set(target, **{knob.file.replace(".", "_"): limit_bytes})

    def set_io_max(self, target, device, limit: IoMax):
        io = dict(self._user(target).limits.io_max)
        if limit.unlimited:
            io.pop(device, None)
        else:
            io[device] = limit
        self._set(target, io_max=io)


def _weighted_fill(wants: dict, weights: dict, capacity: float) -> dict:
    """Weighted max-min (water-filling) of ``capacity`` over ``wants``."""
    got, active, left = {k: 0.0 for k in wants}, set(wants), capacity
    while active and left > 1e-12:
        total_w = sum(weights[k] for k in active)
        share = {k: left * weights[k] / total_w for k in active}
        done = {k for k in active if wants[k] - got[k] <= share[k]}
        if not done:
            for k in active:
                got[k] += share[k]
            break
        for k in done:
            left -= wants[k] - got[k]
            got[k] = wants[k]
        active -= done
    return got
