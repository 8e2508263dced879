"""Human-readable tables for the CLI (rich). No computation happens here. Every name, resource
and witness from the problem file goes in through :func:`~governor.cli.views.markup_safe`: shown
as written, never read as rich markup."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from governor.cli.views import markup_safe
from governor.offline.allocate import Result
from governor.offline.problem import Problem

__all__ = ["allocation_table", "comparison_tables"]

POLICY_TITLES = {"drf": "Weighted DRF", "asset": "Asset fairness", "ceei": "CEEI (Nash bargaining)",
                 "slots": "Slot-based fair sharing", "cpu-fair": "CPU-only max-min fairness"}


def allocation_table(problem: Problem, result: Result, console: Console, policy: str = "drf") -> None:
    """Print one row per user and a consumed/capacity footer for each resource."""
    resources = problem.resources
    table = Table(title=f"{POLICY_TITLES[policy]} allocation" + (" (whole tasks, Algorithm 1)" if result.discrete else ""))
    for header in ("user", "weight", "units", "dominant resource", "dominant share", "weighted share"):
        table.add_column(header, justify="left" if header in ("user", "dominant resource") else "right")
    for r in resources:
        table.add_column(markup_safe(r), justify="right")
    for spec in problem.users:
        u = result.users[spec.name]
        weight = spec.weight if isinstance(spec.weight, float) else ", ".join(f"{k}={v:g}" for k, v in spec.weight.items())
        units = f"{u.units:.0f}" if result.discrete else _num(u.units)
        table.add_row(
            markup_safe(spec.name), _num(weight) if isinstance(weight, float) else markup_safe(weight), units,
            markup_safe(u.dominant_resource or "-"), f"{u.dominant_share:.4f}", f"{u.weighted_share:.4f}",
            *(_num(u.allocation[r]) for r in resources),
        )
    table.add_section()
    table.add_row("consumed", "", "", "", "", "", *(_num(result.consumed[r]) for r in resources))
    table.add_row("capacity", "", "", "", "", "", *(_num(problem.capacity[r]) for r in resources))
    console.print(table)
    console.print(f"saturated: {markup_safe(', '.join(result.saturated)) if result.saturated else 'none'}", highlight=False)


def _num(x: float) -> str:
    return f"{x:.6g}"


def comparison_tables(comparison, console: Console) -> None:
    """Units and dominant share per user under each policy; then the properties, ✓ or ✗ with
    the witness of each violation."""
    outcomes = comparison.outcomes
    units = Table(title="Units of work per user (dominant share)")
    units.add_column("user")
    for o in outcomes:
        units.add_column(markup_safe(o.policy), justify="right")
    for name in outcomes[0].result.users:
        units.add_row(markup_safe(name), *(f"{_num(o.result.users[name].units)} ({o.result.users[name].dominant_share:.3f})"
                              for o in outcomes))
    console.print(units)
    props = Table(title="Properties on this instance (paper §3)")
    props.add_column("policy")
    for check in outcomes[0].properties:
        props.add_column(markup_safe(check.name), justify="center")
    for o in outcomes:
        props.add_row(markup_safe(o.policy), *("[green]✓[/]" if p.holds else "[red]✗[/]" for p in o.properties))
    console.print(props)
    for o in outcomes:
        for p in o.properties:
            if not p.holds:
                console.print(markup_safe(f"{o.policy} violates {p.name}: {p.witness}"), highlight=False)
    searches = {p.searched for o in outcomes for p in o.properties if p.searched and p.searched[0] < p.searched[1]}
    for tried, possible in sorted(searches):
        console.print(f"strategy-proofness: {tried:,} of {possible:,} misreports tried per policy (evenly spread; "
                      "a ✓ is evidence, not proof)", highlight=False)
