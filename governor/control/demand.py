"""Each user's demand vector, from the kernel's own evidence of what she would use (pure).

DRF needs ``D_i``, what she would use if alone. A capped user's use understates it, and the
old answer — multiply by 1.25 a tick while she is held back — is wrong on its own: a user
held at her DRF allocation is *always* held back, so every probed resource ran away to the
host's capacity, DRF then saw capacity-shaped vectors and split each resource equally. Only
the *direction* of an unsatisfied user's vector matters to DRF, so each resource is estimated
from its own evidence, bounded by what that evidence supports (:class:`Evidence`):

* **CPU** — throttled by her quota, her threads' own scheduler accounting (``/proc/TID/schedstat``:
  time run and time waited for a CPU, throttled time included; :mod:`monitors.schedstat`):
  a CPU-bound thread (one that seldom blocks) wanted all the time it ran or waited (a busy
  loop is one core at any quota); one that blocks often is paced by what it blocks on and
  counts what it ran, scaled like any coupled use (below) — and while her quota binds (she is
  at it and throttled) what it ran is the quota's pace, not its own, so that part is probed
  up by ``probe_factor`` a tick, within ``used + throttled`` (after a raise she left unused,
  not for a while: :data:`governor.control.loop.PROBE_REST_TICKS`): without the probe a thread pool
  whose cap fell in a lull (hers, or a burst elsewhere that shrank the users' CPUs) read as
  wanting its cap, was given it again, and stayed there for good (the gaming audit of
  2026-11-27: 0.3 of its fair 1.0 core for 44 ticks of 44). Where that is not read (not
  throttled, too many threads, no schedstat, short-lived processes), the cgroup's counters:
  at her quota (using ≥ 90% of her cpu.max) and throttled: ``used + throttled`` cores. cpu.stat ``throttled_usec`` is summed over the
  CPUs where her run queue was throttled (Documentation/scheduler/sched-bwc.rst): close for
  one CPU-bound thread that waits for nobody else, short when it also waits behind other
  users' threads (the scenario tier's mixed user read 0.85–0.95 of her 1.05 cores this way),
  long when a second thread of hers is throttled on another CPU at once. Throttled while
  well *below* her quota on average is a bursty task (a reader's few ms per request) caught
  at a period's end: that waiting is not CPU she would use, and is not counted. Waiting to
  run (PSI cpu ``some`` share ``w``; on Linux 6.1 it does not count throttled time): at least
  the lesser of ``used + w`` (CPU-bound threads) and ``used / (1 − w)`` (Amdahl's law: a task
  that also sleeps would only run its next burst). Never above the CPUs there are.
* **Disk** — fraction of the disk's time, ``read/R + write/W``. When she is held back (at her
  io.max, or stalled on I/O for a good share of the interval: PSI io ``some``), Amdahl's law
  says what the disk at full speed would give her: a task that spent share ``f`` of the time
  waiting on I/O and used ``U`` of the disk's time would, with the disk to itself, use
  ``U / ((1 − f) + f·U)``. A reader always waiting (``f = 1``) wants the whole disk; one that
  rarely waits wants what she uses.
  Time her tasks waited for a CPU while she was held back on CPU (PSI cpu ``some``) is
  taken out of the serial part: alone, it would be I/O time.
* **Memory** — a stock, not a rate: her use now plus what her smoothed growth adds over the
  look-ahead (two ticks), and at least a headroom, so a user who starts allocating has room
  before the next tick and contention is seen *before* the users' sum reaches capacity. The
  growth is the caller's to believe: the loop projects only what her reading before showed
  too, and holds her alone to the free memory for the rest
  (:func:`governor.control.loop._growth_guards`). Held back (memory.events ``high`` rose, or
  PSI memory ``some``) at a memory.high in force, she wants at least that plus the headroom
  (a tenth of it, if more: a raise inside the hysteresis band is never written), and at least
  what she wanted the tick before: the cap hides her growth.
* **Network** — HTB offers no measure of wanted rate: held back (``overlimits`` rising, or at
  ≥ 90% of a ceil below the link) demand is probed up from what she sent, ``probe_factor`` over
  it; *pressed at her ceil* — both: she ran at ≥ 90% of her ceil in force below the link (her
  DRF allocation where the allocations fill the link, never below her guaranteed rate; kept
  within the hysteresis band) and HTB held more of hers back — from her demand before,
  ``probe_factor`` over it; bounded by the link; otherwise it is her rate.
  A probe from what she sent alone stood still at ``probe_factor`` × her allocation once the
  link was contended (she cannot send more than she is given): a sender held at her ceil read
  as wanting a quarter more than her share, however much more she would send, and a user who
  both computes and sends was given CPU as if she wanted that little of the link (0.82–0.87
  core against DRF's 0.51 on the real kernel: the scenario ``cpu-net-mixed``). From her demand
  before, a sender who goes on using all she is given reads as wanting the link within a few
  ticks (held the tick before too, as at her ceil she was, the step is smoothed:
  ``1 + smoothing·(probe_factor − 1)`` over her demand before, 15% a tick; a step of
  ``probe_factor`` when she was not), as a bulk sender does; one who leaves a raise unused
  (under 90% of it) and whom HTB no longer holds back reads as her rate again at once — held
  back still (overlimits rising: bursts), her demand falls from before as a held one does,
  smoothed, to ``probe_factor`` over her rate. What stays unseen: a sender who would send a
  little more than her share (she uses all of it either way) reads as wanting the link, and if
  she also computes, DRF gives her the CPU of that vector (the audit of 2026-11-28: wanting
  55 of a 100 Mbit/s link shared with a bulk sender, with a core of CPU, 0.53 core where DRF
  on her true vector gives 0.91; the probe from what she sent gave 0.80) — and a user who
  holds her sending at under 90% of her ceil is read as wanting what she sends, so a mixed
  user gains CPU by sending less than she could.

**The direction of her vector.** DRF allocates ``x · D``. What she uses of a resource she is
*not* held back on may be set by the one that does hold her back — a reader's CPU follows her
reads — and taken as her demand it would be scaled down twice: her CPU measured at half her
reading rate, then DRF's ``x = ½`` again. Or it may not: a CPU loop beside a reader runs at
its own pace whatever the disk does, and scaling it up would invent demand. The kernel tells
the two apart: PSI ``full`` is the share of time *all* her tasks stalled on the resource. Her
coupled work would speed up, with the resource to herself, by Amdahl's factor from ``full``
(CPU: ``1/(1 − F)``, the throttled time would be run; disk: ``1/((1 − F) + F·U)``), and
her use of the resources she is not held back on is scaled by the largest such factor
(``speedup``; at most 20). A reader alone in her slice stalls fully (factor ≈ 2 at half the
disk); a CPU loop beside her never does (factor 1). Memory, a stock, is neither scaled nor a
bottleneck.

**Smoothing only where the evidence is an estimate.** Where the kernel did not hold her back
on a resource, what she used (times her speedup, for coupled work) is what she wanted: taken
at once, so a user who stops frees her share in the very next tick and one who starts is
seen at once. Where it held her back this tick and the last, the estimate (throttled time,
stall shares) is noisy and is smoothed (``smoothing`` is the newest estimate's weight); the
first tick she is held back takes the evidence as it is, and so does a step — an estimate
that moved by more than half (``step_fraction``): a user killed a tenth of a second into
the interval ran, and was throttled, in it, so she reads as held back at a tenth of her
demand; smoothing that would keep her share from the others for another tick. A demand is never negative, never
below what she uses, never above the capacity or an admin's own limit
(:func:`estimate_demand`'s ``ceiling``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from governor.control.resources import MEMORY, Resource, resource_set

__all__ = ["AT_CAP_FRACTION", "THREAD_HELD_MARGIN", "DemandParams", "DemandState", "Evidence", "MemoryReading",
           "UserDemand", "believed_growth", "cpu_evidence", "demand_bound", "disk_evidence", "estimate_demand",
           "estimate_user", "memory_evidence", "negligible", "net_evidence", "projected_memory_bytes"]

#: The least fraction of her alone speed a bottleneck is taken to leave her (so a speedup is at
#: most 20: a user starved elsewhere would otherwise have every other demand blown up at once).
MIN_PROGRESS = 0.05

#: Running at this fraction of a limit below capacity (an io.max rate, an HTB ceil) counts as
#: held back by it: the limit, not her work, sets her pace.
AT_CAP_FRACTION = 0.9

#: Her threads would have used this much more than she did (a share of her use, of at least
#: 0.1 core): the kernel held her back on CPU.
THREAD_HELD_MARGIN = 0.05


@dataclass(frozen=True)
class DemandParams:
    """Tuning of the estimator (see the module docstring).

    ``smoothing`` in (0, 1]: weight of this tick's estimate; ``step_fraction``: a new
    estimate that differs from the last by more than this fraction of the larger is a step
    (she stopped, or started), taken at once rather than smoothed; ``stall_fraction``: the share of an
    interval stalled (PSI ``some``) that counts as held back; ``probe_factor`` > 1: network
    growth per tick at a ceil; ``idle_fraction``: a demand below this fraction of capacity is a
    resource she does not use (the planner's ``unused``); ``memory_lookahead_s``: how far memory growth is projected;
    ``memory_headroom_bytes``: the least room a user's memory demand leaves above her use;
    ``held_memory_step_fraction``: held at a memory.high, she wants at least this fraction more
    than it (twice the loop's 5% hysteresis band: a raise of a headroom a tick fell inside the
    band of any memory.high over 1.25 GiB, was never written, and held her below her
    allocation for good — growers weighted 3:1 on a 16 GiB host ended equal).
    """

    smoothing: float = 0.6
    step_fraction: float = 0.5
    stall_fraction: float = 0.1
    probe_factor: float = 1.25
    idle_fraction: float = 0.02
    memory_lookahead_s: float = 2.0
    memory_headroom_bytes: int = 64 * 2**20
    held_memory_step_fraction: float = 0.1


class Evidence(NamedTuple):
    """One resource of one user over one interval: what she ``used``, what the evidence says
    she would have used unconstrained (``wanted`` ≥ ``used``; None for the network, which has
    none and is probed from what she sent, but at her ceil: :func:`net_evidence`), whether
    the kernel ``held`` her back on it, and by how much all her work would speed up without it
    holding her back (``speedup`` ≥ 1, from PSI ``full``).
    Resource units. A named tuple: two or more per user per tick (issue 16)."""

    used: float
    wanted: float | None
    held: bool
    speedup: float = 1.0


class DemandState(NamedTuple):
    """Per resource: the demand estimate (resource units); the smoothed memory growth
    (bytes/s); the resources the kernel held her back on in the tick of this estimate; her
    memory's rate of change over that tick's interval, unsmoothed (bytes/s: the next tick
    believes growth up to it, or all of it if memory was among ``held``: see
    :func:`believed_growth`). A named tuple: one per user per tick (issue 16)."""

    demand: Mapping[Resource, float]
    memory_growth_bytes_per_s: float = 0.0
    held: frozenset[Resource] = frozenset()
    memory_rate_bytes_per_s: float = 0.0


def cpu_evidence(used_cores: float, throttled_cores: float | None, stall_fraction: float | None,
                 capacity_cores: float, params: DemandParams = DemandParams(),
                 full_stall_fraction: float | None = None, quota_cores: float | None = None,
                 thread_demand_cores: float | None = None, thread_paced_cores: float = 0.0) -> Evidence:
    """CPU (see the module docstring). With her threads' own accounting
    (``thread_demand_cores``, :func:`monitors.rates.thread_demand`; read while her quota
    throttles her): that — its part read from what threads ran between their sleeps
    (``thread_paced_cores``: threads paced by what they block on, and duty cycles,
    :func:`monitors.rates.thread_cores`) probed up by ``probe_factor`` while she is at her quota and
    throttled, within ``used + throttled`` — and held back when it exceeds her use by
    :data:`THREAD_HELD_MARGIN`.
    Without it, at her quota (``quota_cores``, the cpu.max in force; None: none known) and throttled:
    ``used + throttled``; waiting to run (PSI cpu ``some`` share ``w``): at least the lesser of
    ``used + w`` and ``used / (1 − w)``. At most ``capacity_cores``. Speedup ``1/(1 − full)``
    (PSI cpu ``full``: all her tasks waiting to run)."""
    full = min(1.0 - MIN_PROGRESS, max(0.0, full_stall_fraction or 0.0))
    throttled, waiting = max(0.0, throttled_cores or 0.0), min(1.0, max(0.0, stall_fraction or 0.0))
    at_quota = quota_cores is None or used_cores >= AT_CAP_FRACTION * quota_cores
    throttled_held = at_quota and throttled > 0.01 * max(used_cores, 0.01)
    if thread_demand_cores is not None:
        wanted = max(used_cores, thread_demand_cores)
        if throttled_held and thread_paced_cores > 0.0:
            # threads that block often count what they ran, and under a quota that binds they
            # ran at the quota's pace, not their own: that part is probed up, as the network
            # is, within what the counters say (used + throttled)
            probed = wanted + (params.probe_factor - 1.0) * thread_paced_cores
            wanted = max(wanted, min(used_cores + throttled, probed))
        held = wanted > used_cores + THREAD_HELD_MARGIN * max(used_cores, 0.1)
        return Evidence(used_cores, min(capacity_cores, wanted), held, 1.0 / (1.0 - full) if held else 1.0)
    waited = waiting > params.stall_fraction
    wanted = used_cores + (throttled if throttled_held else 0.0)
    if waited:
        # waiting time is CPU only for threads that never sleep; a bursty one (an I/O loop)
        # would sleep again after its burst, which Amdahl's law over the waiting share bounds
        wanted = max(wanted, min(used_cores + waiting, used_cores / max(1.0 - waiting, MIN_PROGRESS)))
    held = throttled_held or waited
    return Evidence(used_cores, min(capacity_cores, max(used_cores, wanted)), held,
                    1.0 / (1.0 - full) if held else 1.0)


def disk_evidence(used: Mapping[Resource, float], stall_fraction: float | None, at_cap: Mapping[Resource, bool],
                  params: DemandParams = DemandParams(), full_stall_fraction: float | None = None,
                  cpu_wait_fraction: float = 0.0) -> dict[Resource, Evidence]:
    """Each disk: her share of its time ``used`` (read/R + write/W), scaled by Amdahl's law
    when she is held back (see the module docstring); at most the whole disk (1.0). Speedup of
    all her work by the same law from PSI io ``full``.

    ``cpu_wait_fraction``: the share of the interval in which a task of hers waited for a CPU
    while the kernel held her back on CPU (PSI cpu ``some``; 0 when not held there). Time her
    I/O task spent waiting for a CPU is not time its own work needs: with the host to herself
    it would be spent on I/O, so it is taken out of the serial part of Amdahl's law —
    ``U_d / ((1 − f − w) + f·U)`` with ``w = min(cpu_wait, 1 − f)``. (A CPU loop beside her
    reader, throttled by her ``cpu.max``, delays the reader's every wake-up: without this a
    reader held to half the disk read as wanting two thirds of it.)"""
    f = min(1.0, max(0.0, stall_fraction or 0.0))
    full = min(1.0, max(0.0, full_stall_fraction or 0.0))
    w = min(1.0 - f, max(0.0, cpu_wait_fraction))
    total = min(1.0, sum(max(0.0, u) for u in used.values()))
    out = {}
    for resource, u in used.items():
        u = max(0.0, u)
        held = bool(at_cap.get(resource)) or (u > 0 and f > params.stall_fraction)
        if held and u > 0:
            wanted = u / max((1.0 - f - w) + f * total, 1e-9)
        else:
            wanted = u
        speedup = 1.0 / max((1.0 - full) + full * total, MIN_PROGRESS) if held else 1.0
        out[resource] = Evidence(u, min(1.0, max(u, wanted)), held, speedup)
    return out


def memory_evidence(used_bytes: float, growth_bytes_per_s: float, high_events: int | None, stall_fraction: float | None,
                    high_in_force_bytes: int | None, params: DemandParams = DemandParams(),
                    wanted_before_bytes: float | None = None) -> Evidence:
    """Memory: use plus projected growth (``growth_bytes_per_s``, smoothed by the caller) over
    the look-ahead, at least ``memory_headroom_bytes`` above use; held back (memory.events
    ``high`` rose, or stalled) at a memory.high in force (``high_in_force_bytes``; her use
    within the headroom of it), at least that plus the headroom or ``held_memory_step_fraction``
    of it, whichever is more, and at least what she wanted the tick before
    (``wanted_before_bytes``, her memory demand then): the cap hides her growth, and a grower
    held at it would otherwise read as wanting a headroom more than it —
    with everyone held so, their demands fit what there is, memory reads as no longer
    contended, every memory.high is lifted at once, and they all grow past it (seen on the
    simulated host with three growers). Not when she is read well below it: she pressed on
    it within the interval and freed (a jumper at her guard, or her page cache at it), and
    what she wanted before would make memory contended for a reading of 0.5 GiB (the review
    of 2026-11-27). Bytes."""
    used = max(0.0, used_bytes)
    held = (high_events or 0) > 0 or (stall_fraction or 0.0) > params.stall_fraction
    wanted = projected_memory_bytes(used, growth_bytes_per_s, params)
    if held and high_in_force_bytes is not None and used + params.memory_headroom_bytes >= high_in_force_bytes:
        step = max(params.memory_headroom_bytes, params.held_memory_step_fraction * high_in_force_bytes)
        wanted = max(wanted, high_in_force_bytes + step, wanted_before_bytes or 0.0)
    return Evidence(used, wanted, held)


def projected_memory_bytes(used_bytes: float, growth_bytes_per_s: float, params: DemandParams) -> float:
    """Her use plus ``growth_bytes_per_s`` over the look-ahead, at least the headroom above it
    (bytes): :func:`memory_evidence`'s ``wanted`` before the held rule, which only raises it —
    so the ``wanted`` of more growth is the larger of the two."""
    return used_bytes + max(params.memory_headroom_bytes, max(0.0, growth_bytes_per_s) * params.memory_lookahead_s)


def net_evidence(rate_bits_per_s: float, held: bool, demand_before: float | None = None,
                 params: DemandParams = DemandParams()) -> Evidence:
    """Network (bits/s): her rate; ``held`` at her ceil or with overlimits rising
    (:mod:`governor.control.netplan`). ``demand_before``: her demand of the tick before, given
    when she ran at her ceil and HTB held packets of hers back there (both: her class's
    overlimits rose, :func:`~governor.control.netplan.net_over`, and
    :func:`~governor.control.netplan.net_at_ceil`): she then wants ``probe_factor`` over the
    more of it and her rate (the module docstring, Network); else ``wanted`` is None, and
    :func:`estimate_demand` probes from her rate."""
    used = max(0.0, rate_bits_per_s)
    if demand_before is None:
        return Evidence(used, None, held)
    return Evidence(used, params.probe_factor * max(used, demand_before), True)


def estimate_demand(prev: DemandState | None, evidence: Mapping[Resource, Evidence], capacity: Mapping[Resource, float],
                    params: DemandParams = DemandParams(), memory_growth_bytes_per_s: float = 0.0,
                    ceiling: Mapping[Resource, float] | None = None, memory_rate_bytes_per_s: float = 0.0
                    ) -> DemandState:
    """One tick of estimation for one user over the resources in ``evidence``.

    ``ceiling`` holds her own limits an admin set (resource units): she cannot use more, so she
    demands no more — nor does her coupled work speed up past what the resource holding her
    back can give her within its bound (:func:`demand_bound`: its capacity or that limit), so
    her vector keeps its direction where the bound clips the resource. A resource in ``prev`` but not in ``evidence`` (a disk that went away)
    is dropped. ``memory_growth_bytes_per_s`` (smoothed) and ``memory_rate_bytes_per_s`` (this
    interval's) are kept in the state for the caller: to smooth, and to believe growth by.
    """
    ceiling = ceiling or _EMPTY
    held_back = [(r, ev) for r, ev in evidence.items() if ev.held and r.kind != "memory"]
    speedup = max((ev.speedup for _, ev in held_back), default=1.0)
    # no faster than what holds her back can give her: at most its bound over her use of it (an
    # admin's cpu.max she already uses in full gives her coupled work no speedup at all)
    speedup = min([speedup, *(demand_bound(r, capacity, ceiling) / ev.used for r, ev in held_back if ev.used > 0)])
    speedup = min(1.0 / MIN_PROGRESS, max(1.0, speedup))
    demand = {}
    for resource, ev in evidence.items():
        cap = demand_bound(resource, capacity, ceiling)
        before = prev.demand.get(resource) if prev is not None else None
        if ev.wanted is None:  # the network, not at her ceil: probed from what she sent while
            # held back (from her last demand, a sender of 10 Mbit/s whose class went over its
            # rate once a tick ratcheted to the whole link, and DRF held the others' ceils at
            # half of it while 40 Mbit/s lay idle: the gaming audit of 2026-11-27)
            wanted = ev.used * params.probe_factor if ev.held else ev.used * speedup
        elif ev.held or resource.kind == "memory":
            wanted = ev.wanted
        else:  # her coupled work's pace is set by her bottleneck elsewhere (see the module docstring)
            wanted = ev.wanted * speedup
        steady = (before is not None and ev.held and resource in prev.held and resource.kind != "memory"
              and abs(wanted - before) <= params.step_fraction * max(wanted, before))
        d = params.smoothing * wanted + (1.0 - params.smoothing) * before if steady else wanted
        demand[resource] = min(cap, max(0.0, ev.used, d))
    held = resource_set(r for r, ev in evidence.items() if ev.held)
    return DemandState(demand, memory_growth_bytes_per_s, held, memory_rate_bytes_per_s)


#: No ceiling given (read, never changed).
_EMPTY: Mapping[Resource, float] = {}
_INF = float("inf")


def demand_bound(resource: Resource, capacity: Mapping[Resource, float], ceiling: Mapping[Resource, float]) -> float:
    """The most a user may demand of ``resource`` (resource units): its capacity and her
    admin's own limit of it, whichever is less (∞ where neither mapping has it)."""
    return min(capacity.get(resource, _INF), ceiling.get(resource, _INF))


def negligible(demand, capacity, params: DemandParams):
    """Whether ``demand`` of a resource of ``capacity`` is too small to count as using it (at
    most ``idle_fraction`` of it): the one rule, for numbers or elementwise over arrays."""
    return demand <= params.idle_fraction * capacity


def believed_growth(growth_bytes_per_s: float, prev: DemandState | None) -> float:
    """How much of her smoothed memory growth her demand holds (bytes/s): as much as her
    interval before grew at (``prev.memory_rate_bytes_per_s``) — all of it while the kernel
    held her memory back then (a memory.high hid her growth: a grower raised, grown and held
    again reads growing only every other tick) — none at her first reading. A jump in one
    reading (allocated, read, freed) believed made memory contended for everyone; the rest is
    :func:`governor.control.loop._growth_guards`'. Where ``memory.high`` does not throttle (v1)
    the loop believes all of it: a guard there would be a hard limit, a kill for a grower past it."""
    if prev is None:
        return 0.0
    if MEMORY in prev.held:
        return growth_bytes_per_s
    return min(growth_bytes_per_s, max(0.0, prev.memory_rate_bytes_per_s))


class MemoryReading(NamedTuple):
    """Her memory over one interval, as :func:`estimate_user` reads it: its rate of change
    (bytes/s, unsmoothed), her use (bytes, page cache excluded), memory.events ``high`` delta,
    PSI memory ``some`` share, and the memory.high in force (bytes; None: none). Bytes as
    floats, so every memory amount made from them is one (as over arrays)."""

    growth_bytes_per_s: float
    used_bytes: float
    high_events: int
    stall_fraction: float
    high_in_force_bytes: float | None


class UserDemand(NamedTuple):
    """One user's tick of estimation (:func:`estimate_user`): her memory's evidence, her demand
    state (its mapping: the resources of her evidence and memory, in that order), the resources
    of ``capacity`` she starts on (negligible a tick before; all at her first tick), and the
    memory her growth would add beyond what her demand believes (bytes; 0.0 when all is)."""

    memory: Evidence
    state: DemandState
    starting: frozenset[Resource]
    unconfirmed_growth_bytes: float


def estimate_user(prev: DemandState | None, evidence: Mapping[Resource, Evidence], memory: MemoryReading,
                  capacity: Mapping[Resource, float], ceiling: Mapping[Resource, float],
                  params: DemandParams = DemandParams(), believe_all_growth: bool = False) -> UserDemand:
    """One user's demand this tick, as the loop estimates it: her memory growth smoothed (what
    she frees shows at once) and believed (:func:`believed_growth`; all of it with
    ``believe_all_growth``, where memory.high does not throttle), her memory's evidence
    (:func:`memory_evidence`) after ``evidence`` (her rate resources'), then
    :func:`estimate_demand`. The reference :func:`governor.control.demandarrays.demand_columns`
    computes for every user at once."""
    rate = growth = memory.growth_bytes_per_s
    if prev is not None:
        growth = min(growth, params.smoothing * growth + (1 - params.smoothing) * prev.memory_growth_bytes_per_s)
    believed = growth if believe_all_growth else believed_growth(growth, prev)
    used_bytes = memory.used_bytes
    ev = memory_evidence(used_bytes, believed, memory.high_events, memory.stall_fraction,
                         memory.high_in_force_bytes, params, prev.demand.get(MEMORY) if prev is not None else None)
    starting = resource_set(r for r in capacity if prev is None or negligible(prev.demand.get(r, 0.0), capacity[r],
                                                                              params))
    state = estimate_demand(prev, {**evidence, MEMORY: ev}, capacity, params, growth, ceiling, rate)
    unconfirmed = 0.0
    if growth > believed:
        # memory_evidence of all her growth: the held rule is the same either way
        projected = max(ev.wanted, projected_memory_bytes(used_bytes, growth, params))
        projected = min(projected, demand_bound(MEMORY, capacity, ceiling))
        unconfirmed = max(0.0, projected - state.demand[MEMORY])
    return UserDemand(ev, state, starting, unconfirmed)
