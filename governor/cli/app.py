"""The ``drfgov`` command line (typer). Thin: parse arguments, call the library, print.

User mistakes (bad files, unknown names) print one ``drfgov: error: …`` line naming the
file, line and field, and exit with status 2 — never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from typer.core import TyperGroup

from governor.config.errors import InputError
from governor.config.location import DEFAULT_POLICY_FILE, policy_file

class _RootGroup(TyperGroup):
    """The root of the command tree, the one boundary every command line passes through (the
    console script, ``python -m``, a test's runner): a usage error that click reports itself
    — a value out of ``min=``, an unknown option, a missing argument, a bad type, an unknown
    command — gets the ``{"ok": false, "error": …}`` line of :func:`fail` on stdout when the
    command line asks for ``--json``; click then prints its usage text on stderr and exits 2,
    as without ``--json``. Such an error comes before ``ctx.params`` is filled, so the command
    line decides (:func:`_json_on_command_line`), not ``as_json``."""

    def make_context(self, info_name, args, parent=None, **extra):
        as_json = _json_on_command_line(args)
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except _click("exceptions").UsageError as exc:  # the root's own options, e.g. `drfgov --json allocate`
            _usage_error_as_json(exc, as_json)
            raise
        ctx.meta[_JSON_ON_COMMAND_LINE] = as_json
        return ctx

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except _click("exceptions").UsageError as exc:  # a subcommand's (or calibrate's) arguments
            _usage_error_as_json(exc, ctx.meta.get(_JSON_ON_COMMAND_LINE, False))
            raise


_JSON_ON_COMMAND_LINE = "drfgov.json_on_command_line"


def _json_on_command_line(args) -> bool:
    """Whether ``--json`` is a word of the command line before any ``--`` (after ``--`` it is
    an argument's value, e.g. a file named ``--json``). Kept simple: an option's value that is
    the string ``--json`` (``--policy --json``) counts too."""
    args = list(args)
    return "--json" in args[: args.index("--") if "--" in args else len(args)]


def _usage_error_as_json(exc: Exception, as_json: bool) -> None:
    """Print click's usage error as ``fail``'s JSON line on stdout, if ``--json`` was asked
    for (a no-arguments help screen is not an error a script made: left alone)."""
    no_args_help = getattr(_click("exceptions"), "NoArgsIsHelpError", ())  # click ≥ 8.2
    if as_json and not isinstance(exc, no_args_help):
        _print_json_error(exc.format_message())


app = typer.Typer(
    cls=_RootGroup,
    name="drfgov",
    help="Per-user weighted Dominant Resource Fairness for shared Linux hosts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: typer's rich help imports rich and markdown-it (~60 ms; issue 16)
    context_settings={"help_option_names": ["-h", "--help"]},  # every command's contexts inherit it
)

EXIT_USAGE = 2


def _print_version(asked: bool) -> None:
    """``--version``: ``drfgov VERSION`` (the installed distribution's), then exit 0."""
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"drfgov {version('drf-governor')}")
        except PackageNotFoundError:  # run from a source tree that is not installed
            print("drfgov (not installed: no version)")
        raise typer.Exit(0)


@app.callback()
def _root(
    _version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                           help="Print the version and exit.")] = False,
) -> None:
    """Per-user weighted Dominant Resource Fairness for shared Linux hosts."""


def fail(message: str, code: int = EXIT_USAGE, **document) -> NoReturn:
    """Print ``drfgov: error: message`` to stderr and exit ``code`` (2: bad input). A command
    run with ``--json`` (its ``as_json`` parameter) also prints ``{"ok": false, "error":
    message, **document}`` on stdout, on one line: a script reads every error where it reads
    the answer (a ``--watch`` stream stays one document per line)."""
    print(f"drfgov: error: {message}", file=sys.stderr)
    if _json_requested():
        _print_json_error(message, **document)
    raise typer.Exit(code)


def _print_json_error(message: str, **document) -> None:
    """An error as one JSON line on stdout, ``{"ok": false, "error": message, **document}``:
    where a script run with ``--json`` reads every error (:func:`fail`, :class:`_RootGroup`)."""
    print(json.dumps({"ok": False, "error": message, **document}), flush=True)


def _json_requested() -> bool:
    """Whether the command running was given ``--json`` (its ``as_json`` parameter). Asked of
    the click that typer runs on — the package of :class:`typer.Context`'s base, ``click`` or
    the copy typer ≥ 0.25 carries — never of another click that happens to be importable:
    that one knows no running command (the review of the JSON errors: the line was dropped)."""
    ctx = _click("globals").get_current_context(silent=True)
    return ctx is not None and bool(ctx.params.get("as_json"))


def _click(module: str):
    """``module`` of the click that typer runs on (``click.globals`` or ``typer._click.globals``),
    found from :class:`typer.Context`'s base — never ``import click``: see :func:`_json_requested`."""
    import importlib

    click_package = typer.Context.__mro__[1].__module__.rpartition(".")[0]
    return importlib.import_module(f"{click_package}.{module}")


def emit_json(document: object) -> None:
    """Print ``document`` as indented JSON on stdout."""
    print(json.dumps(document, indent=2))


@app.command()
def allocate(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Problem file (YAML or JSON): capacity and users.")],
    discrete: Annotated[bool, typer.Option("--discrete", help="Whole tasks with the paper's Algorithm 1.")] = False,
    policy: Annotated[str, typer.Option("--policy", help="drf | asset | ceei | slots | cpu-fair.")] = "drf",
    slots: Annotated[int | None, typer.Option("--slots", min=1, help="Slots the capacity is cut into (--policy slots; default 4).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Offline what-if: the weighted allocation of a problem file (DRF unless --policy).

    FILE holds `capacity: {RES: amount}` and `users: {NAME: {demand: {RES: per-unit},
    max_units, weight, allocated}}`. Progressive filling by default (fractional units).
    """
    from governor.fairness.alternatives import DEFAULT_SLOTS, AllocatorError, UnknownAllocator
    from governor.offline.allocate import check_options, solve, solve_fill

    try:  # the options' own mistakes first, named as theirs, before the file is read
        check_options(policy, discrete)
    except UnknownAllocator as exc:
        fail(f"--policy: {exc}")
    except AllocatorError as exc:
        fail(str(exc))
    if slots is not None and policy != "slots":
        fail(f"--slots: only with --policy slots (the policy is {policy})")
    slots = DEFAULT_SLOTS if slots is None else slots
    if as_json:  # the document straight from the arrays: no per-user objects (issue 16)
        from governor.offline.json_report import allocation_json

        problem, fill = _on_problem(file, lambda p: solve_fill(p, discrete=discrete, policy=policy, slots=slots))
        print(allocation_json(problem.resources, [u.name for u in problem.users], fill, discrete))
    else:
        from rich.console import Console

        from governor.cli.render import allocation_table

        problem, result = _on_problem(file, lambda p: solve(p, discrete=discrete, policy=policy, slots=slots))
        allocation_table(problem, result, Console(), policy)


def _on_problem(file: Path, work):
    """Load problem FILE and return ``(problem, work(problem))``; a bad file or a policy that
    cannot run on it exits 2 with one line."""
    from governor.fairness.alternatives import AllocatorError
    from governor.offline.problem import load_problem

    try:
        problem = load_problem(file)
        return problem, work(problem)
    except InputError as exc:
        fail(str(exc))
    except AllocatorError as exc:
        fail(f"{file}: {exc}")
    except ArithmeticError as exc:
        fail_solver(file, exc)


def fail_solver(file: Path, exc: ArithmeticError) -> NoReturn:
    """Not a mistake in the file: a solver that could not settle it in floats (exit 1)."""
    fail(f"{file}: the solver could not settle this problem in floating point ({exc}); "
         "this is a bug in drfgov: please report it with this file", 1)


@app.command()
def compare(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Problem file, as for allocate.")],
    slots: Annotated[int, typer.Option("--slots", min=1, help="Slots for the slot-based policy.")] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """DRF against asset fairness, CEEI, slots and CPU-only fairness on FILE: each policy's
    allocation side by side, and which of sharing incentive, strategy-proofness (searched
    misreports), envy-freeness and Pareto efficiency hold there, with a witness when not."""
    from governor.offline.compare import compare as run_compare

    _, comparison = _on_problem(file, lambda p: run_compare(p, slots=slots))
    if as_json:
        emit_json(comparison.to_json())
    else:
        from rich.console import Console

        from governor.cli.render import comparison_tables

        comparison_tables(comparison, Console())


DEFAULT_CONFIG = DEFAULT_POLICY_FILE  # the one definition: governor.config.location


def config_path(file: Path | None) -> Path | None:
    """The policy file to use (:func:`governor.config.location.policy_file`)."""
    return policy_file(file, DEFAULT_CONFIG)


def check_directories(policy) -> None:
    """Refuse the policy's state, history and textfile directories, and a file at state_path,
    history.path or metrics.textfile that is not drfgov's own, as ``drfgov run`` would
    (:func:`governor.service.daemon.output_refusals`; reading only), the first refused named.

    Raises:
        InputError: the policy's error, naming its file, the field (state_path, history.path,
            metrics.textfile) and its line where the file sets it (a default has none).
    """
    from governor.service.daemon import output_refusals

    for field, why in output_refusals(policy).items():
        raise InputError(policy.source, _line_of(policy.source, field), field, why)


def _line_of(file: str, field: str) -> int | None:
    """The line that sets ``field`` (dotted: ``history.path``) in the policy ``file``, read
    again: None where the file does not set it (the default is at fault) or cannot be read."""
    from governor.config.source import load

    path = tuple(field.split("."))
    try:
        located = load(file)
    except InputError:
        return None
    return located.line(path) if path in located.lines else None


def _textfile_warnings(policy) -> list[str]:
    """What ``drfgov run`` would only log of metrics.textfile's directory, as check-config's
    warnings (``FILE:LINE: metrics.textfile: why``): one root cannot write
    (:func:`governor.service.daemon.textfile_directory_access`)."""
    from governor.service.daemon import textfile_directory_access

    access = textfile_directory_access(policy)
    if access is None or access[0]:  # refused: check_directories said so
        return []
    line = _line_of(policy.source, "metrics.textfile")
    return [f"{policy.source}{f':{line}' if line else ''}: metrics.textfile: {access[1]}"]


@app.command("check-config")
def check_config(
    file: Annotated[Path | None, typer.Argument(metavar="FILE", help="Policy file; default /etc/drfgov/drfgov.yaml.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Validate a policy file: errors exit 2 naming file, line and field; unknown users and
    groups, and disks and NICs this host lacks, are warnings (they may not exist yet). The file must be one only root can change
    (as sshd's StrictModes), and its reserve must leave this host's users some CPU and memory."""
    from governor.config.policy import HostFacts, load_policy

    path = config_path(file)
    try:
        policy, warnings = load_policy(path, host=HostFacts.this_host())
        check_directories(policy)
        warnings += _textfile_warnings(policy)
    except InputError as exc:
        fail(str(exc), file=None if path is None else str(path), warnings=[])
    if as_json:
        emit_json({"ok": True, "file": policy.source, "warnings": warnings})
        return
    for warning in warnings:
        print(f"drfgov: warning: {warning}", file=sys.stderr)
    where = policy.source if path is not None else f"no policy file ({DEFAULT_CONFIG} absent): the defaults apply"
    print(f"OK: {where}: mode {policy.mode}, backend {policy.backend}, tick {policy.interval_s:g} s, "
          f"enforcing {', '.join(policy.enforce)}, {len(policy.user_weights)} user and "
          f"{len(policy.group_weights)} group weights")


calibrate_app = typer.Typer(help="Measure capacities that the host cannot report by itself.", no_args_is_help=True)
app.add_typer(calibrate_app, name="calibrate")


@calibrate_app.command("io")
def calibrate_io_cmd(
    target: Annotated[Path, typer.Argument(metavar="TARGET", help="A directory on the disk (scratch file: write+read) or a block device (read only).")] = Path("/var/tmp"),
    size_mib: Annotated[int, typer.Option("--size-mib", min=1, help="MiB to transfer per phase.")] = 256,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Sequential O_DIRECT bandwidth of the disk behind TARGET, as capacity config."""
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    from governor.service.calibrate import CalibrationError, calibrate_io

    progress = Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                        console=Console(stderr=True), transient=True, disable=as_json)
    tasks: dict[str, int] = {}

    def report(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            progress.start()  # only once there is something to show
            tasks[phase] = progress.add_task(f"{phase:<5}", total=total)
        progress.update(tasks[phase], completed=done)

    try:
        result = calibrate_io(target, size_mib << 20, report)
    except CalibrationError as exc:
        if tasks:  # a progress bar never started would still print an empty line on stop
            progress.stop()
        fail(str(exc))
    if tasks:
        progress.stop()
    disks = {d.name: {"device": d.device} for d in result.disks}
    for entry in disks.values():
        entry["read_bytes_per_s"] = round(result.read_bytes_per_s)
        if result.write_bytes_per_s is not None:
            entry["write_bytes_per_s"] = round(result.write_bytes_per_s)
    if as_json:
        emit_json({"target": result.target, "size_bytes": result.size_bytes, "disks": disks})
        return
    write = "not measured (block device: read only)" if result.write_bytes_per_s is None else f"{result.write_bytes_per_s / 2**20:.1f} MiB/s"
    print(f"{result.target} on {', '.join(f'{d.name} ({d.device})' for d in result.disks)}: "
          f"read {result.read_bytes_per_s / 2**20:.1f} MiB/s, write {write}, {size_mib} MiB per phase")
    print("\nPut this in the policy file:\n\ncapacity:\n  disks:")
    for name, entry in disks.items():
        fields = ", ".join(f"{k}: {v}" for k, v in entry.items() if k != "device")
        print(f"    {name}: {{{fields}}}")





def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
