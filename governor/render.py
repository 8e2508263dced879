"""Human-readable tables for the CLI (rich). No computation happens here."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from governor.allocate import Result
from governor.problem import Problem

__all__ = ["allocation_table"]


def allocation_table(problem: Problem, result: Result, console: Console) -> None:
    """Print one row per user and a consumed/capacity footer for each resource."""
    resources = problem.resources
    table = Table(title="Weighted DRF allocation" + (" (whole tasks, Algorithm 1)" if result.discrete else ""))
    for header in ("user", "weight", "units", "dominant resource", "dominant share", "weighted share"):
        table.add_column(header, justify="left" if header in ("user", "dominant resource") else "right")
    for r in resources:
        table.add_column(r, justify="right")
    for spec in problem.users:
        u = result.users[spec.name]
        weight = spec.weight if isinstance(spec.weight, float) else ", ".join(f"{k}={v:g}" for k, v in spec.weight.items())
        units = f"{u.units:.0f}" if result.discrete else _num(u.units)
        table.add_row(
            spec.name, _num(weight) if isinstance(weight, float) else weight, units,
            u.dominant_resource or "-", f"{u.dominant_share:.4f}", f"{u.weighted_share:.4f}",
            *(_num(u.allocation[r]) for r in resources),
        )
    table.add_section()
    table.add_row("consumed", "", "", "", "", "", *(_num(result.consumed[r]) for r in resources))
    table.add_row("capacity", "", "", "", "", "", *(_num(problem.capacity[r]) for r in resources))
    console.print(table)
    console.print(f"saturated: {', '.join(result.saturated) if result.saturated else 'none'}")


def _num(x: float) -> str:
    return f"{x:.6g}"
