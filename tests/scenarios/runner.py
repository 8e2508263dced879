"""One scenario, start to end: each workload alone, then everyone together under the daemon.

1. **Alone.** Each running user's workloads run by themselves in ``drfgov-scenarios/alone`` (outside
   ``user.slice``: not governed) — a warm-up (until her rates are steady; a grower until it has grown), then
   :data:`ALONE_MEASURE_S` of :class:`~tests.scenarios.meter.WindowMeter`: her demand vector in the
   governor's units. Users of the scenario with the same workloads share one measurement.
2. **Together.** Every user gets ``user.slice/user-UID.slice`` (idle ones stay empty); a
   :class:`~tests.scenarios.daemon.TickRecorder` follows the daemon's ticks. Each phase starts
   right after a tick: stopped users' slices are killed, started users' workloads spawned; after
   ``settle_s`` each running user's use is measured over ``measure_s`` and compared with the
   weighted DRF allocation of the alone vectors (:mod:`~tests.scenarios.expect`) over the capacity
   in the daemon's state.json; reactions are read from the tick intervals (:mod:`~tests.scenarios.verdict`).
3. **Safety.** Every workload process alive at the end of each phase; ``oom_kill`` 0 in every
   cgroup's ``memory.events``; no OOM line in the kernel log; the guest's ``MemAvailable`` at
   every tick at least :data:`MEM_AVAILABLE_FLOOR_BYTES` (protection *ahead* of exhaustion: a
   guest at 1 MiB available thrashes, and survives only by luck); the daemon still running.
4. **Never capped.** The scenario's ``never_capped`` users have no ``memory.high`` nor
   ``memory.max`` after any tick of a phase (:func:`~tests.scenarios.verdict.memory_capped`),
   and each spiker's spike was read whole by the daemon at least once in each phase she runs
   in (else the phase proves nothing of her).

Spikers (:attr:`~tests.scenarios.spec.Workload.steady`) have no demand vector: they are not
measured alone, and the expectation, the comparisons and the reactions are the others'.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from cgroups import Cgroup
from tests.scenarios.daemon import GovernorDaemon, TickRecord, TickRecorder, merged
from tests.scenarios.expect import Expectation, expected_drf
from tests.scenarios.link import CAPACITY_BITS_PER_S, LinkCounts, LinkMeter
from tests.scenarios.meter import DiskCapacity, WindowMeter, rates_between, read, threads_between
from tests.scenarios.safety import OOM_LINE, KernelLog, memory_events
from tests.scenarios.spec import Scenario, User
from tests.scenarios.units import amount, vector_text
from tests.scenarios.verdict import (
    Comparison, Reaction, compare, held_ticks, interval_use, memory_capped, reaction_ticks, spike_ticks,
)
from tests.scenarios.workloads import release, spawn, stop_all, wait_ready

__all__ = ["Alone", "PhaseResult", "Rig", "ScenarioResult", "run_scenario"]

ALONE_WARMUP_S = (3.0, 20.0)  # at least, at most: until her CPU and disk rates are steady
ALONE_STEADY = 0.05  # rates within 5% (plus 0.01 of a core, of the disk or of the link) from one second to the next
ALONE_MEASURE_S = 7.0
# an idle user who starts (issue 14; net: probed, as a disk is)
REACTION_TARGET_TICKS = {"cpu": 2, "disk": 4, "memory": 4, "net": 4}
# the others take a stopped user's room within this many ticks; a sender one more: the interval
# after the tick that sees the stop begins before that tick's new ceil is written (the daemon's
# tick under TCG, ~0.2-0.3 s of it at the old ceil, a third of the new rate), so a sender held at
# 6.7 of 20 Mbit/s sent 16.4-17.2 in it, at the edge of her band (cpu-net-mixed-weighted, 2026-11-28)
WORK_CONSERVATION_TICKS = {"cpu": 2, "disk": 2, "memory": 2, "net": 3}
TICK_TIMEOUT_S = 20.0  # no tick for this long: the daemon has stalled or died
MEM_AVAILABLE_FLOOR_BYTES = 64 * 2**20
SCENARIO_BUDGET_S = 150.0  # a together part running longer (a thrashing guest) skips its remaining phases


@dataclass
class Rig:
    """The guest as the scenarios see it (built once by conftest.py)."""

    scratch_device: str  # /dev/vdX
    disks: DiskCapacity  # the scratch disk's MAJ:MIN → its configured (read, write) bytes/s
    user_slice: Path
    harness: Cgroup  # drfgov-scenarios: alone measurements run in its child "alone"
    daemon: GovernorDaemon
    base_policy: dict
    out_dir: Path
    cpu_count: int
    mem_total_bytes: int
    session: dict = field(default_factory=dict)  # the daemon's start-up time, the session's start


@dataclass
class Alone:
    """A user's workloads measured by themselves."""

    vector: dict[str, float]
    peak_memory_bytes: float
    window_s: float
    measured_in: str  # the scenario whose alone part measured it
    failures: list[str] = field(default_factory=list)
    growth_bytes_per_s: float | None = None  # her growers' pace alone (TCG on a busy host slows it)


@dataclass
class PhaseResult:
    index: int
    running: list[str]
    started: list[str]
    stopped: list[str]
    event_tick: int | None
    window_s: float
    expectation: Expectation | None
    measured: dict[str, dict[str, float]]
    peak_memory_bytes: dict[str, float]
    system_cores: dict[str, float]  # the daemon's and the harness's CPU (its cgroup: with its recorders) in the window
    min_mem_available_bytes: float | None = None  # the guest's lowest MemAvailable at a tick of the phase
    # per user at the window's end: demand, allocation, limits, HTB classes
    governor_view: dict[str, dict] = field(default_factory=dict)
    max_tick_gap_s: float | None = None  # the longest wait between two ticks in the phase (the daemon stalling)
    spike_ticks: dict[str, list[int]] = field(default_factory=dict)  # per spiker: ticks the daemon read her spike whole
    not_counted: list[str] = field(default_factory=list)  # never-capped users capped after growth seen in two readings
    comparisons: list[Comparison] = field(default_factory=list)
    reactions: list[Reaction] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


@dataclass
class ScenarioResult:
    scenario: Scenario
    alone: dict[str, Alone] = field(default_factory=dict)
    phases: list[PhaseResult] = field(default_factory=list)
    safety: dict = field(default_factory=dict)
    timeline: list[dict] = field(default_factory=list)
    governor_errors: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    policy: dict = field(default_factory=dict)


def run_scenario(scenario: Scenario, rig: Rig, log_file, stocks: dict | None = None) -> ScenarioResult:
    """Run ``scenario``; everything it started is stopped and its cgroups removed before return.

    Alone measurements of rates are the scenario's own (users with the same workloads share
    one): what a workload demands under TCG follows the host's load, so a vector measured
    minutes earlier may not be this scenario's (a reader measured 0.80 of the disk alone, then
    read 1.00 of it two scenarios later). Growers' are shared through ``stocks`` (workload key →
    :class:`Alone`, across scenarios): their vector is a size — 1235 MiB in every run — however
    fast the host lets them grow."""
    alone_cache: dict = {}
    t0 = time.monotonic()
    result = ScenarioResult(scenario)
    kernel_log = KernelLog()
    kernel_log.mark(f"scenario {scenario.name} begins")
    try:
        _ensure_daemon(rig, scenario, result)
        for user in scenario.running_users():
            if not user.steady:  # a spiker: no demand vector to measure
                continue
            key = user.workload_key()
            if stocks is not None and key in stocks:
                alone_cache[key] = stocks[key]
            if key not in alone_cache:
                alone_cache[key] = _measure_alone(user, scenario.name, rig, log_file)
                if stocks is not None and all(w.kind == "grower" for w in key):
                    stocks[key] = alone_cache[key]
                _say(f"{scenario.name}: {user.name} alone ({user.describe()}): {vector_text(alone_cache[key].vector)}")
            result.alone[user.name] = alone_cache[key]
            result.failures += [f"alone {user.name}: {f}" for f in alone_cache[key].failures]
        _together(scenario, rig, result, log_file)
    finally:
        oom_lines = [line for line in kernel_log.new_lines() if OOM_LINE.search(line)]
        kernel_log.close()
        result.safety["kernel_oom_lines"] = oom_lines
        if oom_lines:
            result.failures.append(f"kernel log: {len(oom_lines)} OOM line(s): {oom_lines[0]}")
        if not rig.daemon.alive():
            result.failures.append(f"drfgov run is not running (exit {rig.daemon.proc.returncode}):\n"
                                   f"{rig.daemon.log_tail(15)}")
        result.wall_s = time.monotonic() - t0
    return result


# -- alone ----------------------------------------------------------------------------------------

def _link_meter(uids: Mapping[str, int]):
    """A :class:`LinkMeter` of the flows of ``uids`` (key → uid) as a context; None for none."""
    return LinkMeter(uids) if uids else contextlib.nullcontext()


def _measure_alone(user: User, scenario_name: str, rig: Rig, log_file) -> Alone:
    path = rig.harness.path / "alone"
    path.mkdir(exist_ok=True)
    cg = Cgroup(path)
    with _link_meter({"alone": user.uid} if user.sends else {}) as link:
        return _measure_alone_in(user, scenario_name, rig, log_file, cg, link)


def _measure_alone_in(user: User, scenario_name: str, rig: Rig, log_file, cg: Cgroup, link: LinkMeter | None) -> Alone:
    procs = [(w, spawn(w, user.uid, cg, rig.scratch_device, log_file)) for w in user.workloads]
    failures, pace = [], None
    try:
        failures += _arm(procs, user)
        released = time.monotonic()
        for _, p in procs:
            release(p)
        grown_bytes = sum(w.size_bytes for w in user.workloads if w.kind == "grower")
        if grown_bytes:
            failures += _wait_grown(cg, grown_bytes, user)
            pace = 0.97 * grown_bytes / (time.monotonic() - 1.0 - released)
        else:
            if link is not None:
                link.wait_started({"alone": next(p for w, p in procs if w.kind == "sender")})
            failures += _wait_steady(cg, rig.disks, link)
        use, peak, window_s = WindowMeter({"alone": cg}, rig.disks, link=link).measure(ALONE_MEASURE_S)
        failures += _dead(procs, user)
        oom_kills = memory_events(cg).get("oom_kill", 0)
        if oom_kills:
            failures.append(f"oom_kill {oom_kills} in her alone cgroup")
    finally:
        stop_all(cg, [p for _, p in procs])
        _remove(Path(cg.path))
    return Alone(use["alone"], peak["alone"], window_s, scenario_name, failures, pace)


def _arm(procs, user: User) -> list[str]:
    """Wait for ``procs`` (``(Workload, Popen)`` pairs) to be ready to go."""
    return [f"{user.name}'s {w.label()} never said it was ready" for w, p in procs if not wait_ready(p)]


def _wait_steady(cg: Cgroup, disks: DiskCapacity, link: LinkMeter | None = None) -> list[str]:
    """Warm-up: wait (:data:`ALONE_WARMUP_S`) until her CPU, disk and link rates (the link's as a
    fraction of its capacity) hold from one second to the next. Under TCG on a busy host a
    workload's first seconds (dd loaded over 9p) are slow."""
    least_s, most_s = ALONE_WARMUP_S
    start = time.monotonic()
    before, rates_before = read(cg), None
    while True:
        time.sleep(1.0)
        now = read(cg)
        rates = {r: v for r, v in rates_between(before, now, disks).items() if r == "cpu" or r.startswith("disk:")}
        if link is not None:
            rates.update({r: v / CAPACITY_BITS_PER_S
                          for r, v in link.counted().use("alone", before.time_s, now.time_s).items()})
        steady = rates_before is not None and all(
            abs(v - rates_before[r]) <= ALONE_STEADY * max(v, rates_before[r]) + 0.01 for r, v in rates.items())
        if steady and time.monotonic() - start >= least_s:
            return []
        if time.monotonic() - start >= most_s:
            return [f"her use was not steady after {most_s:g} s of warm-up: {vector_text(rates)}"]
        before, rates_before = now, rates


def _wait_grown(cg: Cgroup, grown_bytes: int, user: User) -> list[str]:
    """Wait until ``cg`` holds 97% of what its growers grow to (1 s more to settle)."""
    rate = sum(w.rate_bytes_per_s for w in user.workloads if w.kind == "grower")
    deadline = time.monotonic() + 3 * grown_bytes / rate + 20
    while read(cg).memory_used_bytes < 0.97 * grown_bytes:
        if time.monotonic() > deadline:
            return [f"her growers did not reach {grown_bytes / 2**20:.0f} MiB alone"]
        time.sleep(0.5)
    time.sleep(1.0)
    return []


# -- together -------------------------------------------------------------------------------------

MEMORY_STABLE_FRACTION = 0.01  # of her memory: growth below this over MEMORY_STABLE_S counts as settled
MEMORY_STABLE_S = 2.0


def _wait_memory_stable(cgroups: list[Cgroup], deadline: float) -> None:
    """Until no cgroup's memory grew by more than :data:`MEMORY_STABLE_FRACTION` of it over the
    last :data:`MEMORY_STABLE_S`, or ``deadline`` (monotonic s)."""
    before = [read(cg).memory_used_bytes for cg in cgroups]
    while time.monotonic() < deadline:
        time.sleep(MEMORY_STABLE_S)
        now = [read(cg).memory_used_bytes for cg in cgroups]
        if all(b - a <= MEMORY_STABLE_FRACTION * max(b, 1) for a, b in zip(before, now)):
            return
        before = now


def _together(scenario: Scenario, rig: Rig, result: ScenarioResult, log_file) -> None:
    slices = {}
    for user in scenario.users:
        path = rig.user_slice / f"user-{user.uid}.slice"
        path.mkdir(exist_ok=True)
        slices[user.name] = Cgroup(path)
    procs: dict[str, list] = {}
    start = time.monotonic()
    try:
        with _link_meter(scenario.senders()) as link, \
                TickRecorder(rig.daemon, slices, uids={u.name: u.uid for u in scenario.users}) as recorder:
            if recorder.wait_for_tick(timeout_s=TICK_TIMEOUT_S) is None:
                result.failures.append("the daemon did not tick after the slices appeared")
            running: frozenset[str] = frozenset()
            for index, phase in enumerate(scenario.phases):
                if time.monotonic() - start > SCENARIO_BUDGET_S:
                    result.failures.append(f"phase {index + 1} not run: the scenario took over {SCENARIO_BUDGET_S:g} s")
                    break
                started, stopped = sorted(phase.running - running), sorted(running - phase.running)
                for name in started:  # growers and spikers first, armed: their Python starts before the event
                    user = scenario.user(name)
                    procs[name] = [(w, spawn(w, user.uid, slices[name], rig.scratch_device, log_file,
                                             rig.daemon.state_path)) for w in user.workloads if w.armed]
                    result.failures += [f"phase {index + 1}: {f}" for f in _arm(procs[name], user)]
                sync = recorder.wait_for_tick(timeout_s=TICK_TIMEOUT_S)  # act right after a tick
                for name in stopped:
                    stop_all(slices[name], [p for _, p in procs.pop(name)])
                for name in started:
                    user = scenario.user(name)
                    procs[name] += [(w, spawn(w, user.uid, slices[name], rig.scratch_device, log_file))
                                    for w in user.workloads if not w.armed]
                    for _, p in procs[name]:
                        release(p)
                event_time = time.monotonic()
                running = phase.running
                time.sleep(max(0.0, event_time + phase.settle_s - time.monotonic()))
                if any(w.kind == "grower" for n in running for w in scenario.user(n).workloads):
                    _wait_memory_stable([slices[n] for n in sorted(running) if scenario.user(n).steady],
                                        event_time + phase.longest_settle_s)
                phase_result = _measure_phase(scenario, rig, result.alone, index, phase, started, stopped, slices,
                                              procs, recorder, sync, event_time, link)
                result.phases.append(phase_result)
                result.failures += [f"phase {index + 1}: {f}" for f in phase_result.failures]
                _say(f"{scenario.name}: phase {index + 1} ({', '.join(sorted(running))}) measured")
            for name in list(procs):
                late = [f for f in _dead(procs[name], scenario.user(name)) if f not in str(result.failures)]
                result.failures += [f"after the last measurement: {f}" for f in late]
                stop_all(slices[name], [p for _, p in procs.pop(name)])
            recorder.wait_for_tick(timeout_s=5)
            counts = link.counted() if link is not None else None
        result.timeline = _timeline(recorder.records, scenario, rig, start, counts)
        uids = {u.uid for u in scenario.users}
        result.governor_errors = sorted({f"tick {r.tick}: {u['name']}: {u['error']}" for r in recorder.records
                                         for u in r.state.get("users", []) if u.get("error") and u["uid"] in uids})
    finally:
        for name, cg in slices.items():
            stop_all(cg, [p for _, p in procs.pop(name, [])])
            events = memory_events(cg)
            result.safety.setdefault("memory_events", {})[name] = events
            if events.get("oom_kill"):
                result.failures.append(f"{name}: oom_kill {events['oom_kill']} in her slice's memory.events")
            _remove(Path(cg.path))


def _measure_phase(scenario: Scenario, rig: Rig, alone: Mapping[str, Alone], index, phase, started, stopped, slices,
                   procs, recorder: TickRecorder, sync: TickRecord | None, event_time: float,
                   link: LinkMeter | None) -> PhaseResult:
    running = sorted(phase.running)
    # the harness: its cgroup, so that its children count too (the link's recorder); the alone
    # cgroup in it is empty by now
    meter = WindowMeter({**{n: slices[n] for n in running}, "(daemon)": rig.daemon.cgroup, "(harness)": rig.harness},
                        rig.disks, link=link)
    measured, peak, window_s = meter.measure(phase.measure_s)
    system = {}
    for key in ("(daemon)", "(harness)"):
        system[key.strip("()")] = measured.pop(key)["cpu"]
        peak.pop(key)
    out = PhaseResult(index, running, started, stopped, sync.tick if sync else None, window_s, None, measured, peak,
                      system)
    for name in running:
        out.failures += _dead(procs.get(name, []), scenario.user(name))
    latest = recorder.records[-1].state if recorder.records else None
    if latest is None:
        out.failures.append("no state.json from the daemon: nothing to compare with")
        return out
    capacity = {r: float(v) for r, v in latest["capacity"].items()}
    names = {u.uid: u.name for u in scenario.users}
    out.governor_view = {names[u["uid"]]: {k: u.get(k) for k in ("demand", "allocation", "limits", "classes")}
                         for u in latest.get("users", []) if u.get("uid") in names}
    out.failures += _check_capacity(capacity, rig, merged(rig.base_policy, scenario.policy))
    users = {n: scenario.user(n) for n in running if scenario.user(n).steady}
    exp = expected_drf(capacity, {n: alone[n].vector for n in users}, {n: u.weights() for n, u in users.items()})
    out.expectation = exp
    out.comparisons = compare(exp.allocation, measured, capacity, exp.contended, exp.dominant, scenario.tolerance)
    for c in out.comparisons:
        if not c.ok:
            error = f" ({c.error_pct:+.0f}%)" if c.error_pct is not None else ""
            out.failures.append(f"{c.user} {c.resource}: measured {amount(c.resource, c.measured)}, expected "
                                f"{amount(c.resource, c.expected)} ± {scenario.tolerance:.0%}{error}")
    in_phase = [r for r in recorder.records if sync is None or r.tick >= sync.tick]
    available = [r.mem_available_bytes for r in in_phase if r.mem_available_bytes is not None]
    out.min_mem_available_bytes = float(min(available)) if available else None
    if available and min(available) < MEM_AVAILABLE_FLOOR_BYTES:
        out.failures.append(f"the guest ran out of memory: MemAvailable {min(available) / 2**20:.0f} MiB at a tick "
                            f"(floor {MEM_AVAILABLE_FLOOR_BYTES / 2**20:.0f} MiB)")
    gaps = [b.time_s - a.time_s for a, b in zip(in_phase, in_phase[1:])]
    out.max_tick_gap_s = max(gaps) if gaps else None
    out.failures += _never_capped(scenario, running, recorder.records, sync.tick if sync else -1, out)
    if sync is not None:
        out.reactions = _reactions(scenario, rig, index, started, stopped, list(users), exp, recorder.records, sync,
                                   event_time, link.counted() if link is not None else None)
        for r in out.reactions:
            if not r.ok:
                when = f"{r.ticks} ticks" if r.ticks is not None else f"not within {r.observed_ticks} ticks"
                if r.held_ticks is not None and r.ticks is not None:
                    when += f", held back by the kernel in {r.held_ticks} of them"
                out.failures.append(f"{r.user} ({r.kind}) reached her {r.resource} allocation in {when}; "
                                    f"target ≤ {r.target_ticks}")
    else:
        out.failures.append("the daemon did not tick at the phase's start: no reaction measured")
    return out


def _reactions(scenario, rig, index, started, stopped, running, exp: Expectation, records, sync: TickRecord,
               event_time: float, link: LinkCounts | None) -> list[Reaction]:
    """Starters (their first phase after the first: a target; in the first phase: convergence,
    no target) and, after a stop, every user still running (work conservation).

    Memory is a stock: a starter whose dominant resource is memory cannot hold her allocation
    before she has grown to it, so what counts is how many ticks the kernel held her back
    below it (:func:`~tests.scenarios.verdict.held_ticks`)."""
    watched: list[tuple[str, str, int | None]] = []
    for name in running:
        if name in started:
            kind = exp.dominant[name].split(":", 1)[0]
            watched.append((name, "start", REACTION_TARGET_TICKS[kind] if index > 0 else None))
        elif stopped:
            watched.append((name, "stop", WORK_CONSERVATION_TICKS[exp.dominant[name].split(":", 1)[0]]))
    phase_records = [r for r in records if r.tick >= sync.tick]
    out = []
    for name, kind, target in watched:
        resource = exp.dominant[name]
        expected = exp.allocation[name][resource]
        intervals = interval_use(phase_records, name, rig.disks, link)
        uncontended_stop = kind == "stop" and resource not in exp.contended  # more of it hurts nobody
        ticks, seconds = reaction_ticks(intervals, sync.tick, event_time, resource, expected, scenario.tolerance,
                                        exp.capacity[resource], at_least=uncontended_stop)
        series = tuple(use[resource] for tick, _, use in intervals if tick > sync.tick)
        held = None
        if resource == "memory" and kind == "start":
            held = held_ticks(intervals, sync.tick, ticks, resource, expected, scenario.tolerance,
                              exp.capacity[resource])
        out.append(Reaction(name, kind, resource, expected, ticks, seconds, target, len(series), series, held))
    return out


def _never_capped(scenario: Scenario, running: list[str], records: list[TickRecord], after_tick: int,
                  out: PhaseResult) -> list[str]:
    """The scenario's ``never_capped`` users uncapped on memory after every tick past
    ``after_tick`` (one failure per user: her first such tick in full, then the others'
    numbers; ticks after growth seen in two readings go to ``out.not_counted``), and each
    running spiker read whole in one reading at least once (``out.spike_ticks``)."""
    failures = []
    names = {u.uid: u.name for u in scenario.users}
    for name in running:
        size = sum(w.size_bytes for w in scenario.user(name).workloads if w.kind == "spiker")
        if size:
            out.spike_ticks[name] = spike_ticks(records, names, name, size, after_tick)
            if not out.spike_ticks[name]:
                failures.append(f"{name}: the daemon never read her {size / 2**20:.0f} MiB spike whole in one reading "
                                "(each caught half made, or grown over two: TCG too slow?): the phase proves nothing")
    capped = memory_capped(records, names, scenario.never_capped, after_tick)
    out.not_counted = [f"{c.user}: {c.describe()}" for c in capped if c.regrown]
    counted = [c for c in capped if not c.regrown]
    for name in sorted({c.user for c in counted}):
        ticks = [c for c in counted if c.user == name]
        more = f" — and at ticks {', '.join(str(c.tick) for c in ticks[1:])}" if len(ticks) > 1 else ""
        failures.append(f"{name} (never to be capped): {ticks[0].describe()}{more} ({len(ticks)} tick(s) in all)")
    return failures


def _check_capacity(capacity: Mapping[str, float], rig: Rig, policy: Mapping) -> list[str]:
    """The capacity in state.json against the policy and the guest: CPUs less the reserve, the
    scratch disk as one resource, memory at most MemTotal less the reserve, each NIC's egress
    at its bits/s when ``net`` is enforced."""
    failures = []
    cores = rig.cpu_count - float(policy["reserve"]["cpu_cores"])
    if abs(capacity.get("cpu", 0.0) - cores) > 1e-6:
        failures.append(f"state.json capacity cpu {capacity.get('cpu')} ≠ {cores} (CPUs less reserve)")
    for dev in rig.disks:
        if capacity.get(f"disk:{dev}") != 1.0:
            failures.append(f"state.json has no disk:{dev} of capacity 1.0: {sorted(capacity)}")
    memory = rig.mem_total_bytes - int(policy["reserve"]["memory_bytes"])
    if capacity.get("memory", 0.0) > memory + 4096:
        failures.append(f"state.json capacity memory {capacity.get('memory'):.0f} > MemTotal less reserve {memory}")
    nics = policy["capacity"].get("nics", {}) if "net" in policy["enforce"] else {}
    for nic, link in nics.items():
        if capacity.get(f"net:{nic}:tx") != float(link["bits_per_s"]):
            failures.append(f"state.json has no net:{nic}:tx of capacity {link['bits_per_s']} bits/s: "
                            f"{sorted(capacity)}")
    return failures


def _dead(procs, user: User) -> list[str]:
    """A failure per workload of ``procs`` (``(Workload, Popen)`` pairs) that is no longer running."""
    return [f"{user.name}'s {w.label()} (pid {p.pid}) exited with {p.returncode}" for w, p in procs if p.poll() is not None]


def _timeline(records: list[TickRecord], scenario: Scenario, rig: Rig, start: float,
              link: LinkCounts | None = None) -> list[dict]:
    """Per tick: each user's use over the interval that ends there (her flow's from ``link``) and
    the daemon's view of her."""
    names = {u.uid: u.name for u in scenario.users}
    out = []
    for prev, cur in zip(records, records[1:]):
        entry = {"tick": cur.tick, "t_s": round(cur.time_s - start, 3), "saturated": cur.state.get("saturated"),
                 "capacity": cur.state.get("capacity"), "mem_available_bytes": cur.mem_available_bytes, "users": {}}
        for u in cur.state.get("users", []):
            name = names.get(u["uid"])
            if name is None:
                continue
            a, b = prev.readings.get(name), cur.readings.get(name)
            use = None
            if a is not None and b is not None and b.time_s > a.time_s:
                use = rates_between(a, b, rig.disks)
                if link is not None:
                    use.update(link.use(name, a.time_s, b.time_s))
            entry["users"][name] = {"use": use, "usage": u.get("usage"), "demand": u.get("demand"),
                                    "allocation": u.get("allocation"), "limits": u.get("limits"),
                                    "evidence": u.get("evidence"), "stall_some_fraction": u.get("stall_some_fraction"),
                                    "stall_full_fraction": u.get("stall_full_fraction"),
                                    "throttled_cores": u.get("throttled_cores"), "error": u.get("error"),
                                    "threads": _threads(prev, cur, name)}
        out.append(entry)
    return out


def _threads(prev: TickRecord, cur: TickRecord, name: str) -> dict | None:
    """Her threads over the tick's interval, as the harness read them (a diagnostic of the
    daemon's CPU ``wanted``; :func:`~tests.scenarios.meter.threads_between`)."""
    a, b = prev.threads.get(name), cur.threads.get(name)
    return None if a is None or b is None else threads_between(a, b)


def _ensure_daemon(rig: Rig, scenario: Scenario, result: ScenarioResult) -> None:
    policy = merged(rig.base_policy, scenario.policy)
    result.policy = policy
    if not rig.daemon.alive():
        result.failures.append("drfgov run had died before this scenario; restarted")
        rig.daemon.start(policy)
    elif rig.daemon.use_policy(policy):
        _say(f"{scenario.name}: daemon reloaded with the scenario's policy")


def _remove(path: Path, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while path.exists():
        try:
            path.rmdir()
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)
