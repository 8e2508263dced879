"""The control loop: one tick measures, estimates demand, runs weighted DRF, plans and writes.

Everything that touches the world is injected — the clock, the :class:`Monitor` (users, their
counters, the host's), the enforcement backend and the network shaper — so the same loop runs
on a real host, in ``--dry-run``, and in simulated-host tests. One tick:

discover users → sample counters (every user's, back to back) → usage over the interval (a
counter that went backwards gives no rate) → the capacity left for users this tick → demand
from the kernel's evidence (:mod:`governor.control.demand`) → weighted progressive filling
over CPU, memory, each disk and each shaped link (:mod:`governor.fairness.drf`; a user wants
``x ≤ 1`` of her demand vector) → limits (every user at once over arrays,
:mod:`governor.control.planarrays`, by the rules of :mod:`governor.control.plan`;
:mod:`governor.control.netplan`) → write only the knobs that moved beyond the hysteresis band,
memory.max never below what the kernel holds.
A still user — nothing of hers moved over her last full reading — is read in full again only
once her CPU time or memory (or disk bytes) move, or within :data:`STILL_KEPT_S` after that
reading (when, :func:`full_reading_due_s`: a few still users each tick); between, two or three
files a tick, and she is measured as then (issue 16).
A starter's partial first reading enters DRF scaled in its direction for one tick
(:meth:`Governor._scale_starters`); memory.high never rises past what is free, nor into
a share a growing user may still claim (:func:`_memory_bounds`, the room rule); memory growth
faster than her interval before showed holds its user alone, to her part of the free memory,
where memory is not contended, is enforced, and ``memory.high`` throttles (not on v1)
(:func:`_growth_guards`); holdings under :data:`SMALL_HOLDING_FRACTION` of a
resource are capped at the static share, not the allocation.

**Capacity is measured, not assumed.** The users share the CPUs less what the rest of the host
(system services, kernel work, the governor) uses right now — busy time from /proc/stat less
the users' own, smoothed — never more than the policy's ``cores − reserve`` and never less
than half of it (:data:`USERS_FAIR_FLOOR`); and the
memory they hold plus what the kernel says is available (``MemAvailable``) less a floor kept
free, never more than ``MemTotal − reserve`` — and less than they hold once the kernel has less
than that floor available, so ``memory.high`` pushes back on whoever grows (memory.high is
soft: a grower over it is throttled, not stopped). So memory is contended when the users'
projected use nears what is really left, not when an admin's guess of the system's needs
runs out, and the loop keeps ``MemAvailable`` at the floor rather than following a creep.

One user's failure of any kind (slice gone, a read or write refused, a bug) is recorded in her
report and never stops the tick. Her original limits are read when she is first seen — they
are ceilings the governor never lifts — and snapshotted before the first write to her slice.
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from operator import itemgetter
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from cgroups.errors import CgroupError, CgroupGone
from cgroups.limits import PAGE_SIZE
from governor.control.demand import (
    AT_CAP_FRACTION, DemandParams, DemandState, Evidence, MemoryReading, cpu_evidence, demand_bound, disk_evidence,
    estimate_user, negligible, net_evidence,
)
from governor.control.demandarrays import DemandColumns, DemandRows, demand_columns
from governor.control.interned import Interned
from governor.control.model import Capacity, LoopSettings, Monitor, Network, TickReport, UserReport
from governor.control.netplan import net_at_ceil, net_over, net_rates, plan_net, settle
from governor.control.plan import DiskPlan, Reasons, changed_knobs, plan_user, safe_memory_max
from governor.control.planarrays import PlanRows, plan_rows
from governor.control.resources import CPU, MEMORY, Resource, resource_set
from governor.enforce.apply import restore_originals, write_knob
from governor.enforce.model import MEMORY_MAX, SCALAR_KNOBS, Backend, EnforceError, Knob, LimitSet, Target, TargetGone
from governor.fairness.drf import progressive_filling
from governor.shaping.model import NetSample, ShapingError
from monitors.model import CgroupSample, GovernedUser, HostSample
from monitors.rates import Usage, counter_rate, usage_between

__all__ = ["Governor", "full_reading_due_s"]

#: Smoothing of the CPU the rest of the host uses (weight of the newest interval).
SYSTEM_CPU_SMOOTHING = 0.3
#: The least share of the users' CPUs they are taken to have whatever the rest of the host
#: uses: an elastic job of root's would otherwise take the users' capacity, and the governor's
#: caps would hand it that CPU for good. CFS itself gives user.slice half of what it contends
#: for against system.slice (both weigh 100 by default).
USERS_FAIR_FLOOR = 0.5
#: A DRF allocation below this fraction of a rate resource's capacity is not capped below her
#: weighted static share: CFS bandwidth control throttles a bursty task at a small quota well
#: below its average (a reader's dd capped at 0.08 core read 0.35 of the disk, not her 0.5;
#: capped at 0.10–0.16 core on a busy host she was throttled 0.5–0.67 core-seconds a second,
#: read as wanting 0.6–0.77 core, and the CPU user's cap swung by 0.4 core every other tick),
#: and what she could take beyond her allocation is measured, and capped, the next tick.
SMALL_HOLDING_FRACTION = 0.10

#: Her threads are read for this many ticks after her quota last throttled her.
THREADS_KEPT_TICKS = 5

#: Ticks in which a user's paced threads are not probed up (:func:`governor.control.demand.cpu_evidence`)
#: after a probe she left unused: her quota raised after it, she used less than
#: :data:`~governor.control.demand.AT_CAP_FRACTION` of the new one. A pool whose bursts are
#: throttled at a quota that is her whole need read as held at it, was raised, used no more,
#: fell back, and was raised again: her cap and the others' swung by a quarter every other tick
#: (the review of 2026-11-27: 40 cpu.max writes in 20 ticks). A pool held below her need uses
#: each raise at once, and is probed on.
PROBE_REST_TICKS = 10

#: A still user — nothing of hers moved over the last interval read in full — whose CPU time
#: and memory (and disk bytes, when disks are governed) have not moved since is measured as
#: then, without her other files, for at most this long after that full reading (issue 16);
#: when exactly, :func:`full_reading_due_s`.
STILL_KEPT_S = 10.0
#: Consecutive uids in blocks of this many share one grid (:func:`full_reading_due_s`), so a
#: tick's full readings come in runs of neighbours: the loop goes through the users in uid
#: order, and full readings scattered one by one cost ~6% more CPU a tick than in runs of 64
#: (README, Benchmarks, the sixth session's figures).
STILL_BLOCK_UIDS = 64


def full_reading_due_s(uid: int, time_s: float) -> float:
    """When a still user whose still reading was at ``time_s`` (monotonic seconds) is read in
    full again at the latest: the first line after ``time_s`` of her block's grid, a line every
    :data:`STILL_KEPT_S` shifted by a fraction of it drawn from her block of
    :data:`STILL_BLOCK_UIDS` uids (Fibonacci hashing: neighbouring blocks land far apart). So
    ``time_s < due ≤ time_s + STILL_KEPT_S``, each still user is read in full once a grid
    period, and users found still together — every idle user at the daemon's start — are read
    in full again a few blocks each tick rather than all in one tick every
    :data:`STILL_KEPT_S` (that tick's cost: README, Benchmarks, the sixth session; issue 16).
    Exact but for float rounding, whose error falls on the safe side: a due time rounded down
    to ``time_s`` has her read in full at once."""
    phase_s = (uid // STILL_BLOCK_UIDS * 0x9E3779B97F4A7C15 % 2**64) / 2**64 * STILL_KEPT_S
    return (math.floor((time_s + phase_s) / STILL_KEPT_S) + 1) * STILL_KEPT_S - phase_s


@dataclass(slots=True)
class _UserState:
    sample: CgroupSample | None = None
    demand: DemandState | None = None
    written: LimitSet | None = None
    ceiling: LimitSet | None = None  # her limits before the governor touched her slice (an admin's)
    starting: frozenset[Resource] = frozenset()  # resources whose demand was negligible a tick ago
    throttled_ticks_ago: int | None = None  # since her cpu.stat throttled_usec last rose (None: never seen)
    cpu_probed_at: float | None = None  # the quota (cores) at which her paced threads were probed up last tick
    probe_rest_ticks: int = 0  # ticks left in which they are not
    # her ceiling in resource units, and what it was computed from: (ceiling, disk plans, vector)
    ceiling_vector: tuple[LimitSet | None, tuple, Mapping[Resource, float]] | None = None
    still: _Still | None = None  # her last full reading moved nothing: its measure (None: it did)
    slice_id: int = 0  # which slice of hers this state was read from (GovernedUser.slice_id)


class _Still(NamedTuple):
    """The measure of a still interval (nothing of hers moved; :meth:`CgroupSample.readings_equal`):
    her usage, the kernel's evidence of CPU and disks (before memory and the network are
    added), when that interval ended (monotonic seconds, her last full reading), when she is
    read in full again at the latest (:func:`full_reading_due_s`) and whether it was read
    with memory.high's details (:meth:`Governor._memory_detail`)."""

    usage: Usage
    evidence: Mapping[Resource, Evidence]
    time_s: float
    due_s: float
    memory_detail: bool


@dataclass(frozen=True)
class _Filled:
    """One tick's weighted progressive filling as arrays, a row per measured user and a column
    per resource of ``resources``: demand, weight, allocation, weighted static share."""

    resources: list[Resource]
    demand: np.ndarray
    weight: np.ndarray
    allocation: np.ndarray
    static_share: np.ndarray


class _Sampled(NamedTuple):
    """One user read this tick, with her state and her reading of the tick before; ``sample``
    None when she is still (:data:`STILL_KEPT_S`) and was not read in full."""

    user: GovernedUser
    state: _UserState
    prev: CgroupSample
    sample: CgroupSample | None


@dataclass(slots=True)
class _Measured:
    """One user measured this tick: her usage and the kernel's evidence per resource;
    ``unconfirmed_growth_bytes``, what her memory growth would add to her memory demand beyond
    the part of it her interval before confirms (:func:`~governor.control.demand.believed_growth`)."""

    user: GovernedUser
    usage: Usage
    evidence: dict[Resource, Evidence]
    unconfirmed_growth_bytes: float = 0.0


class _DemandKept(NamedTuple):
    """The demand columns of the last tick estimated over arrays (:func:`demand_columns`): its
    ``resources``, each user's row and the :class:`DemandState` made from it (``rows``: uid →
    (row, state)), and the columns the next tick reads her state from while it is that one."""

    resources: list[Resource]
    rows: dict[int, tuple[int, DemandState]]
    demand: np.ndarray
    held: np.ndarray
    growth_bytes_per_s: np.ndarray
    rate_bytes_per_s: np.ndarray


def _row_sets(matrix: np.ndarray, resources: Sequence[Resource]) -> list[frozenset[Resource]]:
    """Each row of the bool (n, R) ``matrix`` as the interned set of ``resources`` it marks
    (:func:`resource_set`), one set made per distinct row, whatever R: rows as bit masks while
    they fit 62 bits, else as distinct rows (:func:`numpy.unique`, ~20× slower)."""
    if not len(matrix):
        return []
    if len(resources) <= 62:
        keys = (matrix.astype(np.int64) @ (1 << np.arange(len(resources), dtype=np.int64))).tolist()
        distinct = {key: None for key in keys}
        sets = {key: resource_set(r for j, r in enumerate(resources) if key >> j & 1) for key in distinct}
        return [sets[key] for key in keys]
    rows, inverse = np.unique(matrix, axis=0, return_inverse=True)
    sets = [resource_set(r for r, flag in zip(resources, row) if flag) for row in rows.tolist()]
    return [sets[k] for k in inverse.reshape(-1).tolist()]


def _prev_rows(prevs: Sequence[DemandState | None], resources: Sequence[Resource]
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Demand states as :class:`DemandRows`' ``prev_`` arrays (NaN, False and 0.0 for none), read
    from each: when some state is not one the tick before's columns hold."""
    nan, width = math.nan, len(resources)
    demand, held, growth = [], [], []
    for prev in prevs:
        if prev is None:
            demand.extend((nan,) * width)
            held.extend((False,) * width)
            growth.extend((0.0, 0.0))
        else:
            demand.extend([prev.demand.get(r, nan) for r in resources])
            held.extend([r in prev.held for r in resources])
            growth.extend((prev.memory_growth_bytes_per_s, prev.memory_rate_bytes_per_s))
    n = len(prevs)
    growth_array = np.array(growth, dtype=float).reshape(n, 2)
    return (np.array(demand, dtype=float).reshape(n, width), np.array(held, dtype=bool).reshape(n, width),
            growth_array[:, 0], growth_array[:, 1])


class Governor:
    """Runs ticks. ``weight_of(user) -> {kind: weight}`` gives per-kind weights (cpu, memory, io, net).

    ``on_snapshot(originals)`` runs after a slice's original limits are added to
    :attr:`originals` and before the first write to it (the daemon persists them there): once
    a tick for all the slices first written that tick, after every user is planned.
    ``network``: per-user shaping; its links must be in ``capacity.links``. ``on_progress()``
    runs after each user's sample and each user's writes: a long tick (slow D-Bus answers)
    still shows it is alive (the daemon feeds systemd's watchdog from it).
    """

    def __init__(self, settings: LoopSettings, capacity: Capacity, monitor: Monitor, backend: Backend,
                 clock: Callable[[], float], weight_of: Callable[[GovernedUser], Mapping[str, float]],
                 demand_params: DemandParams = DemandParams(),
                 on_snapshot: Callable[[Mapping[int, tuple[Target, LimitSet]]], None] | None = None,
                 network: Network | None = None, on_progress: Callable[[], None] | None = None):
        self.clock, self.demand_params, self.on_snapshot = clock, demand_params, on_snapshot
        self.on_progress = on_progress or (lambda: None)
        self.state: dict[int, _UserState] = {}
        self.originals: dict[int, tuple[Target, LimitSet]] = {}
        self.net_sample: NetSample | None = None
        self.host_sample: HostSample | None = None
        self.release_notes: list[str] = []  # what was restored differently, or not, for the caller to log
        self._unreleased: set[int] = set()  # left, her release failed: tried again at the final restore
        self._original_slice_ids: dict[int, int] = {}  # uid → the slice her originals were read from
        # uid → her slice's limits as the backend read them just after the governor's last write
        # to it: a later reading that differs is someone else's change (:meth:`_take_changes_by_others`)
        self._in_force: dict[int, LimitSet] = {}
        self._originals_unsaved = False  # changes by others taken this tick, not yet in the snapshot
        #: Limits changed by someone else while governed, taken as theirs: for the caller to log.
        self.admin_change_notes: list[str] = []
        # users first written this tick, awaiting its one snapshot: (user, report, target, limits, knobs)
        self._first_writes: list[tuple[GovernedUser, UserReport, Target, LimitSet, list[Knob]]] = []
        self.system_cpu_cores: float | None = None  # smoothed CPU the rest of the host uses
        #: Whether the next ticks' reports will be read with their reasons (state.json read every
        #: tick): they are then worded as planned, else when read. Only the cost differs.
        self.word_reasons = False
        self._demand_kept: _DemandKept | None = None  # the tick before's demand columns
        self.reconfigure(settings, capacity, monitor, backend, weight_of, network)

    def reconfigure(self, settings: LoopSettings, capacity: Capacity, monitor: Monitor, backend: Backend,
                    weight_of: Callable[[GovernedUser], Mapping[str, float]], network: Network | None) -> None:
        """Run the next ticks with these pieces (a reload). What was written stays on record,
        so only what the new plan changes is rewritten; a new network starts without counters.
        The caller restores the old backend's limits first when the backend changes."""
        if network is not getattr(self, "network", None):
            self.net_sample = None
        if capacity != getattr(self, "capacity", capacity) or monitor is not getattr(self, "monitor", monitor):
            for state in self.state.values():
                state.still = None  # measured against other disks, or read by another monitor
        self.settings, self.capacity, self.monitor, self.backend = settings, capacity, monitor, backend
        self.weight_of, self.network = weight_of, network
        self._disks = capacity.disk_resources()
        self._disk_plans = tuple(DiskPlan(d, resource, *capacity.disks[d]) for d, resource in self._disks.items())

    # -- one tick ---------------------------------------------------------------------------------

    def tick(self) -> TickReport:
        now = self.clock()
        self._drop_unwritten_firsts()
        users = {u.uid: u for u in self.monitor.users()}
        # her state may have been dropped (a failed read or write) with her originals on record:
        # she leaves all the same, and they are given back
        if self._unreleased:  # back: she leaves again later, and is released then
            self._unreleased -= users.keys()
        left = (self.state.keys() | (self.originals.keys() - self._unreleased)) - users.keys()
        if self._take_changes_of(left):  # her slice may live on (a reload exempted her)
            self._save_originals()
        for uid in left:
            self.state.pop(uid, None)
        self._release({uid: self.originals[uid] for uid in left if uid in self.originals})
        host_prev, self.host_sample = self.host_sample, self.monitor.host_sample()
        net_prev, net_error = self.net_sample, None
        try:
            self.net_sample = self.network.sample(list(users)) if self.network is not None else None
        except Exception as exc:  # noqa: BLE001 - the network's failure (or bug) costs its shaping, not the tick
            net_error, self.net_sample = f"sample: {_shaping_error(exc)}", None
        reports: dict[int, UserReport] = {}
        # every user's counters first, back to back: one snapshot of the host, read within the
        # shortest time (and a little less CPU than measuring each user as she is read; issue
        # 16); the tick before's readings go once measured, not after planning (~1 KiB a user)
        measured = self._measure_all(self._sample_all(users, reports), net_prev)
        capacity = self._capacity_now(host_prev, measured)
        notes = self._demand_all(measured, reports, capacity)
        read = measured
        measured = [m for m in measured if reports[m.user.uid].error is None]
        self._scale_starters(measured, reports, capacity)
        saturated, filled = self._allocate(measured, reports, capacity)
        memory_weights = sum(r.weight.get("memory", 1.0) for r in reports.values()) or 1.0
        bounds = _memory_bounds(measured, reports, capacity[MEMORY],
                                filled.static_share[:, filled.resources.index(MEMORY)].tolist(),
                                self.demand_params.memory_headroom_bytes)
        guards = {}
        if MEMORY not in saturated and "memory" in self.settings.enforce:
            # the capacity counts what a user whose demand failed holds; no demand of hers does
            failed = [m for m in read if reports[m.user.uid].error is not None] if len(read) > len(measured) else []
            held_by_failed = sum(m.usage.memory_used_bytes or 0 for m in failed)
            guards = _growth_guards(measured, reports, capacity[MEMORY] - held_by_failed)
        for uid, guard in guards.items():
            reports[uid].memory_guard_bytes = guard
        rows = self._plan_rows(measured, capacity, self._capped(saturated), filled, bounds, guards, memory_weights)
        # reports read this tick: each user planned with her reasons at once (planning over
        # arrays and wording them again would cost more); else every user at once, unworded
        planned, plan_notes = (None, []) if self.word_reasons else self._plan(rows)
        notes += plan_notes
        for i, m in enumerate(measured):
            report = reports[m.user.uid]
            self._guarded(report, "plan", self._enforce, m, report, rows, i, planned and planned[i])
            self.on_progress()
        self._save_taken()
        self._write_first()
        if self.net_sample is not None:
            try:
                net_error = self._shape(measured, reports, saturated)
            except Exception as exc:  # noqa: BLE001 - the cgroup limits are written: this tick's shaping alone fails
                net_error = f"shape: {_shaping_error(exc)}"
        return TickReport(now, reports, capacity, sorted(saturated), sum(1 for r in reports.values() if r.error),
                          net_error, notes)

    def _guarded(self, report: UserReport, step: str, work, *args):
        """``work(*args)``; an unexpected exception becomes her report's error, not the tick's."""
        try:
            return work(*args)
        except Exception as exc:  # noqa: BLE001 - one user's bug must not stop everyone's governance
            report.error = f"{step}: internal error: {type(exc).__name__}: {exc}"
            self.state.pop(report.uid, None)
            return None

    def _release(self, leaving: dict[int, tuple[Target, LimitSet]]) -> None:
        """Give back the original limits of users governed last tick and not now: she logged
        out (with cgroupfs her slice went with its limits; systemd keeps them in drop-ins for
        her next login, so they are put back there) or a reload exempted her, or moved
        ``min_uid`` or ``max_uid`` past her, while her slice lives on. Tried once (each time she
        leaves); a restore that fails stays on record (and in the snapshot) for the final
        restore to try again, and :attr:`release_notes` says so."""
        if not leaving:
            return
        _, failed = restore_originals(self.backend, leaving, self.settings.margin_bytes, self.release_notes,
                                      self.on_progress)
        for uid in leaving:
            # a failed restore left some of her knobs as they were: not someone else's changes
            self._in_force.pop(uid, None)
            if uid not in failed:
                self._forget_originals(uid)
        for uid, error in failed.items():
            self._unreleased.add(uid)
            self.release_notes.append(f"{error} (her original limits are restored at stop, or by drfgov restore)")
        if len(failed) < len(leaving) and self.on_snapshot is not None:
            try:
                self.on_snapshot(self.originals)
            except OSError:
                pass  # the snapshot keeps her entry: restoring it again later is harmless

    # -- measuring --------------------------------------------------------------------------------

    def _sample_all(self, users: Mapping[int, GovernedUser], reports: dict[int, UserReport]
                    ) -> list[tuple[UserReport, _Sampled]]:
        """Every user's report, made into ``reports``, and her counters read (:meth:`_sample`):
        those with an interval to measure."""
        sampled = []
        for uid, user in sorted(users.items()):
            report = reports[uid] = UserReport(uid, user.name, self.weight_of(user))
            found = self._guarded(report, "sample", self._sample, user, report)
            if found is not None:
                sampled.append((report, found))
            self.on_progress()
        return sampled

    def _measure_all(self, sampled: list[tuple[UserReport, _Sampled]], net_prev: NetSample | None
                     ) -> list[_Measured]:
        """Each user read measured (:meth:`_measure`); a failure is hers alone."""
        measured = []
        for report, found in sampled:
            got = self._guarded(report, "measure", self._measure, found, report, net_prev)
            if got is not None:
                measured.append(got)
        return measured

    def _sample(self, user: GovernedUser, report: UserReport) -> _Sampled | None:
        """Her counters now (her state made at first sight, her original limits read then);
        None at first sight or with no time since her last reading (no interval yet), or when
        her slice cannot be read (her report says why, and her state is dropped).

        A still user (her last full reading moved nothing, and is not yet due again:
        :func:`full_reading_due_s`) whose CPU time and memory (and disk bytes) have not moved
        since is not read in full:
        her reading of the tick before stands, as of now (``sample`` None). The next full
        reading's rates then run over the interval in which she moved."""
        state = self.state.get(user.uid)
        if (state is not None and state.slice_id != user.slice_id) or \
                (user.uid in self.originals and self._original_slice_ids.get(user.uid, user.slice_id) != user.slice_id):
            self._slice_made_again(user)
            state = None
        if state is None:
            # her original limits: as first found, also when her state was dropped since (a
            # failed read) — read again now, they would be the governor's own
            known = self.originals.get(user.uid)
            state = self.state[user.uid] = _UserState(ceiling=known[1] if known else self._original(user),
                                                      slice_id=user.slice_id)
        try:
            kept, still = state.sample, state.still
            io_detail, memory_detail = bool(self._disks), self._memory_detail(state)
            cpu_detail = self._threads_wanted(state, state.written)
            # still, and a full reading would read only what hers read: not her threads
            if still is not None and still.memory_detail == memory_detail and not cpu_detail:
                now = self.clock()
                if still.time_s <= now < still.due_s and self.monitor.unmoved(user, kept, io_detail):
                    state.sample = kept._replace(time_s=now)
                    return _Sampled(user, state, kept, None)
            sample = self.monitor.sample(user, memory_detail=memory_detail, io_detail=io_detail, cpu_detail=cpu_detail,
                                         kept=None if self._memory_capped(state) and not memory_detail else kept)
        except CgroupError as exc:
            report.error = f"sample: {exc}"
            self.state.pop(user.uid, None)
            return None
        state.sample = sample
        if kept is None or sample.time_s <= kept.time_s:
            # first sight, or no time since her last reading (the clock stood still or went
            # back): no interval to measure — as none, her limits stand; read as an interval
            # of no time her CPU would be nothing (no rate), and every cap of hers lifted
            return None
        return _Sampled(user, state, kept, sample)

    def _slice_made_again(self, user: GovernedUser) -> None:
        """Her slice was removed and made again since it was read (a logout and a login between
        two ticks): she starts afresh, as at a login. Where limits die with the cgroup
        (cgroupfs) her originals and what was written went with the old slice: the new one's
        are read as hers (the old ones, written back, would lift an admin's limit set on the
        new slice; the cgroup audit of 2026-11-26). Where they outlive it (systemd's drop-ins)
        the new slice has them, and her originals stay on record."""
        self.state.pop(user.uid, None)
        self._in_force.pop(user.uid, None)  # read from the old slice: the new one's tells nothing of others
        if self.backend.limits_outlive_cgroup or user.uid not in self.originals:
            self._original_slice_ids[user.uid] = user.slice_id
            return
        self._forget_originals(user.uid)
        self._unreleased.discard(user.uid)
        if self.on_snapshot is not None:
            try:
                self.on_snapshot(self.originals)
            except OSError:
                pass  # the snapshot keeps the old ones: the next first write saves it again

    def _measure(self, sampled: _Sampled, report: UserReport, net_prev: NetSample | None) -> _Measured:
        """Her usage over the interval and the kernel's evidence per resource, into her report;
        a still user not read in full (:meth:`_sample`) measured as her last full reading."""
        user, state, prev, sample = sampled
        if sample is None:
            usage, evidence = state.still.usage, dict(state.still.evidence)
        else:
            usage = usage_between(prev, sample)
            evidence = self._evidence(usage, state)
            still = sample.time_s > prev.time_s and sample.readings_equal(prev)  # an interval, nothing moved
            state.still = _still(user.uid, usage, evidence, sample.time_s, self._memory_detail(state)) if still else None
        if (usage.throttled_cores or 0.0) > 0.0:
            state.throttled_ticks_ago = 0
        elif state.throttled_ticks_ago is not None:
            state.throttled_ticks_ago += 1
        if self.net_sample is not None:
            rates = net_rates(net_prev, self.net_sample, user.uid)
            in_force = {r: classes.get(user.uid) for r, classes in self.network.in_force.items()}
            at_ceil = net_at_ceil(rates, in_force, self.network.links)
            over = net_over(net_prev, self.net_sample, user.uid)
            pressed = at_ceil & over  # at her ceil, and HTB held packets of hers back there
            before = state.demand.demand if state.demand is not None else {}
            evidence.update({r: net_evidence(rate, r in over or r in at_ceil, before.get(r) if r in pressed else None,
                                             self.demand_params) for r, rate in rates.items()})
        report.usage = {r: ev.used for r, ev in evidence.items()}
        report.held = sorted(r for r, ev in evidence.items() if ev.held)
        report.evidence = evidence
        report.stall_some_fraction, report.stall_full_fraction = usage.stall_some_fraction, usage.stall_full_fraction
        report.throttled_cores = usage.throttled_cores
        return _Measured(user, usage, evidence)

    def _original(self, user: GovernedUser) -> LimitSet | None:
        """Her limits as the governor first finds them (an admin's ceilings), or None unreadable."""
        try:
            return self.backend.read(Target(user.uid, user.cgroup))
        except EnforceError:
            return None

    @staticmethod
    def _memory_capped(state: _UserState) -> bool:
        """Whether a memory.high or memory.max is in force in her slice, the governor's or an
        admin's: at it the kernel reclaims her page cache to make room for her anonymous
        memory while memory.current stands still, so her memory.stat of a tick before is not
        taken again — unless her memory.events are read (:meth:`_memory_detail`), which count
        each such reclaim (:func:`monitors.sample.sample_cgroup`)."""
        limits = state.written or state.ceiling
        return limits is not None and (limits.memory_high is not None or limits.memory_max is not None)

    @staticmethod
    def _memory_detail(state: _UserState) -> bool:
        """Whether her memory.events and memory PSI are read: while a memory.high of the
        governor's is in force (she may be held back at it)."""
        return state.written is not None and state.written.memory_high is not None

    @staticmethod
    def _threads_wanted(state: _UserState, written: LimitSet | None) -> bool:
        """Read her threads (monitors/schedstat.py) while a quota of hers is in force and throttled
        her within :data:`THREADS_KEPT_TICKS`: a figure needs two readings in a row, so they go
        on through a tick or two unthrottled rather than start over at each new cap."""
        return (written is not None and written.cpu_max.quota_usec is not None
                and state.throttled_ticks_ago is not None and state.throttled_ticks_ago < THREADS_KEPT_TICKS)

    def _evidence(self, usage: Usage, state: _UserState) -> dict[Resource, Evidence]:
        """What the kernel says of her CPU and disks this interval (memory: :meth:`_demand`,
        which smooths her growth first; see demand.py). Her paced threads are probed up unless
        they rest after a probe she left unused (:data:`PROBE_REST_TICKS`)."""
        p, stalls, full = self.demand_params, usage.stall_some_fraction, usage.stall_full_fraction
        written = state.written
        quota = written.cpu_max.cores if written is not None else None
        used_cores = usage.cpu_cores or 0.0
        probed_at = state.cpu_probed_at
        if probed_at is not None and quota is not None and quota > probed_at and used_cores < AT_CAP_FRACTION * quota:
            state.probe_rest_ticks = PROBE_REST_TICKS  # raised by last tick's probe, she did not use it
        elif state.probe_rest_ticks:
            state.probe_rest_ticks -= 1
        paced = usage.thread_paced_cores if state.probe_rest_ticks == 0 else 0.0
        cpu = cpu_evidence(used_cores, usage.throttled_cores, stalls.get("cpu"), self.capacity.cpu_cores, p,
                           full.get("cpu"), quota, usage.thread_demand_cores, paced)
        probed = paced > 0.0 and cpu.wanted > max(used_cores, usage.thread_demand_cores or 0.0)
        state.cpu_probed_at = quota if probed else None
        out = {CPU: cpu}
        if self._disks:
            used, at_cap = {}, {}
            for device, resource in self._disks.items():
                read_cap, write_cap = self.capacity.disks[device]
                rates = usage.disks.get(device)
                r = (rates.read_bytes_per_s or 0.0) if rates else 0.0
                w = (rates.write_bytes_per_s or 0.0) if rates else 0.0
                used[resource] = r / read_cap + w / write_cap
                limit = written.io_max.get(device) if written else None
                at_cap[resource] = bool(limit and ((limit.rbps and r >= AT_CAP_FRACTION * limit.rbps)
                                                   or (limit.wbps and w >= AT_CAP_FRACTION * limit.wbps)))
            cpu_wait = (stalls.get("cpu") or 0.0) if cpu.held else 0.0
            out.update(disk_evidence(used, stalls.get("io"), at_cap, p, full.get("io"), cpu_wait))
        return out

    def _capacity_now(self, host_prev: HostSample | None, measured: list[_Measured]) -> dict[Resource, float]:
        """The capacity vector the users share this tick (see the module docstring)."""
        capacity = self.capacity.vector()
        host, cap = self.host_sample, self.capacity
        if host is None or host_prev is None:
            return capacity
        busy = counter_rate(host_prev.cpu_busy_usec, host.cpu_busy_usec, host.time_s - host_prev.time_s)
        if busy is not None:
            system = max(0.0, busy / 1e6 - sum(m.usage.cpu_cores or 0.0 for m in measured))
            was = self.system_cpu_cores
            self.system_cpu_cores = system if was is None else SYSTEM_CPU_SMOOTHING * system + (1 - SYSTEM_CPU_SMOOTHING) * was
            fair_floor = USERS_FAIR_FLOOR * cap.cpu_cores  # what CFS gives user.slice beside a busy system.slice
            capacity[CPU] = max(fair_floor, min(cap.cpu_cores, cap.host_cpu_cores - self.system_cpu_cores))
        if host.memory_available_bytes is not None:
            held = sum(m.usage.memory_used_bytes or 0 for m in measured)
            # below what they hold when the kernel has less than the floor left: memory.high then
            # pushes back on whoever grows (a floor at ``held`` would follow their creep upward)
            left = held + host.memory_available_bytes - cap.memory_keep_free_bytes
            capacity[MEMORY] = float(max(0, min(cap.memory_bytes, left)))
        return capacity

    def _demand_all(self, measured: list[_Measured], reports: dict[int, UserReport],
                    capacity: dict[Resource, float]) -> list[str]:
        """Every measured user's demand, into her evidence, report and state: all at once over
        arrays (:func:`demand_columns`), exactly as :meth:`_demand` estimates each alone —
        her demand mapping has the resources of her evidence, in its order, memory last. If
        the arrays fail (a bug, or an input that is not finite), before anyone's state is
        touched, each user alone, a failure hers, and the traceback is the tick's note; a
        failure in one user's row afterwards is hers alone."""
        try:
            rows = self._demand_rows(measured, capacity)
            columns = demand_columns(rows, self.demand_params)
            resources = rows.resources
            column_of = {r: j for j, r in enumerate(resources)}
            held_sets, starting_sets = _row_sets(columns.held, resources), _row_sets(columns.starting, resources)
            demand, growth, rate = columns.demand.tolist(), columns.growth_bytes_per_s.tolist(), \
                rows.growth_bytes_per_s.tolist()
            memory = list(zip(columns.memory_used_bytes.tolist(), columns.memory_wanted_bytes.tolist(),
                              columns.memory_held.tolist(), columns.unconfirmed_growth_bytes.tolist()))
        except Exception:  # noqa: BLE001 - one bug must not stop everyone's governance
            for m in measured:
                self._guarded(reports[m.user.uid], "demand", self._demand, m, reports[m.user.uid], capacity)
            return ["demand over arrays failed, each user estimated alone this tick:\n" + traceback.format_exc()]
        pickers: dict[tuple[Resource, ...], Callable] = {}
        kept: dict[int, tuple[int, DemandState]] = {}
        for i, (m, (used, wanted, held, unconfirmed)) in enumerate(zip(measured, memory)):
            uid = m.user.uid
            report = reports[uid]
            try:
                keys = (*m.evidence, MEMORY)
                pick = pickers.get(keys)
                if pick is None:
                    pick = pickers[keys] = itemgetter(*(column_of[r] for r in keys))
                mine = dict(zip(keys, pick(demand[i])))
                state = DemandState(mine, growth[i], held_sets[i], rate[i])
                m.evidence[MEMORY] = Evidence(used, wanted, held)
            except Exception as exc:  # noqa: BLE001 - a bug in her row: hers alone, as _guarded has it
                report.error = f"demand: internal error: {type(exc).__name__}: {exc}"
                self.state.pop(uid, None)
                continue
            report.usage[MEMORY] = used
            if held:
                report.held = sorted({*report.held, MEMORY})
            user_state = self.state[uid]
            user_state.starting, user_state.demand = starting_sets[i], state
            report.demand = mine  # shared: a starter's is copied before it is scaled
            m.unconfirmed_growth_bytes = unconfirmed
            kept[uid] = (i, state)
        self._demand_kept = _DemandKept(list(resources), kept, columns.demand, columns.held,
                                        columns.growth_bytes_per_s, rows.growth_bytes_per_s)
        return []

    def _demand_rows(self, measured: list[_Measured], capacity: dict[Resource, float]) -> DemandRows:
        """The tick's demand inputs, a row per measured user (:class:`DemandRows`): the kernel's
        evidence of her rate resources (:meth:`_measure`), her demand state of the tick before
        (its row of that tick's columns when every state is theirs, :class:`_DemandKept`), her
        admin's limits (:meth:`_ceiling_vector`) and her memory's readings (bytes as floats).

        Raises:
            ValueError: some user's evidence names a resource the capacity has not.
        """
        resources = list(capacity)
        n, width = len(measured), len(resources)
        nan, inf = math.nan, math.inf
        absent, no_ceiling = (nan,) * 4, (inf,) * width
        kept = self._demand_kept
        kept_rows = kept.rows if kept is not None and kept.resources == resources else None
        evidence, ceiling, memory, prevs, rows = [], [], [], [], []
        for m in measured:
            state, usage = self.state[m.user.uid], m.usage
            got = m.evidence
            for r in resources:
                evidence.extend(got.get(r, absent))
            prev = state.demand
            prevs.append(prev)
            if prev is not None and kept_rows is not None:
                found = kept_rows.get(m.user.uid)
                if found is not None and found[1] is prev:
                    rows.append(found[0])
                else:
                    kept_rows = None  # not the columns' state: every state read from itself
            bound = self._ceiling_vector(state)
            ceiling.extend([bound.get(r, inf) for r in resources] if bound else no_ceiling)
            written = state.written
            high = written.memory_high if written is not None else None
            memory.extend((usage.memory_growth_bytes_per_s or 0.0, usage.memory_used_bytes or 0,
                           usage.memory_events.get("high") or 0, usage.stall_some_fraction.get("memory") or 0.0,
                           nan if high is None else high))  # flat: numpy reads a list of tuples ~10× slower
        ev = np.array(evidence, dtype=float).reshape(n, width, 4)
        present = ~np.isnan(ev[:, :, 0])
        if present.sum(axis=1).tolist() != [len(m.evidence) for m in measured]:
            raise ValueError("some user's evidence names a resource the tick's capacity has not")
        memory_array = np.array(memory, dtype=float).reshape(n, 5)
        prev_known = np.array([p is not None for p in prevs], dtype=bool)
        if kept_rows is not None:
            # every state is one the tick before's columns hold: her row of them, all at once
            index = np.array(rows, dtype=np.intp)
            prev_demand, prev_held = np.full((n, width), nan), np.zeros((n, width), dtype=bool)
            prev_growth, prev_rate = np.zeros(n), np.zeros(n)
            prev_demand[prev_known], prev_held[prev_known] = kept.demand[index], kept.held[index]
            prev_growth[prev_known] = kept.growth_bytes_per_s[index]
            prev_rate[prev_known] = kept.rate_bytes_per_s[index]
        else:
            prev_demand, prev_held, prev_growth, prev_rate = _prev_rows(prevs, resources)
        return DemandRows(
            resources=resources, capacity=np.array([capacity[r] for r in resources], dtype=float),
            ceiling=np.array(ceiling, dtype=float).reshape(n, width), present=present, used=ev[:, :, 0],
            wanted=ev[:, :, 1], held=ev[:, :, 2] == 1.0, speedup=ev[:, :, 3], prev_known=prev_known,
            prev_demand=prev_demand, prev_held=prev_held, prev_growth_bytes_per_s=prev_growth,
            prev_rate_bytes_per_s=prev_rate, growth_bytes_per_s=memory_array[:, 0],
            memory_used_bytes=memory_array[:, 1], high_events=memory_array[:, 2],
            memory_stall_fraction=memory_array[:, 3], written_high_bytes=memory_array[:, 4],
            believe_all_growth=not self.backend.memory_high_throttles)

    def _demand(self, m: _Measured, report: UserReport, capacity: dict[Resource, float]) -> None:
        """Her demand (:func:`estimate_user`), into her evidence, report and state, alone: the
        reference :meth:`_demand_all` computes over arrays for every user at once."""
        state, usage = self.state[m.user.uid], m.usage
        written = state.written
        high = written.memory_high if written is not None else None
        memory = MemoryReading(usage.memory_growth_bytes_per_s or 0.0, float(usage.memory_used_bytes or 0),
                               usage.memory_events.get("high") or 0, usage.stall_some_fraction.get("memory") or 0.0,
                               None if high is None else float(high))
        # on v1 nothing but a hard limit could hold her alone (_growth_guards): all of it believed
        got = estimate_user(state.demand, m.evidence, memory, capacity, self._ceiling_vector(state),
                            self.demand_params, not self.backend.memory_high_throttles)
        m.evidence[MEMORY] = got.memory
        report.usage[MEMORY] = got.memory.used
        if got.memory.held:
            report.held = sorted({*report.held, MEMORY})
        state.starting, state.demand = got.starting, got.state
        report.demand = got.state.demand  # shared: a starter's is copied before it is scaled
        m.unconfirmed_growth_bytes = got.unconfirmed_growth_bytes

    def _scale_starters(self, measured: list[_Measured], reports: dict[int, UserReport],
                        capacity: Mapping[Resource, float]) -> None:
        """Starters' demand as DRF sees it this tick. A starter — every rate resource she uses
        now was negligible a tick ago — began somewhere inside the interval, so her reading has
        her vector's direction but not its size: DRF gets that direction scaled up to a whole
        resource or her admin's limit of it (:func:`demand_bound`), so the others make room for her share
        at once; the next tick measures her whole interval (her state keeps the reading). Not
        while memory is contended: the scaled rate would cut her memory allocation with it (DRF
        gives her one ``x`` for all her resources), and a grower throttled at memory.high, whose
        CPU blips as the kernel reclaims in her context, is no starter."""
        if sum(reports[m.user.uid].demand.get(MEMORY, 0.0) for m in measured) >= capacity.get(MEMORY, float("inf")):
            return
        for m in measured:
            state, demand = self.state[m.user.uid], reports[m.user.uid].demand
            busy = [r for r in demand if r.kind != "memory" and r in capacity and not self._negligible(demand, r, capacity)]
            if not busy or not all(r in state.starting for r in busy):
                continue
            ceiling = self._ceiling_vector(state)  # she cannot use more than her admin's limits
            bound = {r: demand_bound(r, capacity, ceiling) for r in busy}
            dominant_share = max(demand[r] / bound[r] for r in busy)
            demand = reports[m.user.uid].demand = dict(demand)  # her state keeps the reading
            for r in busy:
                demand[r] = min(bound[r], demand[r] / dominant_share)

    def _negligible(self, demand: Mapping[Resource, float], resource: Resource, capacity: Mapping[Resource, float]) -> bool:
        """Whether a demand for ``resource`` is too small to count as using it."""
        return self._too_small(demand.get(resource, 0.0), capacity[resource])

    def _too_small(self, demand, capacity):
        """Whether ``demand`` of a resource of ``capacity`` is too small to count as using it
        (:func:`negligible`), for a number or elementwise over arrays."""
        return negligible(demand, capacity, self.demand_params)

    def _ceiling_vector(self, state: _UserState) -> Mapping[Resource, float]:
        """An admin's own limits (her ``ceiling``) in resource units: she cannot use more, so
        she demands no more. Kept in her state until her ceiling or the governed disks change:
        the same mapping every tick, read-only, shared by every user whose ceiling is the same."""
        kept = state.ceiling_vector
        if kept is not None and kept[0] is state.ceiling and kept[1] is self._disk_plans:
            return kept[2]
        ceiling, out = state.ceiling, {}
        if ceiling is not None:
            if ceiling.cpu_max.cores is not None:
                out[CPU] = ceiling.cpu_max.cores
            memory = [v for v in (ceiling.memory_high, ceiling.memory_max) if v is not None]
            if memory:
                out[MEMORY] = float(min(memory))
            for device, resource in self._disks.items():
                io = ceiling.io_max.get(device)
                if io is not None and io.rbps is not None and io.wbps is not None:
                    read_cap, write_cap = self.capacity.disks[device]
                    out[resource] = io.rbps / read_cap + io.wbps / write_cap
        out = _one_copy(out)  # one per content: an admin's template gives many users the same limits
        state.ceiling_vector = (ceiling, self._disk_plans, out)
        return out

    # -- allocating and enforcing -----------------------------------------------------------------

    def _allocate(self, measured: list[_Measured], reports: dict[int, UserReport], capacity: dict[Resource, float]
                  ) -> tuple[set[Resource], _Filled]:
        """Weighted progressive filling (each user wants at most one unit of her demand vector);
        returns the contended resources, and the arrays of the users' allocations and weighted
        static shares (rows: ``measured``)."""
        resources = list(capacity)
        if not measured:
            empty = np.zeros((0, len(resources)))
            return set(), _Filled(resources, empty, empty, empty, empty)
        demand = np.array([[reports[m.user.uid].demand.get(r, 0.0) for r in resources] for m in measured])
        weight = np.array([[reports[m.user.uid].weight.get(r.weight_kind, 1.0) for r in resources] for m in measured])
        cap = np.array([capacity[r] for r in resources])
        fill = progressive_filling(cap, demand, weight, np.ones(len(measured)))
        static_array = cap * weight / weight.sum(axis=0)
        allocation, dominant = fill.allocation.tolist(), fill.dominant_resource.tolist()
        dominant_share, weighted_share = fill.dominant_share.tolist(), fill.weighted_share.tolist()
        for i, m in enumerate(measured):
            report = reports[m.user.uid]
            report.allocation = dict(zip(resources, allocation[i]))
            report.dominant_share, report.weighted_share = dominant_share[i], weighted_share[i]
            report.dominant_resource = resources[dominant[i]] if dominant[i] >= 0 else None
        total_demand = demand.sum(axis=0)
        # contended: DRF's allocations fill it, or — a resource the kernel caps — the users together
        # demand at least what there is; a link only when the allocations fill it: its ceils
        # follow them then (_shape), and a sender DRF holds below it for her CPU (her vector's
        # units bound there) would else be held at her allocation with the rest of the link idle,
        # read at her ceil, and probed up to the link for good (the audit of 2026-11-28: a lone
        # sender beside CPU users held at half a link nobody else used)
        saturated = {r for j, r in enumerate(resources)
                     if fill.saturated[j] or (r.kind != "net" and total_demand[j] >= cap[j])}
        return saturated, _Filled(resources, demand, weight, fill.allocation, static_array)

    def _capped(self, saturated: set[Resource]) -> frozenset[Resource]:
        enforce = self.settings.enforce
        return frozenset(r for r in saturated if r.weight_kind in enforce and r.kind != "net")

    def _plan_rows(self, measured: list[_Measured], capacity: dict[Resource, float], capped: frozenset[Resource],
                   filled: _Filled, bounds: Mapping[int, float], guards: Mapping[int, float],
                   memory_weights: float) -> PlanRows:
        """The tick's planning inputs, a row per measured user (:class:`PlanRows`): her
        allocation and weighted static share (``filled``), the resources she does not use —
        negligible demand, a holding under :data:`SMALL_HOLDING_FRACTION` of capacity, or
        starting (:meth:`_demand`) — her guaranteed memory (her memory weight's part of the
        capacity), her memory now and the memory.high in force, her memory bound (the room
        rule, :func:`_memory_bounds`) and guard (:func:`_growth_guards`), her read/write mix
        on each governed disk and her ceiling."""
        resources, n = filled.resources, len(measured)
        cap = np.array([capacity[r] for r in resources])
        unused = self._too_small(filled.demand, cap) | (filled.allocation < SMALL_HOLDING_FRACTION * cap)
        current, high, ceilings = np.zeros(n, np.int64), np.full(n, np.nan), []
        io_mix = np.zeros((n, len(self._disk_plans), 2))
        bound = np.array([bounds.get(m.user.uid, np.nan) for m in measured], dtype=float)
        guard = np.array([guards.get(m.user.uid, np.nan) for m in measured], dtype=float)
        for i, m in enumerate(measured):
            state = self.state[m.user.uid]
            if state.starting:
                unused[i] |= [r in state.starting for r in resources]
            current[i] = m.usage.memory_current_bytes or 0
            written = state.written
            if written is not None and written.memory_high is not None:
                high[i] = written.memory_high
            ceilings.append(state.ceiling)
            for k, disk in enumerate(self._disk_plans):
                rates = m.usage.disks.get(disk.device)
                if rates is not None:
                    io_mix[i, k] = (rates.read_bytes_per_s or 0.0, rates.write_bytes_per_s or 0.0)
        mem, cpu = resources.index(MEMORY), resources.index(CPU)
        return PlanRows(
            resources=resources, cpu_weight=filled.weight[:, cpu], allocation=filled.allocation,
            static_share=filled.static_share, unused=unused, capped=capped, memory_current_bytes=current,
            written_high_bytes=high,
            guaranteed_memory_bytes=np.trunc(capacity[MEMORY] * filled.weight[:, mem] / memory_weights).astype(np.int64),
            memory_demand_bytes=filled.demand[:, mem], memory_bound_bytes=bound, memory_guard_bytes=guard,
            disks=self._disk_plans,
            io_mix=io_mix, ceilings=ceilings)

    def _plan(self, rows: PlanRows) -> tuple[list[LimitSet] | None, list[str]]:
        """Every row's limits at once (:func:`plan_rows`), and the tick's notes. If that fails
        (a bug), None and the traceback as a note: each user is then planned on her own
        (:func:`plan_user`), a failure hers alone."""
        try:
            return plan_rows(rows, self.settings.margin_bytes, self.settings.high_step_bytes), []
        except Exception:  # noqa: BLE001 - one bug must not stop everyone's governance
            return None, ["planning over arrays failed, each user planned alone this tick:\n" + traceback.format_exc()]

    def _enforce(self, m: _Measured, report: UserReport, rows: PlanRows, row: int, limits: LimitSet | None) -> None:
        """Her limits (row ``row`` of ``rows``; planned on her own when ``limits`` is None) and
        the knobs that moved written; her failure stays in her report. Her reasons are worded
        with her plan (:attr:`word_reasons`), or when read, from the same inputs (:class:`Reasons`)."""
        user, usage = m.user, m.usage
        state, settings = self.state[user.uid], self.settings
        current = usage.memory_current_bytes or 0
        margin_bytes, step_bytes = settings.margin_bytes, settings.high_step_bytes
        reasons = {}
        if limits is None:
            plan = plan_user(rows.user_input(row, report.allocation), margin_bytes, step_bytes,
                             explain=self.word_reasons)
            limits, reasons = plan.limits, plan.reasons
        # her allocation, not her report: her reasons, in it, would hold it (a cycle)
        report.reasons = dict(reasons) if reasons else Reasons(
            partial(_reasons_of_row, rows, row, report.allocation, margin_bytes, step_bytes))
        report.planned = report.limits = limits
        floor = current + settings.margin_bytes // 2
        knobs = changed_knobs(state.written, limits, settings.hysteresis, floor)
        if not knobs:
            report.limits = state.written
            return
        target = Target(user.uid, user.cgroup)
        if user.uid in self.originals:
            self._write(user, report, target, limits, knobs)
            return
        try:
            original = self.backend.read(target)
        except TargetGone as exc:
            report.error = f"gone: {exc}"
            self.state.pop(user.uid, None)
            return
        except EnforceError as exc:
            report.error = f"write: {exc}"
            report.limits = state.written
            return
        if original != rows.ceilings[row]:
            # planned without these (her first read of them failed): planned again with them next
            # tick, and read again then for the snapshot — never written without her ceiling
            state.ceiling = original
            report.limits = state.written
            return
        self.originals[user.uid] = (target, original)
        self._original_slice_ids[user.uid] = user.slice_id
        state.ceiling = original
        self._first_writes.append((user, report, target, limits, knobs))  # once the snapshot holds her

    def _drop_unwritten_firsts(self) -> None:
        """First writes a failed tick left queued are dropped with their originals (read, never
        written): the next tick reads them again and saves them before it writes. Written late,
        they would land after that tick's newer limits, perhaps without a saved original."""
        pending, self._first_writes = self._first_writes, []
        for user, *_ in pending:
            self.originals.pop(user.uid, None)

    def _write_first(self) -> None:
        """Write the slices touched for the first time this tick, after one snapshot that holds
        all their originals (a save per user was quadratic: ~10 s for a tick of 1,000 new users)."""
        pending, self._first_writes = self._first_writes, []
        if not pending:
            return
        if self.on_snapshot is not None:
            try:
                self.on_snapshot(self.originals)
            except Exception as exc:  # noqa: BLE001 - without a saved original, do not touch her slice
                for user, report, *_ in pending:
                    report.error = f"snapshot not saved, nothing written: {exc}"
                    self.originals.pop(user.uid, None)
                    report.limits = self.state[user.uid].written
                return
        replaced = False
        for user, report, target, limits, knobs in pending:
            if self._guarded(report, "write", self._slice_replaced, user, report) is False:
                self._guarded(report, "write", self._write, user, report, target, limits, knobs)
            else:  # replaced, or not told (a bug: her state is dropped): nothing written
                replaced = True
            self.on_progress()
        if replaced:
            self._save_originals()  # without the old slice's originals: a restore must not write them on the new

    def _slice_replaced(self, user: GovernedUser, report: UserReport) -> bool:
        """Whether the slice her first write was planned for is gone — removed, or removed and
        made again (a logout and a login) since her originals were read, within this tick (the
        snapshot's save lies between). Then nothing is written: the new slice's limits, perhaps
        an admin's, were never read as hers, and the governor's would be taken for them at the
        next tick. Her originals are dropped unwritten; the next tick reads the new slice afresh
        (the loop audit of 2026-11-27). A monitor that cannot tell (no slice id) says not gone."""
        if not user.slice_id:
            return False
        try:
            if self.monitor.slice_id(user) == user.slice_id:
                return False
            report.error = "gone: her slice was made again before the first write to it: nothing written"
        except CgroupGone:
            report.error = "gone: her slice was removed before the first write to it: nothing written"
        except CgroupError as exc:  # not written over what could not be checked
            report.error = f"write: her slice could not be checked before the first write to it: {exc}: nothing written"
        report.limits = None
        self._forget_originals(user.uid)
        self.state.pop(user.uid, None)
        return True

    def _write(self, user: GovernedUser, report: UserReport, target: Target, limits: LimitSet,
               knobs: list[Knob]) -> None:
        """Write ``knobs`` of ``limits`` to her slice (her original is in the snapshot). A knob the
        kernel refuses is said in her error and the others are written all the same: one that
        kept failing (a cpu.max under a v1 parent's quota) held back the memory.max raise
        after it, which keeps the kernel from OOM-killing inside her slice (the cgroup audit
        of 2026-11-26)."""
        try:
            changed = self._take_changes_by_others(user.uid)
        except EnforceError as exc:  # never written over what could not be checked
            report.error = f"write: nothing written: {exc}"
            report.limits = self.state[user.uid].written
            return
        if changed:
            self._originals_unsaved = True  # saved once, after every user's writes (_save_taken)
            report.limits = self.state[user.uid].written  # planned with the old ones: planned again next tick
            return
        state = self.state[user.uid]
        # what lands of a write that fails is unknown (a D-Bus call that timed out, a period
        # written before its quota): no reading stands for the governor's own until one succeeds
        self._in_force.pop(user.uid, None)
        errors, written = [], []
        report.written = written
        for knob in knobs:
            try:
                if knob == MEMORY_MAX:
                    limits = self._fresh_memory_max(target, limits, report)
                write_knob(self.backend, target, knob, limits)
                written.append(knob)
            except TargetGone as exc:  # her originals stay on record: given back when she is gone (_release)
                report.error = f"gone: {exc}"
                self.state.pop(user.uid, None)
                return
            except EnforceError as exc:
                errors.append(str(exc))
        if errors:
            report.error = "write: " + "; ".join(errors)
            if not written:
                report.limits = state.written
                return
        before = state.written or self.originals[user.uid][1]
        state.written = report.limits = before.with_values_of(limits, written)
        if not errors:
            self._read_in_force(user.uid, target)

    def _read_in_force(self, uid: int, target: Target) -> None:
        """Her slice's limits as the backend reads them just after the governor's write: the
        kernel's rounding of it (pages, systemd's units), which reads the same until someone
        else writes (:meth:`_take_changes_by_others`). Unreadable: none stands."""
        try:
            now = self.backend.read(target)
        except EnforceError:
            self._in_force.pop(uid, None)
            return
        state = self.state.get(uid)
        # the usual reading is what was written, or what other slices read (a dry run reads the
        # files it does not write): one object kept, not a copy a user (issue 16: 7 MiB at
        # 10,000 users)
        if state is not None and state.written == now:
            self._in_force[uid] = state.written
        else:
            self._in_force[uid] = _READINGS((now.cpu_max, now.cpu_weight, now.memory_low, now.memory_high,
                                             now.memory_max, tuple(sorted(now.io_max.items()))), now)

    def _take_changes_by_others(self, uid: int) -> list[Knob]:
        """The knobs of her slice someone else (an admin, by hand or through systemd) changed
        since the governor last wrote to it, taken as her own: her originals (and her ceiling)
        get their values, so the governor never lifts a limit of hers, never lowers her
        memory.low, and gives every one of them back at stop. Found by reading her slice and
        comparing it with the backend's reading just after the governor's last write that
        succeeded (:meth:`_read_in_force`). Asked before each write to her slice and before her
        limits are given back; between writes a change is seen at the next of them. Each
        change is said in :attr:`admin_change_notes`; the caller saves the snapshot
        (:meth:`_save_originals`), once for all the users it asks about.

        Where the backend keeps limits of its own beside the cgroup files (systemd's unit
        properties, :attr:`Backend.limits_outlive_cgroup`), the values taken are written back
        through it, the same values: systemd writes every knob of a controller from its
        properties whenever one of them is set, and would otherwise put the governor's old
        value back over a change made in the file (``echo … > cpu.max``).

        Raises:
            EnforceError: her slice could not be read, or a value taken not written back (the
                snapshot is saved first then): the caller writes nothing over what it could
                not check.
        """
        ours = self._in_force.get(uid)
        if ours is None or uid not in self.originals:
            return []
        target, original = self.originals[uid]
        try:
            now = self.backend.read(target)
        except EnforceError as exc:
            raise EnforceError(f"her limits could not be read first: {exc}") from None
        changed = [k for k in _knobs_of(ours, now) if now.value(k) != ours.value(k)]
        if not changed:
            return []
        self.originals[uid] = (target, original.with_values_of(now, changed))
        state = self.state.get(uid)
        if state is not None:
            state.ceiling = self.originals[uid][1]
            if state.written is not None:
                state.written = state.written.with_values_of(now, changed)
        for knob in changed:
            self.admin_change_notes.append(
                f"{target.unit}: {knob} is {now.text(knob)}, not the governor's {ours.text(knob)}: changed by someone "
                f"else while governed, taken as her own (kept while governed, and left so at stop)")
        self._in_force.pop(uid)
        if self.backend.limits_outlive_cgroup:
            try:
                # memory.max first: systemd writes every memory knob from its properties at each
                # of them, and with the old memory.max among them a raise by hand she had grown
                # into would be undone for a moment (reclaim, then an OOM kill in her slice)
                for knob in sorted(changed, key=lambda k: k != MEMORY_MAX):
                    write_knob(self.backend, target, knob, now)
            except EnforceError as exc:
                self._save_originals()  # hers are on record: a crash's restore must not lift them
                raise EnforceError(f"her own limits, taken, could not be written back: {exc}") from None
        self._read_in_force(uid, target)
        return changed

    def _take_changes_of(self, uids) -> bool:
        """:meth:`_take_changes_by_others` for each of ``uids`` whose slice can be read (one
        that cannot keeps what is on record); whether any change was taken."""
        taken = False
        for uid in uids:
            try:
                taken = bool(self._take_changes_by_others(uid)) or taken
            except EnforceError:
                pass
            self.on_progress()  # a read of her slice (and a write back through systemd) each
        return taken

    def _save_taken(self) -> None:
        """The one snapshot save for the changes by others :meth:`_write` took this tick."""
        if self._originals_unsaved:
            self._originals_unsaved = False
            self._save_originals()

    def _save_originals(self) -> None:
        """Save the snapshot after originals were taken from someone else's changes; a failure
        is said (the snapshot on disk holds the earlier ones)."""
        if self.on_snapshot is None:
            return
        try:
            self.on_snapshot(self.originals)
        except OSError as exc:
            self.admin_change_notes.append(f"the snapshot of original limits could not be saved ({exc}): should the "
                                           f"daemon die, drfgov restore would give back the limits from before")

    def _forget_originals(self, uid: int) -> None:
        """Her originals are off the record (given back, or gone with her slice), and with
        them what tells her slice's changes by others (:meth:`_take_changes_by_others`)."""
        del self.originals[uid]
        self._original_slice_ids.pop(uid, None)
        self._in_force.pop(uid, None)

    def _fresh_memory_max(self, target: Target, limits: LimitSet, report: UserReport) -> LimitSet:
        """``limits`` with memory.max no lower than memory.current read just now plus the margin:
        she may have grown since the sample, and a memory.max below what the kernel holds makes
        the writer reclaim and then OOM-kill inside her slice. Raised to that, or — while she
        holds no more than her admin's own memory.max (her ceiling) — to at most that ceiling:
        writing it reclaims nothing, and raising it would lift it (and the next tick, planning
        it again, found it lowered and raised it again by the margin: the safety audit's
        ratchet). Only a user already past her ceiling (lifted by hand, say) has it lifted to
        her use plus the margin, and her reason says so."""
        if limits.memory_max is None:
            return limits
        current = self.backend.memory_current(target)
        margin = self.settings.margin_bytes
        if current is None or limits.memory_max >= current + margin:
            return limits
        safe = safe_memory_max(0, current, margin)
        original = self.originals[target.uid][1].memory_max
        if original is not None and current <= original:
            safe = min(safe, original)  # her admin's own holds her already: never lifted
        if safe <= limits.memory_max:
            return limits
        beyond = original is not None and safe > original
        report.reasons[MEMORY_MAX] = (f"raised to memory.current {current} B read just before the write, plus margin "
                                      f"{margin} B (planned {limits.memory_max} B)"
                                      + (f"; above her own memory.max {original} B, which she holds more than"
                                         if beyond else ""))
        report.planned = replace(report.planned, memory_max=safe) if report.planned else None
        return replace(limits, memory_max=safe)

    def _shape(self, measured: list[_Measured], reports: dict[int, UserReport], saturated: set[Resource]) -> str | None:
        """Plan every measured user's HTB classes and write what moved past the hysteresis band,
        one batch per link. Users not measured this tick keep the classes they have. A link's
        ceils follow the allocations where it is contended: where these fill it (:meth:`_allocate`)."""
        net = self.network
        contended = saturated if "net" in self.settings.enforce else set()
        uids = [m.user.uid for m in measured]
        weights = {uid: reports[uid].weight.get("net", 1.0) for uid in uids}
        planned = plan_net(net.links, weights, {uid: reports[uid].allocation for uid in uids}, contended)
        wanted = {}
        for resource, classes in planned.items():
            now = {uid: c for uid, c in net.in_force.get(resource, {}).items() if uid in reports}  # gone users' go
            now.update(settle(now, classes, self.settings.hysteresis, net.links[resource].capacity_bits_per_s))
            wanted[resource] = now
        errors = net.apply(wanted)
        for uid, report in reports.items():
            report.classes = {r: c[uid] for r, c in net.in_force.items() if uid in c}
        return "; ".join(errors) or None

    # -- lifecycle --------------------------------------------------------------------------------

    def restore(self, notes: list[str] | None = None) -> list[str]:
        """Put every user's original limits back; returns the errors (it tries all users). What
        was written instead of an original memory.max below use is appended to ``notes``. The
        originals of those that failed stay on record — a reload that goes on through another
        backend saves them in its snapshot and restores them at stop, instead of reading the
        governor's own limits from their slices as hers."""
        if self._take_changes_of(list(self.originals)):  # saved: a restore that fails keeps the snapshot
            self._originals_unsaved = True
        self._save_taken()
        _, failed = restore_originals(self.backend, self.originals, self.settings.margin_bytes, notes, self.on_progress)
        for uid in self.originals.keys() - failed.keys():
            self._forget_originals(uid)
        self._in_force.clear()  # the failed ones: partly given back, read next by another backend, perhaps
        self._unreleased &= self.originals.keys()
        for state in self.state.values():
            state.written = None
        return list(failed.values())


def _still(uid: int, usage: Usage, evidence: Mapping[Resource, Evidence], time_s: float, memory_detail: bool
           ) -> _Still:
    """User ``uid``'s still interval's measure to keep (:class:`_Still`), its mappings one read-only copy per
    content: still users' are the same few (zero rates, no events, no evidence of anything
    used), so each keeps ~248 B rather than ~1,160 B of her own copies (issue 16)."""
    usage = usage._replace(memory_events=_one_copy(usage.memory_events), disks=_one_copy(usage.disks),
                           stall_some_fraction=_one_copy(usage.stall_some_fraction),
                           stall_full_fraction=_one_copy(usage.stall_full_fraction))
    return _Still(usage, _one_copy(evidence), time_s, full_reading_due_s(uid, time_s), memory_detail)


_COPIES: Interned[Mapping] = Interned()
_READINGS: Interned[LimitSet] = Interned()  # slices' limits read after the governor's writes


def _knobs_of(*limit_sets: LimitSet) -> list[Knob]:
    """Every knob any of ``limit_sets`` gives a value (io.max: each disk any of them limits)."""
    return [*SCALAR_KNOBS, *(Knob.io_max(d) for d in sorted(set().union(*(s.io_max for s in limit_sets))))]


def _one_copy(mapping: Mapping) -> Mapping:
    """``mapping`` as one read-only instance per content (its values hashable; :class:`Interned`)."""
    return _COPIES(tuple(mapping.items()), MappingProxyType(dict(mapping)))


def _reasons_of_row(rows: PlanRows, row: int, allocation: Mapping[Resource, float], margin_bytes: int,
                    step_bytes: int) -> Mapping[Knob, str]:
    """Row ``row``'s reasons, worded (:class:`Reasons` calls it when they are first read)."""
    return plan_user(rows.user_input(row, allocation), margin_bytes, step_bytes).reasons


def _memory_bounds(measured: list[_Measured], reports: dict[int, UserReport], capacity_bytes: float,
                   static_share_bytes: Sequence[float], headroom_bytes: float) -> dict[int, float]:
    """The room rule (memory is a stock): the most each user's memory.high may be raised to.

    What the users may still grow into is the capacity less what they hold now. Memory lent is
    not given back — without swap her anonymous memory stays hers, however low memory.high
    goes — so the room serves, first, what each user may claim of her weighted static share
    (``static_share_bytes``, a row per user of ``measured``: sharing incentive): the part of her
    allocation within it, and, while she grows (her memory demand is more than the headroom
    above her use: ``headroom_bytes``), all of it; only what is left is lent beyond shares, in
    proportion to what DRF gives each beyond hers. (DRF of this tick's demand lent a grower's
    share to two others while she was still growing into it: they kept it, 32% over their
    allocations, and she never got hers.) When the claims alone exceed the room, each grows
    into it in proportion to her claim. Empty when everyone's allocation fits (no bound). Bytes, per uid."""
    used, claims, beyond = {}, {}, {}
    for m, share in zip(measured, static_share_bytes, strict=True):
        uid = m.user.uid
        u = used[uid] = float(m.usage.memory_used_bytes or 0)
        allocation = reports[uid].allocation.get(MEMORY, 0.0)
        growing = reports[uid].demand.get(MEMORY, 0.0) > u + headroom_bytes
        claims[uid] = max(0.0, (share if growing else min(share, allocation)) - u)
        beyond[uid] = max(0.0, allocation - max(share, u))
    room = max(0.0, capacity_bytes - sum(used.values()))
    if all(used[uid] + claims[uid] + beyond[uid] >= reports[uid].allocation.get(MEMORY, 0.0) for uid in used) \
            and sum(claims.values()) + sum(beyond.values()) <= room:
        return {}
    claimed = sum(claims.values())
    if claimed >= room:  # nothing claimed and no room (the users hold all there is): nobody grows
        return {uid: used[uid] + (claims[uid] * room / claimed if claimed else 0.0) for uid in used}
    lent = min(1.0, (room - claimed) / (sum(beyond.values()) or 1.0))
    return {uid: used[uid] + claims[uid] + beyond[uid] * lent for uid in used}


def _growth_guards(measured: list[_Measured], reports: dict[int, UserReport], capacity_bytes: float
                   ) -> dict[int, float]:
    """Where memory is not contended: the memory.high that holds each user's growth not yet
    confirmed (``unconfirmed_growth_bytes``: her demand holds only the growth
    :func:`~governor.control.demand.believed_growth` believes) to her part of the memory her demand leaves free.
    Bytes, per uid; a user whose whole unconfirmed growth fits her part is not held (absent).

    Her part is the weighted max-min fair division of the room — capacity less everyone's
    demand — among the users with unconfirmed growth, each wanting at most hers (progressive
    filling over that one resource, their memory weights). At her first growing reading a
    real grower looks exactly like a user who allocated, was read, and freed: projected, the
    jump made memory contended and stepped everyone's memory.high down (the gaming audit of
    2026-11-27); not projected and not held, a 2 GiB/s grower ran a host with 3 GiB free out
    of memory in the interval before her second reading confirmed her. Held, she grows into
    what is free, and only she."""
    growing = [m for m in measured if m.unconfirmed_growth_bytes > 0.0]
    if not growing:
        return {}
    room = max(0.0, capacity_bytes - sum(reports[m.user.uid].demand.get(MEMORY, 0.0) for m in measured))
    wanted = np.array([[m.unconfirmed_growth_bytes] for m in growing])
    weight = np.array([[reports[m.user.uid].weight.get("memory", 1.0)] for m in growing])
    part = progressive_filling(np.array([room]), wanted, weight, np.ones(len(growing))).allocation[:, 0].tolist()
    return {m.user.uid: reports[m.user.uid].demand.get(MEMORY, 0.0) + p
            for m, p in zip(growing, part, strict=True) if p < m.unconfirmed_growth_bytes - PAGE_SIZE}


def _shaping_error(exc: Exception) -> str:
    """A shaping failure as a report says it: a :class:`ShapingError` as it is worded, anything
    else (a bug, an error the shaping layer did not translate) with its type."""
    return str(exc) if isinstance(exc, ShapingError) else f"internal error: {type(exc).__name__}: {exc}"
