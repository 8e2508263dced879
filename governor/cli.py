"""The ``drfgov`` command line (typer). Thin: parse arguments, call the library, print.

User mistakes (bad files, unknown names) print one ``drfgov: error: …`` line naming the
file, line and field, and exit with status 2 — never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from governor.source import InputError

app = typer.Typer(
    name="drfgov",
    help="Per-user weighted Dominant Resource Fairness for shared Linux hosts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_USAGE = 2


@app.callback()
def _root() -> None:
    """Per-user weighted Dominant Resource Fairness for shared Linux hosts."""


def fail(message: str) -> NoReturn:
    """Print ``drfgov: error: message`` to stderr and exit 2."""
    print(f"drfgov: error: {message}", file=sys.stderr)
    raise typer.Exit(EXIT_USAGE)


def emit_json(document: object) -> None:
    """Print ``document`` as indented JSON on stdout."""
    print(json.dumps(document, indent=2))


@app.command()
def allocate(
    file: Annotated[Path, typer.Argument(help="Problem file (YAML or JSON): capacity and users.")],
    discrete: Annotated[bool, typer.Option("--discrete", help="Whole tasks with the paper's Algorithm 1.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Offline what-if: the weighted DRF allocation of a problem file.

    FILE holds `capacity: {RES: amount}` and `users: {NAME: {demand: {RES: per-unit},
    max_units, weight, allocated}}`. Progressive filling by default (fractional units).
    """
    from governor.allocate import solve
    from governor.problem import load_problem

    try:
        problem = load_problem(file)
    except InputError as exc:
        fail(str(exc))
    result = solve(problem, discrete=discrete)
    if as_json:
        emit_json(result.to_json())
    else:
        from governor.render import allocation_table

        allocation_table(problem, result, Console())


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
