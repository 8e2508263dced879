"""The discrete-event simulation: jobs of tasks onto K machines under one policy.

Events are job submissions, task completions and periodic samples, on one heap. A machine
runs its tasks at a common *rate*: 1 while nothing on it is overcommitted; when a policy
overcommits it (slots, cpu-fair), CPU is time-shared — rate ``cap/committed`` — and memory
swaps, modelled as quadratically worse — ``(cap/committed)²``; the machine's rate is the
lowest of these. Each machine keeps a virtual clock that advances at its rate, so a rate
change moves every finish time on it at once (paper §7.2 explains the slow-downs that this
models: "launch 4 large tasks on a node and cause swapping").

After every event the scheduler places tasks one at a time (see
:mod:`governor.offline.simulation.schedulers`) until nothing more fits. Counts: every task start and
every task finish is one *task event*.
"""

from __future__ import annotations

import heapq
import math
from operator import add, mul, sub
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from governor.offline.simulation.schedulers import Scheduler
from governor.offline.simulation.trace import Cluster, Job

__all__ = ["Outcome", "Series", "simulate"]

_SUBMIT, _FINISH, _SAMPLE = 0, 1, 2
_EPS = 1e-9
#: Most samples kept in a series. Without a horizon samples come every 10 s until the last
#: job ends, which can be years of simulated time: past this many, every other sample is
#: dropped and the spacing doubles, so memory and sampling work stay bounded.
MAX_SAMPLES = 1000
SWAP_EXPONENT = {"memory": 2.0}  # other resources: 1 (time-sharing)


@dataclass
class Series:
    """Samples over time: per-user dominant share of her running tasks, per-resource committed
    fraction of the cluster (above 1 when overcommitted)."""

    time_s: list[float] = field(default_factory=list)
    dominant_share: dict[str, list[float]] = field(default_factory=dict)
    committed: dict[str, list[float]] = field(default_factory=dict)


@dataclass
class Outcome:
    policy: str
    jobs_completed: int
    jobs_completed_by_user: dict[str, int]
    mean_response_s: float | None
    tasks_completed: int
    task_events: int
    mean_utilization: dict[str, float]  # time-average of min(committed, capacity) / capacity
    end_s: float
    series: Series

    def to_json(self) -> dict:
        return {"jobs_completed": self.jobs_completed, "jobs_completed_by_user": self.jobs_completed_by_user,
                "mean_response_s": self.mean_response_s, "tasks_completed": self.tasks_completed,
                "task_events": self.task_events, "mean_utilization": self.mean_utilization, "end_s": self.end_s}


class _JobRun:
    __slots__ = ("job", "submit_s", "pending", "running", "done", "demand", "demand_list", "need")

    def __init__(self, job: Job, submit_s: float, fit_idx):
        self.job, self.submit_s = job, submit_s
        self.pending, self.running, self.done = job.tasks, 0, 0
        self.demand = np.array(job.demand, dtype=float)
        self.demand_list = [float(d) for d in job.demand]
        # what the fit check compares: the fit resources' demands (slots: nothing)
        self.need = () if fit_idx is None else tuple(job.demand[i] for i in fit_idx)


class _User:
    __slots__ = ("name", "weight", "jobs", "alloc", "running", "version", "blocked", "completed", "only")

    def __init__(self, name: str, weight: float, m: int):
        self.name, self.weight = name, weight
        self.jobs: deque[_JobRun] = deque()
        self.alloc = [0.0] * m
        self.running = 0
        self.version = 0
        self.blocked = False
        self.completed = 0
        self.only: int | None = None  # unblocked by room freed on this machine: try it first


class _Sim:
    def __init__(self, policy: Scheduler, cluster: Cluster, jobs: list[Job], weights: dict[str, float],
                 horizon_s: float, sample_s: float, progress: Callable[[float], None] | None):
        self.policy, self.horizon_s, self.sample_s, self.progress = policy, horizon_s, sample_s, progress
        self.resources = list(cluster.capacity)
        m = len(self.resources)
        self.cap = np.array([cluster.capacity[r] for r in self.resources], dtype=float)
        self.total = self.cap * cluster.machines
        self.k = cluster.machines
        self.committed = [[0.0] * m for _ in range(self.k)]  # per machine, per resource
        self.slots_used = np.zeros(self.k, dtype=int)
        self.fit = policy.fit_mask(self.resources)
        self.fit_idx = None if self.fit is None else np.flatnonzero(self.fit)
        self.room = None if self.fit is None else np.repeat(self.cap[self.fit_idx][None, :], self.k, axis=0) + _EPS
        self.room_rows = None if self.room is None else self.room.tolist()  # the same, as lists
        self.can_overcommit = policy.kind in ("slots", "cpu-fair")
        self.blocked: dict[tuple, list] = {}  # need (fit resources) → heap of users blocked on it, by score
        self.head_v = [math.inf] * self.k  # virtual finish time of each machine's pending FINISH event
        self.exponent_list = [SWAP_EXPONENT.get(r, 1.0) for r in self.resources]
        self.cap_list = self.cap.tolist()
        self.total_list = self.total.tolist()
        self.inv_total = [1.0 / t for t in self.total_list]
        self.cpu = self.resources.index("cpu") if "cpu" in self.resources else -1  # what cpu-fair ranks by
        self.committed_total = [0.0] * m  # Σ over machines of committed
        self.in_use = [0.0] * m  # Σ over machines of min(committed, capacity): what really runs
        # per machine, as Python lists (scalar arithmetic on numpy elements is slow)
        self.rate = [1.0] * self.k
        self.vclock = [0.0] * self.k
        self.vstamp = [0.0] * self.k
        self.mversion = [0] * self.k
        self.finishes: list[list] = [[] for _ in range(self.k)]  # per machine: (virtual finish, seq, user, job)
        self.users: dict[str, _User] = {}
        self.weights = weights
        self.events: list = []
        self.seq = 0
        self.order: list = []  # heap of (score, seq, version, user)
        self.now = 0.0
        self.task_events = 0
        self.tasks_done = 0
        self.responses: list[float] = []
        self.series = Series()
        self.util_area = [0.0] * m
        self.util_last_t = 0.0
        self.ceei_target: dict[str, float] = {}
        self.ceei_key = None
        for job in jobs:
            self._push(job.submit_s, _SUBMIT, job)
        self._push(0.0, _SAMPLE, None)

    # -- events -----------------------------------------------------------------------------------

    def _push(self, t: float, kind: int, data) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, data))

    def run(self) -> None:
        events = self.events
        while events:
            t, kind, _, data = heapq.heappop(events)
            if t > self.horizon_s:
                break
            self._account(t)
            self.now = t
            if kind == _FINISH:
                machine, version = data
                if version == self.mversion[machine]:  # else superseded by a rate change
                    self._finish_due(machine)
            elif kind == _SUBMIT:
                self._submit(data, t)
            else:
                self._sample()
                if len(self.series.time_s) > MAX_SAMPLES:
                    self._thin()
                if t + self.sample_s <= self.horizon_s and (events or t == 0.0):
                    self._push(t + self.sample_s, _SAMPLE, None)
                if self.progress is not None:
                    self.progress(t)
                continue
            if events and events[0][0] == t and events[0][1] != _SAMPLE:
                continue  # everything due at this instant first, then one scheduling pass
            self._schedule()
        self._account(min(self.horizon_s, self.now) if math.isfinite(self.horizon_s) else self.now)

    def _submit(self, job: Job, t: float) -> None:
        user = self.users.get(job.user)
        if user is None:
            user = self.users[job.user] = _User(job.user, self.weights.get(job.user, 1.0), len(self.resources))
            self.series.dominant_share[job.user] = [0.0] * len(self.series.time_s)
        user.jobs.append(_JobRun(job, t, self.fit_idx))
        if len(user.jobs) == 1 and not user.blocked:  # she had no work waiting: rank her now
            self._rank(user)

    # -- scheduling -------------------------------------------------------------------------------

    def _score(self, user: _User) -> float:
        kind = self.policy.kind
        if kind == "drf":
            return max(map(mul, user.alloc, self.inv_total)) / user.weight
        if kind == "asset":
            return sum(map(mul, user.alloc, self.inv_total)) / user.weight
        if kind == "cpu-fair":
            return user.alloc[self.cpu] * self.inv_total[self.cpu] / user.weight
        if kind == "ceei":
            target = self._ceei_targets().get(user.name, 0.0)
            return user.running / target if target > 0 else math.inf
        return user.running / user.weight  # slots

    def _rank(self, user: _User) -> None:
        user.version += 1
        self.seq += 1
        heapq.heappush(self.order, (self._score(user), self.seq, user.version, user))

    def _schedule(self) -> None:
        order = self.order
        failed: dict[tuple, None] = {}  # needs that fit nowhere now: larger ones cannot either (until a finish)
        first: dict[tuple, int] = {}  # need → the first machine it fitted on in this pass (room only shrinks)
        while order:
            _, _, version, user = heapq.heappop(order)
            if version != user.version or user.blocked or not user.jobs:
                continue
            run = user.jobs[0]
            if self._known_to_fail(run.need, failed):
                machine = -1
            elif user.only is not None and self._fits_on(user.only, run.need):
                machine = user.only  # the machine whose freed room unblocked her: no scan needed
            elif run.need in first and self._fits_on(first[run.need], run.need):
                machine = first[run.need]  # machines before it had no room for this size then, nor now
            else:
                machine = self._first_fit(run.demand)
                if machine >= 0:
                    first[run.need] = machine
            user.only = None
            if machine < 0:
                self._block(user, run.need)
                failed[run.need] = None
                continue
            self._start(user, run, machine)
            if user.jobs:
                self._rank(user)

    def _known_to_fail(self, need: tuple, failed: dict[tuple, None]) -> bool:
        if not failed:
            return False
        if self.fit is None or need in failed:
            return True  # (slots: every task takes one slot, so no free slot for one is none for all)
        return any(all(a >= b - _EPS for a, b in zip(need, f)) for f in failed)

    def _first_fit(self, demand: np.ndarray) -> int:
        if self.fit is None:
            free = self.slots_used < self.policy.slots
            machine = int(free.argmax())
            return machine if free[machine] else -1
        need = demand[self.fit_idx]
        fits = (self.room >= need).all(axis=1)
        machine = int(fits.argmax())
        return machine if fits[machine] else -1

    def _fits_on(self, machine: int, need: tuple) -> bool:
        if self.room is None:
            return bool(self.slots_used[machine] < self.policy.slots)
        return min(map(sub, self.room_rows[machine], need), default=0.0) >= 0.0

    def _start(self, user: _User, run: _JobRun, machine: int) -> None:
        run.pending -= 1
        run.running += 1
        user.running += 1
        user.alloc = list(map(add, user.alloc, run.demand_list))
        if run.pending == 0:
            user.jobs.popleft()
        self._advance(machine)
        self._commit(machine, run.demand_list, +1)
        if self.room is not None:
            row = self.room_rows[machine] = list(map(sub, self.room_rows[machine], run.need))
            self.room[machine] = row
        self.slots_used[machine] += 1
        self.seq += 1
        heapq.heappush(self.finishes[machine], (self.vclock[machine] + run.job.duration_s, self.seq, user, run))
        self.task_events += 1
        self._rerate(machine)

    def _finish_due(self, machine: int) -> None:
        self._advance(machine)
        heap = self.finishes[machine]
        freed: dict = {}  # ordered, so runs are reproducible
        due = self.vclock[machine] + _EPS * max(1.0, self.vclock[machine])
        while heap and heap[0][0] <= due:
            _, _, user, run = heapq.heappop(heap)
            self._commit(machine, run.demand_list, -1)
            if self.room is not None:
                row = self.room_rows[machine] = list(map(add, self.room_rows[machine], run.need))
                self.room[machine] = row
            self.slots_used[machine] -= 1
            run.running -= 1
            run.done += 1
            user.running -= 1
            user.alloc = list(map(sub, user.alloc, run.demand_list))
            self.task_events += 1
            self.tasks_done += 1
            freed[user] = None
            if run.done == run.job.tasks:
                self._job_done(user, run)
        self._rerate(machine, force=True)  # this event is spent: always leave the next one queued
        for need in [n for n in self.blocked if self._fits_on(machine, n)]:
            self._unblock(need, machine, freed)
        for other in freed:  # her share fell (or she is unblocked): rank her anew
            if other.jobs:
                if other.blocked:
                    self._block(other, other.jobs[0].need)  # still waiting, with her new score
                else:
                    other.only = machine  # as Mesos offers freed resources: try where room just appeared
                    self._rank(other)

    def _block(self, user: _User, need: tuple) -> None:
        """She waits until a task finishes on a machine where a task of hers then fits."""
        user.blocked = True
        user.version += 1  # her entries in the scheduling order are void
        self.seq += 1
        heapq.heappush(self.blocked.setdefault(need, []), (self._score(user), self.seq, user.version, user))

    def _unblock(self, need: tuple, machine: int, freed: dict) -> None:
        """Room for ``need`` appeared on ``machine``: unblock, best score first, as many users
        as tasks of that size now fit there (the others would only fail again)."""
        heap, room = self.blocked[need], self._count_fits(machine, need)
        while room > 0 and heap:
            _, _, version, user = heapq.heappop(heap)
            if version != user.version or not user.blocked:
                continue
            user.blocked, user.only = False, machine
            freed[user] = None
            room -= 1
        if not heap:
            del self.blocked[need]

    def _count_fits(self, machine: int, need: tuple) -> int:
        if self.room is None:
            return self.policy.slots - int(self.slots_used[machine])
        counts = [int(r // n) for r, n in zip(self.room_rows[machine], need) if n > 0]
        return min(counts) if counts else 1 << 30

    def _job_done(self, user: _User, run: _JobRun) -> None:
        self.responses.append(self.now - run.submit_s)
        user.completed += 1
        if run.job.repeat and self.now < self.horizon_s:
            self._submit(run.job, self.now)

    # -- machine clocks ---------------------------------------------------------------------------

    def _advance(self, machine: int) -> None:
        self.vclock[machine] += (self.now - self.vstamp[machine]) * self.rate[machine]
        self.vstamp[machine] = self.now

    def _rerate(self, machine: int, force: bool = False) -> None:
        """After the machine's load changed: its new rate, and its next finish if that moved."""
        changed = False
        if self.can_overcommit:
            rate = 1.0
            for used, cap, exponent in zip(self.committed[machine], self.cap_list, self.exponent_list):
                if used > cap:
                    rate = min(rate, (cap / used) ** exponent)
            if rate != self.rate[machine]:
                self.rate[machine], changed = rate, True
        heap = self.finishes[machine]
        head = heap[0][0] if heap else math.inf
        if not (changed or force) and head == self.head_v[machine]:
            return  # the pending FINISH event is still right
        self.mversion[machine] += 1
        self.head_v[machine] = head
        if heap:
            t = self.now + max(0.0, head - self.vclock[machine]) / self.rate[machine]
            self._push(t, _FINISH, (machine, self.mversion[machine]))

    # -- CEEI targets -----------------------------------------------------------------------------

    def _ceei_targets(self) -> dict[str, float]:
        active = [u for u in self.users.values() if u.jobs or u.running]
        key = tuple((u.name, tuple(u.jobs[0].job.demand) if u.jobs else None) for u in active)
        if key != self.ceei_key:
            from governor.fairness.alternatives import ceei

            demand = np.array([u.jobs[0].demand if u.jobs else np.zeros(len(self.resources)) for u in active])
            caps = np.array([u.running + sum(r.pending for r in u.jobs) for u in active], dtype=float)
            weights = np.array([u.weight for u in active])
            units = ceei(self.total, demand, weights, caps).units if active else []
            self.ceei_target = {u.name: float(x) for u, x in zip(active, units)}
            self.ceei_key = key
        return self.ceei_target

    # -- measurement ------------------------------------------------------------------------------

    def _commit(self, machine: int, demand: list[float], sign: int) -> None:
        """Commit (sign +1) or release (-1) ``demand`` on the machine, keeping the cluster's
        Σ min(committed, capacity) — what is really in use — up to date."""
        was = self.committed[machine]
        op = add if sign > 0 else sub
        now = self.committed[machine] = list(map(op, was, demand))
        self.committed_total = list(map(op, self.committed_total, demand))
        if not self.can_overcommit:  # never above capacity: in use = committed
            self.in_use = list(map(op, self.in_use, demand))
            return
        self.in_use = [u - min(w, c) + min(n, c) for u, w, n, c in zip(self.in_use, was, now, self.cap_list)]

    def _account(self, t: float) -> None:
        dt = t - self.util_last_t
        if dt > 0:
            self.util_area = [a + u * dt for a, u in zip(self.util_area, self.in_use)]
            self.util_last_t = t

    def _sample(self) -> None:
        s = self.series
        s.time_s.append(self.now)
        for name, user in self.users.items():
            s.dominant_share[name].append(max(map(mul, user.alloc, self.inv_total)))
        committed = [c / t for c, t in zip(self.committed_total, self.total_list)]
        for j, r in enumerate(self.resources):
            s.committed.setdefault(r, []).append(float(committed[j]))

    def _thin(self) -> None:
        """Keep every other sample (the first and the latest among them) and double the spacing."""
        s = self.series
        s.time_s[:] = s.time_s[::2]
        for series in (*s.dominant_share.values(), *s.committed.values()):
            series[:] = series[::2]
        self.sample_s *= 2

    def outcome(self) -> Outcome:
        end = self.util_last_t
        util = {r: float(self.util_area[j] / (self.total[j] * end)) if end > 0 else 0.0
                for j, r in enumerate(self.resources)}
        by_user = {name: u.completed for name, u in sorted(self.users.items())}
        mean = sum(self.responses) / len(self.responses) if self.responses else None
        return Outcome(self.policy.name, len(self.responses), by_user, mean, self.tasks_done, self.task_events,
                       util, end, self.series)


class TaskTooBig(ValueError):
    """A task of ``job`` needs more of some resource than a whole machine of ``cluster`` has."""

    def __init__(self, job: Job, cluster: Cluster):
        def amounts(values) -> str:
            return ", ".join(f"{r}={v:g}" for r, v in zip(cluster.capacity, values))

        super().__init__(f"a task of {job.user}'s job needs {amounts(job.demand)}: more than a whole machine "
                         f"({amounts(cluster.capacity.values())})")
        self.job = job


def simulate(policy: Scheduler, cluster: Cluster, jobs: list[Job], weights: dict[str, float] | None = None,
             horizon_s: float | None = None, sample_s: float | None = None,
             progress: Callable[[float], None] | None = None) -> Outcome:
    """Run ``jobs`` on ``cluster`` under ``policy`` until ``horizon_s`` (None: until all finish).

    ``sample_s``: spacing of the time series (default: horizon/200, or 10 s). ``progress(t)`` is
    called at each sample with the simulated time.

    Raises:
        TaskTooBig: a task that no machine could ever hold (larger than a machine) under a
            policy that checks resources — it would wait forever.
    """
    cap = np.array(list(cluster.capacity.values()), dtype=float)
    mask = policy.fit_mask(list(cluster.capacity))
    if mask is not None:
        for job in jobs:
            if np.any(np.array(job.demand)[mask] > cap[mask] + _EPS):
                raise TaskTooBig(job, cluster)
    horizon = math.inf if horizon_s is None else horizon_s
    step = sample_s or (horizon / 200 if math.isfinite(horizon) else 10.0)
    sim = _Sim(policy, cluster, jobs, weights or {}, horizon, step, progress)
    sim.run()
    return sim.outcome()
