"""The control loop: one tick measures, estimates demand, runs weighted DRF, plans and writes.

Everything that touches the world is injected — the clock, the :class:`Monitor` (users and
their counters), the enforcement backend and the network shaper — so the same loop runs on a
real host, in ``--dry-run``, and in simulated-host tests. One tick:

discover users → sample counters → usage over the interval (a counter that went backwards
gives no rate) → demand (:mod:`governor.control.demand`) → weighted progressive filling over CPU,
memory, each disk and each shaped link (:mod:`governor.fairness.drf`; a user wants ``x ≤ 1`` of
her demand vector) → limits (:mod:`governor.control.plan`, :mod:`governor.control.netplan`) →
write only the knobs that moved beyond the hysteresis band.

One user's failure of any kind (slice gone, a read or write refused, a bug) is recorded in her
report and never stops the tick. Before the first write to a user, her original limits are
snapshotted for restore.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from cgroups.errors import CgroupError
from governor.control.demand import AT_CAP_FRACTION, DemandParams, DemandState, estimate_demand, held_back
from governor.control.model import Capacity, LoopSettings, Monitor, Network, TickReport, UserReport
from governor.control.netplan import net_held, net_rates, plan_net, settle
from governor.control.plan import DiskPlan, MemoryState, UserPlanInput, changed_knobs, plan_user
from governor.control.resources import CPU, MEMORY, Resource
from governor.enforce.apply import restore_originals, write_knob
from governor.enforce.model import Backend, EnforceError, LimitSet, Target, TargetGone
from governor.fairness.drf import progressive_filling
from governor.shaping.model import NetSample, ShapingError
from monitors.model import CgroupSample, GovernedUser
from monitors.rates import Usage, usage_between

__all__ = ["Governor"]


@dataclass
class _UserState:
    sample: CgroupSample | None = None
    demand: DemandState | None = None
    written: LimitSet | None = None


class Governor:
    """Runs ticks. ``weight_of(user) -> {kind: weight}`` gives per-kind weights (cpu, memory, io, net).

    ``on_snapshot(originals)`` runs after a slice's original limits are added to
    :attr:`originals` and before the first write to it (the daemon persists them there).
    ``network``: per-user shaping; its links must be in ``capacity.links``.
    """

    def __init__(self, settings: LoopSettings, capacity: Capacity, monitor: Monitor, backend: Backend,
                 clock: Callable[[], float], weight_of: Callable[[GovernedUser], Mapping[str, float]],
                 demand_params: DemandParams = DemandParams(),
                 on_snapshot: Callable[[Mapping[int, tuple[Target, LimitSet]]], None] | None = None,
                 network: Network | None = None):
        self.clock, self.demand_params, self.on_snapshot = clock, demand_params, on_snapshot
        self.state: dict[int, _UserState] = {}
        self.originals: dict[int, tuple[Target, LimitSet]] = {}
        self.net_sample: NetSample | None = None
        self.reconfigure(settings, capacity, monitor, backend, weight_of, network)

    def reconfigure(self, settings: LoopSettings, capacity: Capacity, monitor: Monitor, backend: Backend,
                    weight_of: Callable[[GovernedUser], Mapping[str, float]], network: Network | None) -> None:
        """Run the next ticks with these pieces (a reload). What was written stays on record,
        so only what the new plan changes is rewritten; a new network starts without counters.
        The caller restores the old backend's limits first when the backend changes."""
        if network is not getattr(self, "network", None):
            self.net_sample = None
        self.settings, self.capacity, self.monitor, self.backend = settings, capacity, monitor, backend
        self.weight_of, self.network = weight_of, network
        self._disks = capacity.disk_resources()

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
            usage = self._guarded(report, "sample", self._measure, user, report, capacity, net_prev)
            if usage is not None:
                measured.append((user, usage))
        saturated = self._allocate(measured, reports, capacity)
        memory_weights = sum(r.weight.get("memory", 1.0) for r in reports.values()) or 1.0
        for user, usage in measured:
            report = reports[user.uid]
            guaranteed = self.capacity.memory_bytes * report.weight.get("memory", 1.0) / memory_weights
            self._guarded(report, "plan", self._enforce, user, usage, report, saturated, guaranteed)
        if self.net_sample is not None:
            net_error = self._shape(measured, reports, saturated)
        return TickReport(now, reports, capacity, sorted(saturated), sum(1 for r in reports.values() if r.error),
                          net_error)

    def _guarded(self, report: UserReport, step: str, work, *args):
        """``work(*args)``; an unexpected exception becomes her report's error, not the tick's."""
        try:
            return work(*args)
        except Exception as exc:  # noqa: BLE001 - one user's bug must not stop everyone's governance
            report.error = f"{step}: internal error: {type(exc).__name__}: {exc}"
            self.state.pop(report.uid, None)
            return None

    def _measure(self, user: GovernedUser, report: UserReport, capacity: dict[Resource, float],
                 net_prev: NetSample | None) -> Usage | None:
        state = self.state.setdefault(user.uid, _UserState())
        try:
            written = state.written
            sample = self.monitor.sample(user, memory_detail=written is not None and written.memory_high is not None,
                                         io_detail=bool(self._disks))
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

    def _usage_vector(self, usage: Usage, written: LimitSet | None) -> tuple[dict[Resource, float], dict[Resource, bool]]:
        p = self.demand_params
        vector = {CPU: usage.cpu_cores or 0.0, MEMORY: float(usage.memory_used_bytes or 0)}
        held = {
            CPU: held_back(throttled_fraction=usage.throttled_fraction,
                           psi_some_avg10_pct=usage.pressure_some_avg10.get("cpu"), params=p),
            MEMORY: held_back(memory_high_events=usage.memory_events.get("high"),
                              psi_some_avg10_pct=usage.pressure_some_avg10.get("memory"), params=p),
        }
        for device, resource in self._disks.items():
            read_cap, write_cap = self.capacity.disks[device]
            rates = usage.disks.get(device)
            r = (rates.read_bytes_per_s or 0.0) if rates else 0.0
            w = (rates.write_bytes_per_s or 0.0) if rates else 0.0
            vector[resource] = r / read_cap + w / write_cap
            limit = written.io_max.get(device) if written else None
            at_cap = bool(limit and ((limit.rbps and r >= AT_CAP_FRACTION * limit.rbps)
                                     or (limit.wbps and w >= AT_CAP_FRACTION * limit.wbps)))
            held[resource] = held_back(psi_some_avg10_pct=usage.pressure_some_avg10.get("io"), at_cap=at_cap, params=p)
        return vector, held

    def _allocate(self, measured, reports, capacity: dict[Resource, float]) -> set[Resource]:
        """Weighted progressive filling; each user wants at most one unit of her demand vector."""
        if not measured:
            return set()
        resources = list(capacity)
        demand = np.array([[reports[u.uid].demand.get(r, 0.0) for r in resources] for u, _ in measured])
        weight = np.array([[reports[u.uid].weight.get(r.weight_kind, 1.0) for r in resources] for u, _ in measured])
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

    def _enforce(self, user: GovernedUser, usage: Usage, report: UserReport, saturated: set[Resource],
                 guaranteed_memory_bytes: float) -> None:
        """Plan her limits and write the knobs that moved; her failure stays in her report."""
        state, settings = self.state[user.uid], self.settings
        enforce = settings.enforce
        plan_input = UserPlanInput(
            cpu_weight=report.weight.get("cpu", 1.0),
            allocation=report.allocation,
            cpu_contended=CPU in saturated and "cpu" in enforce,
            memory_contended=MEMORY in saturated and "memory" in enforce,
            memory=MemoryState(int(usage.memory_used_bytes or 0), state.written.memory_high if state.written else None),
            guaranteed_memory_bytes=int(guaranteed_memory_bytes),
            memory_demand_bytes=report.demand.get(MEMORY, 0.0),
            disks=tuple(DiskPlan(d, resource, *self.capacity.disks[d], resource in saturated and "io" in enforce)
                        for d, resource in self._disks.items()),
            io_mix={d: (r.read_bytes_per_s or 0.0, r.write_bytes_per_s or 0.0) for d, r in usage.disks.items()},
        )
        plan = plan_user(plan_input, settings.margin_bytes, settings.high_step_bytes)
        limits = plan.limits
        report.planned = report.limits = limits
        report.reasons = dict(plan.reasons)
        floor = plan_input.memory.current_bytes + settings.margin_bytes // 2
        knobs = changed_knobs(state.written, limits, settings.hysteresis, floor)
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
                write_knob(self.backend, target, knob, limits)
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
        before = state.written or self.originals[user.uid][1]
        state.written = report.limits = before.with_values_of(limits, report.written)

    def _shape(self, measured, reports: dict[int, UserReport], saturated: set[Resource]) -> str | None:
        """Plan every measured user's HTB classes and write what moved past the hysteresis band,
        one batch per link. Users not measured this tick keep the classes they have."""
        net = self.network
        contended = saturated if "net" in self.settings.enforce else set()
        weights = {u.uid: reports[u.uid].weight.get("net", 1.0) for u, _ in measured}
        planned = plan_net(net.links, weights, {u.uid: reports[u.uid].allocation for u, _ in measured}, contended)
        wanted = {}
        for resource, classes in planned.items():
            now = {uid: c for uid, c in net.in_force.get(resource, {}).items() if uid in reports}  # gone users' go
            now.update(settle(now, classes, self.settings.hysteresis))
            wanted[resource] = now
        errors = net.apply(wanted)
        for uid, report in reports.items():
            report.classes = {r: c[uid] for r, c in net.in_force.items() if uid in c}
        return "; ".join(errors) or None

    # -- lifecycle --------------------------------------------------------------------------------

    def restore(self) -> list[str]:
        """Put every user's original limits back; returns the errors (it tries all users)."""
        _, failed = restore_originals(self.backend, self.originals)
        self.originals.clear()
        for state in self.state.values():
            state.written = None
        return list(failed.values())
