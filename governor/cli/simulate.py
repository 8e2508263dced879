"""``drfgov simulate``: registered on :data:`governor.cli.app.app` (see governor/offline/simulation)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from governor.cli.app import app, emit_json, fail, fail_solver
from governor.config.errors import InputError

DEFAULT_POLICIES = ("drf", "asset", "ceei", "cpu-fair", "slots:4")


def _capacity(text: str) -> dict[str, float]:
    """``--capacity cpu=8,memory=6``: per machine, resource → amount, in the order given.

    Exits 2 (``--capacity: …``, an option's mistake is not the trace's) on an empty value, a part
    that is not ``RES=AMOUNT`` with 0 < AMOUNT ≤ 10^18, or a resource given twice."""
    from governor.offline.simulation.trace import AMOUNT_MAX

    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        try:
            amount = float(value)
        except ValueError:
            amount = -1.0
        if not sep or not name.strip() or not 0 < amount <= AMOUNT_MAX:
            shown = repr(text) if len(text) <= 60 else f"{len(text):,} characters"
            fail(f"--capacity: expected RES=AMOUNT[,RES=AMOUNT…] with amounts > 0 and ≤ {AMOUNT_MAX:g}, got {shown}")
        if name.strip() in out:
            fail(f"--capacity: {name.strip()!r} given twice")
        out[name.strip()] = amount
    return out


def _in_trace_order(capacity: dict[str, float], resources: list[str]) -> dict[str, float]:
    """``--capacity``'s amounts in the order of the trace's resources (a job's demand's), which
    it must name exactly, in any order.

    Exits 2 (``--capacity: …``) naming the resources missing from it and those not in the trace."""
    from governor.cli.views import printable

    missing = [r for r in resources if r not in capacity]
    known = set(resources)
    extra = [r for r in capacity if r not in known]
    if missing or extra:
        wrong = "; ".join(f"{what}: {', '.join(names)}" for what, names in (("missing", missing),
                                                                           ("not in the trace", extra)) if names)
        fail(printable(f"--capacity: {wrong}; expected the trace's resources {', '.join(resources)} (in any order)"))
    return {r: capacity[r] for r in resources}


@app.command()
def simulate(
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help="Jobs: JSON lines (optional header line) or CSV; see README.")],
    policy: Annotated[list[str] | None, typer.Option("--policy", "-p", help="drf, asset, ceei, cpu-fair or slots:K; repeatable. Default: the trace's, else drf asset ceei cpu-fair slots:4.")] = None,
    machines: Annotated[int | None, typer.Option("--machines", min=1, help="Machines in the cluster (overrides the trace).")] = None,
    capacity: Annotated[str | None, typer.Option("--capacity", help="Per machine, e.g. cpu=8,memory=6 (overrides the trace).")] = None,
    duration_s: Annotated[float | None, typer.Option("--duration-s", min=0.001, help="Simulated seconds (default: the trace's, else until every job ends).")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write dominant shares and utilization over time (.svg, .png, .pdf).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Discrete-event simulation of users' jobs on a cluster under DRF and its alternatives:
    jobs completed, mean job response time and utilization per policy."""
    from governor.offline.simulation.engine import TaskTooBig, simulate as run
    from governor.offline.simulation.schedulers import parse_scheduler
    from governor.cli.history import check_plot
    from governor.offline.simulation.trace import Cluster, check_work, load_trace

    if plot is not None:  # before the simulation, not after it
        check_plot(plot)
    given = _capacity(capacity) if capacity is not None else None  # the options' mistakes first
    try:
        loaded = load_trace(trace)
    except InputError as exc:
        fail(str(exc))
    cluster = loaded.cluster
    if machines is not None or given is not None:
        if (machines is None or given is None) and cluster is None:
            fail(f"{trace}: no cluster in the trace: give both --machines and --capacity")
        cluster = Cluster(machines or cluster.machines,
                          _in_trace_order(given, loaded.resources) if given is not None else cluster.capacity)
    if cluster is None:
        fail(f"{trace}: no cluster: add a header line {{\"cluster\": {{...}}}} or give --machines and --capacity")
    horizon = duration_s or loaded.duration_s
    if horizon is None and any(j.repeat for j in loaded.jobs):
        fail(f"{trace}: jobs with repeat: true never end: give --duration-s or duration_s in the header")
    try:
        check_work(loaded, cluster, horizon, machines_from="--machines" if machines is not None else "cluster.machines",
                   capacity_from="--capacity" if capacity is not None else "cluster.capacity",
                   horizon_from="--duration-s" if duration_s else "duration_s")
    except InputError as exc:
        fail(str(exc))
    names = policy or loaded.policies or [p for p in DEFAULT_POLICIES if p != "cpu-fair" or "cpu" in loaded.resources]
    # an option's mistake is the option's, not the trace's
    where = "--policy" if policy else f"{trace}:{loaded.cluster_line}: policies" if loaded.cluster_line else \
        f"{trace}: policies"
    try:
        policies = [parse_scheduler(name, loaded.resources) for name in names]
    except ValueError as exc:
        fail(f"{where}: {str(exc)[:300]}")
    first: dict[str, str] = {}
    for name, p in zip(names, policies):  # by the scheduler's own name: slots:4 and slots:04 are one policy
        if p.name in first:
            fail(f"{where}: {p.name} given twice ({first[p.name]!r}, then {name!r}); expected each policy once")
        first[p.name] = name
    outcomes = []
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:<10}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
                  TimeElapsedColumn(), console=Console(stderr=True), disable=as_json or not sys.stderr.isatty()) as bar:
        for p in policies:
            task = bar.add_task(p.name, total=horizon if horizon else None)
            try:
                outcomes.append(run(p, cluster, loaded.jobs, loaded.weights, horizon,
                                    progress=lambda t, task=task: bar.update(task, completed=t)))
            except TaskTooBig as exc:
                fail(f"{trace}:{exc.job.line}: demand: {exc}" if exc.job.line else f"{trace}: {exc}")
            except ValueError as exc:
                fail(f"{trace}: {exc}")
            except ArithmeticError as exc:  # CEEI's prices (a bug, not the trace's fault)
                fail_solver(trace, exc)
            bar.update(task, completed=horizon or outcomes[-1].end_s)
    if plot is not None:
        from governor.offline.simulation.plot import PlotError, plot_outcomes

        try:
            plot_outcomes(outcomes, plot)
        except PlotError as exc:
            fail(str(exc), 1)
    if as_json:
        emit_json({"cluster": {"machines": cluster.machines, "capacity": cluster.capacity}, "duration_s": horizon,
                   "policies": {o.policy: o.to_json() for o in outcomes}})
        return
    _print(outcomes, cluster, horizon, plot)


def _print(outcomes, cluster, horizon, plot) -> None:
    from rich.console import Console
    from rich.table import Table

    from governor.cli.views import markup_safe  # names from the trace are shown as written, never as markup

    console = Console() if sys.stdout.isatty() else Console(width=160)
    resources = list(cluster.capacity)
    table = Table(title=markup_safe(f"{cluster.machines} machines × {cluster.capacity}, "
                                    f"{'until every job ends' if horizon is None else f'{horizon:g} s'}"))
    for header in ("policy", "jobs done", "mean response (s)", "tasks done", *(f"{r} util." for r in resources), "task events"):
        table.add_column(markup_safe(header), justify="left" if header == "policy" else "right")
    for o in outcomes:
        mean = "-" if o.mean_response_s is None else f"{o.mean_response_s:.1f}"
        table.add_row(markup_safe(o.policy), str(o.jobs_completed), mean, str(o.tasks_completed),
                      *(f"{o.mean_utilization[r]:.1%}" for r in resources), str(o.task_events))
    console.print(table)
    best = max(outcomes, key=lambda o: o.jobs_completed)
    rivals = [o for o in outcomes if o is not best and o.jobs_completed == best.jobs_completed]
    lead = "ties with " + ", ".join(o.policy for o in rivals) if rivals else "completes the most jobs"
    console.print(markup_safe(f"{best.policy} {lead} ({best.jobs_completed})" + (f"; plot: {plot}" if plot else "")),
                  highlight=False)
