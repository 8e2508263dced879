"""A simulated host for control-loop tests: users with true demands, and a fake kernel that
obeys the limits the governor writes (cpu.max, cpu.weight, memory.high). Counters are
cumulative like the real files, so the loop's rate code runs unchanged."""

from dataclasses import dataclass, field
from pathlib import Path

from cgroups import Cgroup, CgroupGone, CpuMax, CpuStat, IoMax, MemoryEvents, Pressure, PressureLine
from governor.enforce.model import EnforceError, LimitSet, Target, TargetGone
from monitors.model import CgroupSample
from monitors.model import GovernedUser

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
    cpu_wait_pct: float = 0.0
    limits: LimitSet = field(default_factory=lambda: LimitSet(CpuMax(None), 100, 0, None, None, {}))


class SimHost:
    """``cores`` CPUs shared by the users; ``step(seconds)`` advances time and counters."""

    def __init__(self, cores: float, memory_bytes: int = 16 * 2**30):
        self.cores, self.memory_bytes, self.now = cores, memory_bytes, 0.0
        self.users: dict[int, SimUser] = {}
        self.fail_writes_for: set[int] = set()

    def add(self, uid, name, want_cores, want_memory_bytes=0) -> SimUser:
        self.users[uid] = SimUser(uid, name, want_cores, want_memory_bytes)
        return self.users[uid]

    def clock(self) -> float:
        return self.now

    def step(self, seconds: float = 1.0) -> None:
        """CPU: each user runs min(want, quota); leftover capacity goes by cpu.weight to the
        users not at their quota or want (a fair-share scheduler). Memory: capped by memory.high."""
        got = {}
        for u in self.users.values():
            quota = u.limits.cpu_max.cores
            got[u.uid] = min(u.want_cores, quota if quota is not None else float("inf"))
        total = sum(got.values())
        if total > self.cores:  # the scheduler shares by weight among the runnable
            weights = {uid: self.users[uid].limits.cpu_weight for uid in got}
            got = _weighted_fill(got, weights, self.cores)
        for u in self.users.values():
            quota = u.limits.cpu_max.cores
            u.usage_usec += round(got[u.uid] * seconds * 1e6)
            # PSI cpu some: the share of time she had runnable work waiting for a CPU
            u.cpu_wait_pct = 100 * max(0.0, u.want_cores - got[u.uid]) / u.want_cores if u.want_cores else 0.0
            periods = round(seconds / PERIOD_S)
            u.nr_periods += periods
            if quota is not None and u.want_cores > quota:
                u.nr_throttled += periods
            high = u.limits.memory_high
            u.memory_bytes = u.want_memory_bytes if high is None else min(u.want_memory_bytes, high)
            if high is not None and u.want_memory_bytes > high:
                u.high_events += 10
        self.now += seconds

    # -- Monitor protocol -------------------------------------------------------------------------

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
            time_s=self.now, cpu=CpuStat(u.usage_usec, u.usage_usec, 0, u.nr_periods, u.nr_throttled, 0),
            memory_current_bytes=u.memory_bytes, memory_stat={"file": 0, "shmem": 0},
            memory_events=MemoryEvents(0, u.high_events, 0, 0, 0), io={},
            pressure={"cpu": Pressure(PressureLine(u.cpu_wait_pct, u.cpu_wait_pct, u.cpu_wait_pct, 0))},
        )


class SimMonitor:
    def __init__(self, host: SimHost):
        self.host = host
        self.exempt = ()

    def close(self):
        pass

    def users(self):
        return self.host.governed()

    def sample(self, user, memory_detail=True, io_detail=True):
        return self.host.sample(user)


@dataclass
class SimBackend:
    """The fake kernel's write side: stores limits in the simulated users; records every write."""

    host: SimHost
    name: str = "sim"
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
