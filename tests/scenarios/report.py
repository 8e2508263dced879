"""A scenario's result as a text table (the console, tables.txt) and as JSON (results.json)."""

from __future__ import annotations

from tests.scenarios.runner import ScenarioResult
from tests.scenarios.units import amount

__all__ = ["result_json", "table"]


def table(result: ScenarioResult) -> str:
    s = result.scenario
    lines = [f"== {s.name}: {s.title} ({result.wall_s:.0f} s) — {'PASS' if not result.failures else 'FAIL'}"]
    weights = ", ".join(f"{u.name} (uid {u.uid}, weight {u.weight}) {u.describe()}" for u in s.users)
    lines.append(f"   users: {weights}")
    if s.never_capped:
        lines.append(f"   never capped on memory: {', '.join(sorted(s.never_capped))}")
    for name, alone in result.alone.items():
        vec = ", ".join(f"{r} {amount(r, v)}" for r, v in alone.vector.items())
        pace = ""
        if alone.growth_bytes_per_s is not None:
            nominal = sum(w.rate_bytes_per_s for w in s.user(name).workloads if w.kind == "grower")
            pace = f"; grew at {alone.growth_bytes_per_s / 2**20:.0f} MiB/s"
            if alone.growth_bytes_per_s < 0.5 * nominal:
                lines.append(f"   WARNING: {name}'s growers reached only {alone.growth_bytes_per_s / 2**20:.0f} of "
                             f"{nominal / 2**20:.0f} MiB/s alone (TCG on a busy host): the governor has more ticks "
                             "to act than the scenario intends")
        lines.append(f"   alone {name}: {vec} (over {alone.window_s:.1f} s{pace}; measured in {alone.measured_in})")
    timeline = {entry["tick"]: entry for entry in result.timeline}
    for p in result.phases:
        head = f"-- phase {p.index + 1}: running {', '.join(p.running)}"
        if p.started and p.index > 0:
            head += f"; started {', '.join(p.started)}"
        if p.stopped:
            head += f"; stopped {', '.join(p.stopped)}"
        head += f" (window {p.window_s:.1f} s; daemon {p.system_cores['daemon']:.3f} cores, " \
                f"harness {p.system_cores['harness']:.3f} cores)"
        lines.append(head)
        reserve = float(result.policy.get("reserve", {}).get("cpu_cores", 0.0)) if result.policy else 0.0
        system = p.system_cores["daemon"] + p.system_cores["harness"]
        if system > reserve:
            lines.append(f"   WARNING: the daemon and the harness used {system:.2f} cores, more than the {reserve:g} "
                         f"reserved: the users' CPU figures are low by the difference (is the host overloaded?)")
        if p.min_mem_available_bytes is not None:
            lines.append(f"   guest: lowest MemAvailable at a tick {p.min_mem_available_bytes / 2**20:.0f} MiB; "
                         f"longest tick interval {p.max_tick_gap_s or 0:.1f} s")
        if p.expectation is None:
            lines.append("   (no expectation: the daemon published no state)")
        else:
            cap = ", ".join(f"{r} {amount(r, v)}" for r, v in p.expectation.capacity.items())
            lines.append(f"   capacity (state.json): {cap}; contended: {', '.join(sorted(p.expectation.contended)) or 'nothing'}")
            lines.append(f"   {'user':<8} {'resource':<13} {'expected':>14} {'measured':>14} {'error':>8}  {'':<9} verdict")
            for c in p.comparisons:
                err = f"{c.error_pct:+.1f}%" if c.error_pct is not None else "-"
                tag = "contended" if c.contended else ""
                verdict = ("ok" if c.ok else "FAIL") if c.checked else "(not checked)"
                lines.append(f"   {c.user:<8} {c.resource:<13} {amount(c.resource, c.expected):>14} "
                             f"{amount(c.resource, c.measured):>14} {err:>8}  {tag:<9} {verdict}")
        for name, ticks in sorted(p.spike_ticks.items()):
            lines.append(f"   {name}: spike read whole by the daemon at {len(ticks)} tick(s): "
                         f"{', '.join(map(str, ticks)) or 'none'}")
            lines += [f"     tick {tick}: {_memory_sums(timeline[tick])}" for tick in ticks if tick in timeline]
        lines += [f"   not counted (growth seen in two readings): {text}" for text in p.not_counted]
        for name, view in sorted(p.governor_view.items()):
            lines.append(f"   daemon's view of {name}: {_view(view)}")
        lines += _cpu_wanted(p, timeline)
        for r in p.reactions:
            got = f"{r.ticks} ticks ({r.seconds:.1f} s)" if r.ticks is not None else f"> {r.observed_ticks} ticks"
            if r.held_ticks is not None and r.ticks is not None:
                got += f", held back by the kernel in {r.held_ticks} of them"
            target = f"target ≤ {r.target_ticks}" if r.target_ticks is not None else "no target (phase start)"
            series = " ".join(_series_value(r.resource, v) for v in r.series[:12])
            lines.append(f"   reaction {r.user} ({r.kind}, {r.resource} → {amount(r.resource, r.expected)}): {got}, "
                         f"{target} — {'ok' if r.ok else 'FAIL'}; per tick: {series}")
    oom = {n: e.get("oom_kill", 0) for n, e in result.safety.get("memory_events", {}).items()}
    lines.append(f"   safety: oom_kill per slice {oom}; kernel OOM lines: {len(result.safety.get('kernel_oom_lines', []))}")
    for error in result.governor_errors[:5]:
        lines.append(f"   governor error: {error}")
    for failure in result.failures:
        lines.append(f"   FAILED: {failure}")
    return "\n".join(lines)


def _series_value(resource: str, value: float) -> str:
    """One tick of a reaction's series, unit left out: cores, disk, MiB (memory), Mbit/s (net:…)."""
    if resource == "memory":
        return f"{value / 2**20:.0f}"
    return f"{value / 1e6:.2f}" if resource.startswith("net:") else f"{value:.2f}"


def _cpu_wanted(p, timeline: dict, ticks: int = 12) -> list[str]:
    """Per running user whose threads were read: her CPU ``wanted`` per tick (state.json
    evidence), her use + throttled, and her threads' demand as the harness read them; at the
    tick where ``wanted`` most exceeds use + throttled, thread by thread what they ran, waited
    and were credited (a diagnostic: a flaky CPU figure is explained here)."""
    lines = []
    entries = [timeline[t] for t in sorted(timeline) if p.event_tick is not None and t > p.event_tick][:ticks]
    for name in p.running:
        rows = [(e["tick"], e["users"].get(name) or {}) for e in entries]
        rows = [(tick, u, ((u.get("evidence") or {}).get("cpu") or {})) for tick, u in rows]
        if not any(u.get("threads") for _, u, _ in rows):
            continue
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        wanted = " ".join(fmt(ev.get("wanted")) for _, _, ev in rows)
        counters = " ".join(fmt(ev["used"] + (u.get("throttled_cores") or 0.0)) if "used" in ev else "-"
                            for _, u, ev in rows)
        threads = " ".join(fmt((u.get("threads") or {}).get("demand_cores")) for _, u, _ in rows)
        lines.append(f"   cpu of {name} per tick: wanted {wanted} | used+throttled {counters} | "
                     f"her threads (harness) {threads}")
        excess = [(ev["wanted"] - ev["used"] - (u.get("throttled_cores") or 0.0), tick, u, ev)
                  for tick, u, ev in rows if "wanted" in ev and u.get("threads")]
        if excess and max(excess, key=lambda x: x[0])[0] > 0.05:
            over, tick, u, ev = max(excess, key=lambda x: x[0])
            each = "; ".join(f"{t['comm']} ran {t['ran_cores']:.3f} waited {t['waited_cores']:.3f} blocked "
                             f"{t['blocks_per_cpu_s'] or 0:.0f}/cpu-s → {t['cores']:.3f}"
                             f"{' paced' if t['paced'] else ''}" for t in u["threads"]["by_thread"])
            lines.append(f"     tick {tick}: wanted {ev['wanted']:.3f}, {over:+.3f} over used+throttled; "
                         f"her threads: {each}")
    return lines


def _memory_sums(entry: dict) -> str:
    """The users' memory at a tick as the daemon read it (state.json): held, demanded, capacity."""
    users = entry["users"].values()
    held = sum((u.get("usage") or {}).get("memory", 0.0) for u in users)
    demand = sum((u.get("demand") or {}).get("memory", 0.0) for u in users)
    capacity = (entry.get("capacity") or {}).get("memory", 0.0)
    return (f"the users held {held / 2**20:.0f} MiB and demanded {demand / 2**20:.0f} MiB "
            f"of {capacity / 2**20:.0f} MiB (state.json)")


def _view(view: dict) -> str:
    """The daemon's demand and allocation of a user (resources she has some of), her limits and
    her HTB classes' ceilings."""
    demand, allocation, limits = view.get("demand") or {}, view.get("allocation") or {}, view.get("limits") or {}
    least = {"memory": 16 * 2**20}  # below this, memory is only the shell's
    used = [r for r in demand if max(demand.get(r, 0), allocation.get(r, 0)) > least.get(r.split(":")[0], 0.005)]
    vec = "; ".join(f"{r} demand {amount(r, demand.get(r))} → allocation {amount(r, allocation.get(r))}" for r in used)
    knobs = [f"cpu.max {limits.get('cpu.max')}"]
    for knob in ("memory.high", "memory.max"):
        if limits.get(knob) is not None:
            knobs.append(f"{knob} {limits[knob] / 2**20:.0f} MiB")
    knobs += [f"io.max {dev} {v}" for dev, v in (limits.get("io.max") or {}).items()]
    knobs += [f"{r} ceil {amount(r, c.get('ceil_bits_per_s'))}" for r, c in (view.get("classes") or {}).items()]
    return f"{vec or 'no demand'} | {', '.join(knobs)}"


def result_json(result: ScenarioResult) -> dict:
    s = result.scenario
    return {
        "name": s.name, "title": s.title, "passed": not result.failures, "failures": result.failures,
        "wall_s": result.wall_s, "tolerance": s.tolerance, "policy": result.policy,
        "never_capped": sorted(s.never_capped),
        "users": [{"name": u.name, "uid": u.uid, "weights": u.weights(), "workloads": u.describe()} for u in s.users],
        "alone": {n: {"vector": a.vector, "peak_memory_bytes": a.peak_memory_bytes, "window_s": a.window_s,
                      "measured_in": a.measured_in, "growth_bytes_per_s": a.growth_bytes_per_s}
                  for n, a in result.alone.items()},
        "phases": [{
            "index": p.index, "running": p.running, "started": p.started, "stopped": p.stopped,
            "event_tick": p.event_tick, "window_s": p.window_s, "system_cores": p.system_cores,
            "min_mem_available_bytes": p.min_mem_available_bytes, "max_tick_gap_s": p.max_tick_gap_s,
            "governor_view": p.governor_view, "spike_ticks": p.spike_ticks,
            "not_counted": p.not_counted,
            "expectation": p.expectation.to_json() if p.expectation else None,
            "measured": p.measured, "peak_memory_bytes": p.peak_memory_bytes,
            "comparisons": [c.to_json() for c in p.comparisons],
            "reactions": [r.to_json() for r in p.reactions], "failures": p.failures,
        } for p in result.phases],
        "safety": result.safety, "governor_errors": result.governor_errors, "timeline": result.timeline,
    }
