"""The control loop: one tick measures, estimates demand, runs weighted DRF, plans and writes.

Everything that touches the world is injected — the clock, the :class:`Monitor` (users and
their counters) and the enforcement backend — so the same loop runs on a real host, in
``--dry-run``, and in simulated-host tests. One tick:

discover users → sample counters → usage over the interval (a counter that went backwards
gives no rate) → demand (:mod:`governor.control.demand`) → weighted progressive filling over CPU,
memory and each disk (:mod:`governor.fairness.drf`; a user wants ``x ≤ 1`` of her demand vector) →
limits (:mod:`governor.control.plan`) → write only the knobs that moved beyond the hysteresis band.

One user's failure (slice gone, write refused) is recorded in her report and never stops the
tick. Before the first write to a user, her original limits are snapshotted for restore.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from cgroups import CgroupError, IoMax
from governor.control.demand import DemandParams, DemandState, estimate_demand, held_back
from governor.fairness.drf import progressive_filling
from governor.enforce import Backend, EnforceError, LimitSet, Target, TargetGone, apply_limit_set
from governor.control.plan import DiskPlan, Limits, MemoryState, UserPlanInput, changed_knobs, in_force, plan_user
from governor.control.netplan import net_held, net_rates, plan_net, settle
from governor.config.policy import Policy
from governor.shaping.htb import ClassRate, ShapingError
from governor.shaping.shaper import Link, NetSample
from monitors.rates import Usage, usage_between
from monitors.sample import CgroupSample
from monitors.users import GovernedUser

__all__ = ["Capacity", "Governor", "Monitor", "TickReport", "UserReport", "weight_kind"]

def weight_kind(resource: str) -> str:
    """The weight that applies to a resource: its own (cpu, memory), ``io`` for a disk, ``net``
    for a direction of an interface."""
    if resource.startswith("disk:"):
        return "io"
    return "net" if resource.startswith("net:") else resource


class Network(Protocol):
    """Per-user shaping (:class:`governor.shaping.shaper.Shaper`): the links it shapes, their
    counters per uid, and the classes to have. It raises ShapingError when the kernel refuses."""

    links: Mapping[str, Link]
    in_force: Mapping[str, Mapping[int, ClassRate]]

    def sample(self, uids: Collection[int]) -> NetSample: ...

    def apply(self, wanted: Mapping[str, Mapping[int, ClassRate]]) -> list[str]: ...


class Monitor(Protocol):
    """What the loop needs to see: governed users and one sample of a user's counters.

    ``exempt`` (uids or login names never listed by :meth:`users`) may be replaced on reload.
    """

    exempt: Collection[int | str]

    def users(self) -> list[GovernedUser]: ...

    def sample(self, user: GovernedUser, memory_detail: bool = True, io_detail: bool = True) -> CgroupSample:
        """Her counters now. ``memory_detail``: memory.events and memory PSI are wanted (she
        has a memory.high in force); ``io_detail``: io.stat and io PSI are wanted (disks are
        governed). A monitor may skip what is not wanted, to save reads."""
        ...


@dataclass(frozen=True)
class Capacity:
    """Capacity the users share: cores, bytes, per disk ``"MAJ:MIN"`` its (read, write) bytes/s,
    and per shaped link (``net:IF:tx``/``net:IF:rx``) its bits/s."""

    cpu_cores: float
    memory_bytes: float
    disks: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    links: Mapping[str, float] = field(default_factory=dict)

    def vector(self) -> dict[str, float]:
        """Resource name → capacity; a disk is one resource measured in fraction of its time (1.0)."""
        out = {"cpu": self.cpu_cores, "memory": self.memory_bytes}
        out.update({f"disk:{d}": 1.0 for d in self.disks})
        out.update(self.links)
        return out


@dataclass
class UserReport:
    """One user's tick: what she used and demanded, what DRF gave her, what was written and why."""

    uid: int
    name: str
    weight: dict[str, float]
    usage: dict[str, float] = field(default_factory=dict)
    demand: dict[str, float] = field(default_factory=dict)
    allocation: dict[str, float] = field(default_factory=dict)
    dominant_resource: str | None = None
    dominant_share: float = 0.0
    weighted_share: float = 0.0
    limits: Limits | None = None  # in force: what the kernel holds after this tick's writes
    planned: Limits | None = None  # this tick's plan (within the hysteresis band it may differ)
    classes: dict[str, ClassRate] = field(default_factory=dict)  # per link: her HTB class in force
    written: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class TickReport:
    time_s: float
    users: dict[int, UserReport]
    capacity: dict[str, float]
    saturated: list[str]
    errors: int = 0
    network_error: str | None = None  # shaping failed this tick (users' cgroup limits still applied)


@dataclass
class _UserState:
    sample: CgroupSample | None = None
    demand: DemandState | None = None
    written: Limits | None = None


class Governor:
    """Runs ticks. ``weight_of(user) -> {kind: weight}`` gives per-kind weights (cpu, memory, io)."""

    def __init__(self, policy: Policy, capacity: Capacity, monitor: Monitor, backend: Backend,
                 clock: Callable[[], float], weight_of: Callable[[GovernedUser], Mapping[str, float]],
                 demand_params: DemandParams = DemandParams(),
                 on_snapshot: Callable[[Mapping[int, tuple[Target, LimitSet]]], None] | None = None,
                 network: Network | None = None):
        """``on_snapshot(originals)`` runs after a slice's original limits are added to
        :attr:`originals` and before the first write to it (the daemon persists them there).
        ``network``: per-user shaping; its links must be in ``capacity.links``."""
        self.policy, self.capacity, self.monitor, self.backend = policy, capacity, monitor, backend
        self.network = network
        self.net_sample: NetSample | None = None
        self.clock, self.weight_of, self.demand_params = clock, weight_of, demand_params
        self.on_snapshot = on_snapshot
        self.state: dict[int, _UserState] = {}
        self.originals: dict[int, tuple[Target, LimitSet]] = {}

    # -- one tick ---------------------------------------------------------------------------------

    def tick(self) -> TickReport:
        now = self.clock()
        users = {u.uid: u for u in self.monitor.users()}
        for uid in set(self.state) - set(users):
            del self.state[uid]  # she logged out: her slice is gone with its limits
            self.originals.pop(uid, None)
        reports: dict[int, UserReport] = {}
        measured: list[tuple[GovernedUser, Usage]] = []
        capacity = self.capacity.vector()
        net_prev, net_error = self.net_sample, None
        try:
            self.net_sample = self.network.sample(list(users)) if self.network is not None else None
        except ShapingError as exc:
            net_error, self.net_sample = f"sample: {exc}", None
        for uid, user in sorted(users.items()):
            report = UserReport(uid, user.name, dict(self.weight_of(user)))
            reports[uid] = report
            usage = self._measure(user, report, capacity, net_prev)
            if usage is not None:
                measured.append((user, usage))
        saturated = self._allocate(measured, reports, capacity)
        memory_weights = sum(r.weight.get("memory", 1.0) for r in reports.values()) or 1.0
        for user, usage in measured:
            report = reports[user.uid]
            guaranteed = self.capacity.memory_bytes * report.weight.get("memory", 1.0) / memory_weights
            self._enforce(user, usage, report, saturated, guaranteed)
        if self.net_sample is not None:
            net_error = self._shape(measured, reports, saturated)
        return TickReport(now, reports, capacity, sorted(saturated), sum(1 for r in reports.values() if r.error),
                          net_error)

    def _measure(self, user: GovernedUser, report: UserReport, capacity: dict[str, float],
                 net_prev: NetSample | None) -> Usage | None:
        state = self.state.setdefault(user.uid, _UserState())
        try:
            written = state.written
            sample = self.monitor.sample(user, memory_detail=written is not None and written.memory_high is not None,
                                         io_detail=bool(self.capacity.disks))
        except CgroupError as exc:
            report.error = f"sample: {exc}"
            self.state.pop(user.uid, None)
            return None
        prev, state.sample = state.sample, sample
        if prev is None:
            return None  # first sight: no interval yet
        usage = usage_between(prev, sample)
        vector, held = self._usage_vector(usage, state.written)
        if self.net_sample is not None:
            rates = net_rates(net_prev, self.net_sample, user.uid)
            in_force = {r: classes.get(user.uid) for r, classes in self.network.in_force.items()}
            vector.update(rates)
            held.update(net_held(net_prev, self.net_sample, user.uid, rates, in_force, self.network.links))
        state.demand = estimate_demand(state.demand, vector, held, capacity, self.demand_params)
        report.usage, report.demand = vector, dict(state.demand.demand)
        return usage

    def _usage_vector(self, usage: Usage, written: Limits | None) -> tuple[dict[str, float], dict[str, bool]]:
        p = self.demand_params
        vector = {"cpu": usage.cpu_cores or 0.0, "memory": float(usage.memory_used_bytes or 0)}
        held = {
            "cpu": held_back(throttled_fraction=usage.throttled_fraction,
                             psi_some_avg10_pct=usage.pressure_some_avg10.get("cpu"), params=p),
            "memory": held_back(memory_high_events=usage.memory_events.get("high"),
                                psi_some_avg10_pct=usage.pressure_some_avg10.get("memory"), params=p),
        }
        for device, (read_cap, write_cap) in self.capacity.disks.items():
            rates = usage.disks.get(device)
            r = (rates.read_bytes_per_s or 0.0) if rates else 0.0
            w = (rates.write_bytes_per_s or 0.0) if rates else 0.0
            key = f"disk:{device}"
            vector[key] = r / read_cap + w / write_cap
            limit = written.io_max.get(device) if written else None
            at_cap = bool(limit and ((limit.rbps and r >= 0.9 * limit.rbps) or (limit.wbps and w >= 0.9 * limit.wbps)))
            held[key] = held_back(psi_some_avg10_pct=usage.pressure_some_avg10.get("io"), at_cap=at_cap, params=p)
        return vector, held

    def _allocate(self, measured, reports, capacity: dict[str, float]) -> set[str]:
        """Weighted progressive filling; each user wants at most one unit of her demand vector."""
        if not measured:
            return set()
        resources = list(capacity)
        demand = np.array([[reports[u.uid].demand.get(r, 0.0) for r in resources] for u, _ in measured])
        weight = np.array([[reports[u.uid].weight.get(weight_kind(r), 1.0) for r in resources] for u, _ in measured])
        fill = progressive_filling([capacity[r] for r in resources], demand, weight, np.ones(len(measured)))
        for i, (user, _) in enumerate(measured):
            report = reports[user.uid]
            report.allocation = {r: float(fill.allocation[i, j]) for j, r in enumerate(resources)}
            report.dominant_share, report.weighted_share = float(fill.dominant_share[i]), float(fill.weighted_share[i])
            j = int(fill.dominant_resource[i])
            report.dominant_resource = resources[j] if j >= 0 else None
        total_demand = demand.sum(axis=0)
        cap = np.array([capacity[r] for r in resources])
        # contended: the users together demand at least what there is (DRF saturates it)
        return {r for j, r in enumerate(resources) if fill.saturated[j] or total_demand[j] >= cap[j]}

    def _enforce(self, user: GovernedUser, usage: Usage, report: UserReport, saturated: set[str],
                 guaranteed_memory_bytes: float) -> None:
        """Plan her limits and write the knobs that moved; her failure stays in her report."""
        state = self.state[user.uid]
        plan_input = UserPlanInput(
            cpu_weight=report.weight.get("cpu", 1.0),
            allocation=report.allocation,
            cpu_contended="cpu" in saturated and "cpu" in self.policy.enforce,
            memory_contended="memory" in saturated and "memory" in self.policy.enforce,
            memory=MemoryState(int(usage.memory_used_bytes or 0), state.written.memory_high if state.written else None),
            guaranteed_memory_bytes=int(guaranteed_memory_bytes),
            memory_demand_bytes=report.demand.get("memory", 0.0),
            disks=tuple(DiskPlan(d, rc, wc, f"disk:{d}" in saturated and "io" in self.policy.enforce)
                        for d, (rc, wc) in self.capacity.disks.items()),
            io_mix={d: (r.read_bytes_per_s or 0.0, r.write_bytes_per_s or 0.0) for d, r in usage.disks.items()},
        )
        limits = plan_user(plan_input, self.policy.memory.margin_bytes, self.policy.memory.high_step_bytes)
        report.planned = report.limits = limits
        floor = plan_input.memory.current_bytes + self.policy.memory.margin_bytes // 2
        knobs = changed_knobs(state.written, limits, self.policy.hysteresis, floor)
        if not knobs:
            report.limits = state.written
            return
        target = Target(user.uid, user.cgroup)
        try:
            if user.uid not in self.originals:
                self.originals[user.uid] = (target, self.backend.read(target))
                if self.on_snapshot is not None:
                    self.on_snapshot(self.originals)
            for knob in knobs:
                self._write(target, knob, limits)
                report.written.append(knob)
        except TargetGone as exc:
            report.error = f"gone: {exc}"
            self.state.pop(user.uid, None)
            self.originals.pop(user.uid, None)
            return
        except EnforceError as exc:
            report.error = f"write: {exc}"
            if not report.written:
                report.limits = state.written
                return
        except OSError as exc:  # from on_snapshot: without a saved original, do not touch her slice
            report.error = f"snapshot not saved, nothing written: {exc}"
            self.originals.pop(user.uid, None)
            report.limits = state.written
            return
        before = state.written or Limits(**vars(self.originals[user.uid][1]))
        state.written = report.limits = in_force(before, limits, report.written)

    def _shape(self, measured, reports: dict[int, UserReport], saturated: set[str]) -> str | None:
        """Plan every measured user's HTB classes and write what moved past the hysteresis band,
        one batch per link. Users not measured this tick keep the classes they have."""
        net = self.network
        contended = saturated if "net" in self.policy.enforce else set()
        weights = {u.uid: reports[u.uid].weight.get("net", 1.0) for u, _ in measured}
        planned = plan_net(net.links, weights, {u.uid: reports[u.uid].allocation for u, _ in measured}, contended)
        wanted = {}
        for resource, classes in planned.items():
            now = {uid: c for uid, c in net.in_force.get(resource, {}).items() if uid in reports}  # gone users' go
            now.update(settle(now, classes, self.policy.hysteresis))
            wanted[resource] = now
        errors = net.apply(wanted)
        for uid, report in reports.items():
            report.classes = {r: c[uid] for r, c in net.in_force.items() if uid in c}
        return "; ".join(errors) or None

    def _write(self, target: Target, knob: str, limits: Limits) -> None:
        b = self.backend
        if knob == "cpu.max":
            b.set_cpu_max(target, limits.cpu_max)
        elif knob == "cpu.weight":
            b.set_cpu_weight(target, limits.cpu_weight)
        elif knob.startswith("memory."):
            b.set_memory(target, knob.split(".", 1)[1], getattr(limits, knob.replace(".", "_")))
        elif knob.startswith("io.max "):
            device = knob.split(" ", 1)[1]
            b.set_io_max(target, device, limits.io_max.get(device, IoMax()))

    # -- lifecycle --------------------------------------------------------------------------------

    def restore(self) -> list[str]:
        """Put every user's original limits back; returns the errors (it tries all users)."""
        errors = []
        for uid, (target, original) in sorted(self.originals.items()):
            try:
                apply_limit_set(self.backend, target, original)
            except TargetGone:
                pass  # her slice is gone, and its limits with it
            except EnforceError as exc:
                errors.append(f"{target.unit}: {exc}")
        self.originals.clear()
        for state in self.state.values():
            state.written = None
        return errors
