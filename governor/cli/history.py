"""``drfgov history``: registered on :data:`governor.cli.app.app`; reads the database
:mod:`governor.service.history` keeps (read-only: it never blocks the daemon).

Exit status: 0 printed; 1 nothing recorded in the range, or matplotlib missing for --plot;
2 bad input (no database, unknown user, a time that does not parse).
"""

from __future__ import annotations

import math
import re
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:  # rich is imported where a table is drawn: --help needs none of it
    from rich.table import Table

from governor.cli.app import app, emit_json, fail
from governor.cli.service import ConfigOption, JsonOption, _console, _policy

EXIT_FAILED = 1
PLOT_FORMATS = (".png", ".svg", ".pdf")
MAX_PLOTTED = 12  # users in one figure: the highest mean weighted shares (name one for hers)
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)(sec|min|s|m|h|d|w)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:sec|min|s|m|h|d|w))+")


def parse_time(text: str, now: float, option: str) -> float:
    """Unix seconds from ``6h``/``1h30m``/``2d`` (that long before ``now``), ``now``, an ISO 8601
    date or date-time (local time unless it names its zone), or ``@UNIX_SECONDS``.

    Raises:
        ValueError: with a message naming ``option``.
    """
    spec = text.strip()
    compact = spec.replace(" ", "")
    value: float | None = None
    if spec == "now":
        value = now
    elif spec.startswith("@"):
        try:
            value = float(spec[1:])
        except ValueError:
            pass
    elif compact and _DURATION.fullmatch(compact):
        value = now - sum(float(n) * _UNITS[u] for n, u in _PART.findall(compact))
    else:
        try:
            value = datetime.fromisoformat(spec).timestamp()
        except (ValueError, OverflowError, OSError):
            pass
    if value is None or not math.isfinite(value) or not 0 <= value < 2**40:
        raise ValueError(f"{option}: expected a duration back from now (90s, 30m, 6h, 1h30m, 2d, 1w), an ISO date or "
                         f"date-time (2025-06-01, 2025-06-01T14:00), or @UNIX_SECONDS; got {text!r}")
    return value


def check_plot(plot: Path) -> None:
    """Refuse a ``--plot`` file that could not be written, before any work (``history`` and
    ``simulate``): exit 2 for a name not ending in :data:`PLOT_FORMATS`, a directory, or a file
    whose directory is missing or not writable; exit 1 without matplotlib."""
    import os

    if plot.suffix.lower() not in PLOT_FORMATS:
        fail(f"--plot {plot}: expected a file name ending in {', '.join(PLOT_FORMATS)}")
    folder = plot.parent  # "x.svg": the working directory
    if os.path.isdir(plot):
        fail(f"--plot {plot}: a directory: expected a file to write the plot in")
    if not os.path.isdir(folder):
        fail(f"--plot {plot}: no directory {folder} to write it in")
    exists = os.path.lexists(plot)
    if not os.access(plot if exists else folder, os.W_OK):
        fail(f"--plot {plot}: cannot write {'the file' if exists else f'in {folder}'}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        fail("--plot needs matplotlib: pip install 'drf-governor[plot]'", EXIT_FAILED)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


@app.command()
def history(
    user: Annotated[str | None, typer.Argument(metavar="USER", help="Login name or uid; default every user.")] = None,
    since: Annotated[str, typer.Option("--since", help="Start: 6h, 30m, 2d, 1w back from now; an ISO date/time; or @UNIX_SECONDS.")] = "24h",
    until: Annotated[str, typer.Option("--until", help="End, in the same forms (default now).")] = "now",
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a figure of dominant share and use over time (.png, .svg, .pdf).")] = None,
    as_json: JsonOption = False,
    db: Annotated[Path | None, typer.Option("--db", help="History database; default the policy's history.path.")] = None,
    config: ConfigOption = None,
) -> None:
    """Each user's shares over a time range, from the daemon's history: mean and maximum
    dominant share, mean weighted share, per resource mean use and allocation, and how much of
    the time the kernel held her back. --plot draws them over time (matplotlib:
    pip install 'drf-governor[plot]')."""
    from governor.service.history import HistoryError, HistoryReader

    now = time.time()
    try:
        start, end = parse_time(since, now, "--since"), parse_time(until, now, "--until")
    except ValueError as exc:
        fail(str(exc))
    if start >= end:
        fail(f"--since ({_when(start)}) is not before --until ({_when(end)})")
    if plot is not None:
        check_plot(plot)
    path = db if db is not None else Path(_policy(config).history_path)
    try:
        reader = HistoryReader(path)
    except HistoryError as exc:
        fail(str(exc))
    try:
        uid = None
        if user is not None:
            try:
                uid = reader.find_user(user)
            except KeyError as exc:  # the names known are the account databases': shown printable
                from governor.cli.views import printable

                fail(printable(f"{path}: {exc.args[0]}"))
        series = reader.series(start, end, uid)
        cap_t, capacity = reader.capacity(start, end) if plot is not None else (None, {})
        changes = reader.limits(start, end, uid) if as_json and uid is not None else []
        span = reader.span()
        immutable = reader.immutable
    except HistoryError as exc:  # a damaged file
        fail(str(exc))
    finally:
        reader.close()
    if not series:
        held = f"it holds {_when(span[0])} to {_when(span[1])}" if span else "it is empty"
        fail(f"{path}: no history{' of ' + user if user else ''} between {_when(start)} and {_when(end)} ({held})",
             EXIT_FAILED)
    ranked = sorted(((s.summary(), s) for s in series.values()), key=lambda p: -(p[0]["weighted_share_mean"] or 0.0))
    summaries = [summary for summary, _ in ranked]
    if plot is not None:
        try:
            plot_history([s for _, s in ranked[:MAX_PLOTTED]], cap_t, capacity, plot, f"{_when(start)} – {_when(end)}")
        except (OSError, ValueError) as exc:
            fail(f"{plot}: cannot write the plot: {exc}", EXIT_FAILED)
    if as_json:
        doc = {"db": str(path), "since_unix_s": start, "until_unix_s": end, "read_as_is": immutable, "users": summaries}
        if uid is not None:
            doc["limits"] = [{"time_unix_s": t, "limits": limits} for t, _, limits in changes]
        if plot is not None:
            doc["plot"] = str(plot)
        emit_json(doc)
        return
    from governor.cli.views import markup_safe

    console = _console()
    console.print(summary_table(summaries, f"{path}: {_when(start)} – {_when(end)}"))
    notes = ["held back: share of the samples in which the kernel held her back (throttled, at a limit, stalled); "
             "the last day at full resolution, hourly means beyond"]
    if immutable:
        notes.append("read as it is (its directory cannot be written: a read-only filesystem): "
                     "a writer at the same time is not seen")
    if plot is not None:
        shown = f"the {MAX_PLOTTED} with the highest mean weighted share" if len(ranked) > MAX_PLOTTED else "every user"
        notes.append(markup_safe(f"plot: {plot} ({shown})"))
    for note in notes:
        console.print(note, highlight=False)


def summary_table(summaries: list[dict], title: str) -> Table:
    """One row per user: shares, held back, and per resource mean use / mean allocation (the
    unit in the column's header). Names, resources and ``title`` are shown as written, never as
    markup (:func:`~governor.cli.views.markup_safe`)."""
    from rich.table import Table

    from governor.cli.views import markup_safe

    resources = list(dict.fromkeys(r for s in summaries for r in s["resources"]))
    table = Table(title=markup_safe(title))
    for header in ("user", "uid", "dominant", "dom. share\nmean / max", "wtd share\nmean", "held\nback"):
        table.add_column(header, justify="left" if header in ("user", "dominant") else "right")
    for r in resources:
        table.add_column(f"{markup_safe(r)} ({_unit(r)[0]})\nuse / alloc", justify="right")

    def share(x):
        return "-" if x is None else f"{x:.3f}"

    for s in summaries:
        cells = [markup_safe(s["name"]), str(s["uid"]), markup_safe(s["dominant_resource"] or "-"),
                 f"{share(s['dominant_share_mean'])} / {share(s['dominant_share_max'])}", share(s["weighted_share_mean"]),
                 "-" if s["held_ratio"] is None else f"{s['held_ratio']:.0%}"]
        for r in resources:
            got = s["resources"].get(r)
            scale = _unit(r)[1]
            cells.append("-" if got is None else " / ".join(
                "-" if x is None else f"{x / scale:.3g}" for x in (got["usage_mean"], got["allocation_mean"])))
        table.add_row(*cells)
    return table


def _unit(resource: str) -> tuple[str, float]:
    """The unit a resource's amounts are shown in, and what one of it is in state.json's units."""
    kind = resource.split(":", 1)[0]
    return {"cpu": ("cores", 1.0), "memory": ("GiB", 2.0**30), "disk": ("% busy", 0.01),
            "net": ("Mbit/s", 1e6)}.get(kind, ("", 1.0))


def plot_history(series: list, cap_t, capacity: dict, path: Path, title: str) -> None:
    """Per user, a row of two panels: her dominant and weighted share (left) and each
    resource's use as a share of what the users shared then (right), shaded where the kernel
    held her back. The format follows the file name.

    Raises:
        OSError / ValueError: the file cannot be written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    import numpy as np

    rows = len(series)
    local = datetime.now().astimezone().tzinfo
    fig, axes = plt.subplots(rows, 2, figsize=(13, 2.4 * rows + 0.8), squeeze=False, sharex=True)
    step = _recording_step(cap_t)
    for (left, right), s in zip(axes, series):
        gaps = _gaps(s.t, s.samples, step)
        x = np.insert(s.t.astype(float), gaps, s.t[gaps - 1] + 1.0) / 86400.0  # matplotlib's dates: days since 1970

        def gapped(values, gaps=gaps):
            return np.insert(np.asarray(values, dtype=float), gaps, np.nan)

        left.plot(x, gapped(s.dominant_share), linewidth=1.2, label="dominant share", color="tab:blue")
        if np.any(s.samples > 1):
            left.fill_between(x, gapped(s.dominant_share), gapped(s.dominant_share_max), color="tab:blue", alpha=0.15,
                              linewidth=0, label="hourly max")
        left.plot(x, gapped(s.weighted_share), linewidth=0.9, linestyle="--", label="weighted share", color="tab:orange")
        left.set_ylim(bottom=0)
        left.set_ylabel(f"{s.name} ({s.uid})", fontsize="small")
        for r, use in s.usage.items():
            base = _capacity_at(s.t, cap_t, capacity.get(r))
            if base is None:
                top = np.nanmax(use) if np.isfinite(use).any() else 1.0
                shown, label = use / (top or 1.0), f"{r} (of her max)"
            else:
                shown, label = use / base, r
            right.plot(x, gapped(shown), linewidth=0.9, label=label)
        right.set_ylim(bottom=0)
        held = np.nan_to_num(gapped(s.held))
        for ax in (left, right):  # light: held back some of the time (an hour's point); dark: most or all of it
            ax.fill_between(x, 0, 1, where=(held > 0) & (held < 0.5), step="post", color="tab:red", alpha=0.12,
                            linewidth=0, transform=ax.get_xaxis_transform(), label="held back < half the time")
            ax.fill_between(x, 0, 1, where=held >= 0.5, step="post", color="tab:red", alpha=0.35, linewidth=0,
                            transform=ax.get_xaxis_transform(), label="held back")
            ax.grid(alpha=0.3)
    axes[0][0].set_title("dominant and weighted share", fontsize="medium")
    axes[0][1].set_title("use / capacity shared", fontsize="medium")
    axes[0][0].legend(fontsize="x-small", loc="upper left")
    axes[0][1].legend(fontsize="x-small", loc="upper left", ncol=2)
    for ax in axes[-1]:
        locator = mdates.AutoDateLocator(tz=local)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=local))
    fig.suptitle(f"drfgov history {title}", fontsize="medium")
    fig.tight_layout()
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)


def _recording_step(cap_t) -> float | None:
    """The daemon's recording interval, seconds: the median step between the ticks it recorded
    at full resolution (beyond a day the ticks table keeps an hour's first); None when unknown."""
    import numpy as np

    if cap_t is None or len(cap_t) < 2:
        return None
    dt = np.diff(np.asarray(cap_t, dtype=float))
    dt = dt[(dt > 0) & (dt < 3600.0)]
    return float(np.median(dt)) if len(dt) else None


def _gaps(t, samples, step: float | None = None):
    """Where a user's line should break: indices before which a NaN point goes, for np.insert.
    It breaks where she has no sample for more than about two recording intervals (``step``:
    the daemon's, else the median of her own steps) — she was absent (logged out, not measured)
    or the daemon was not recording — and, among hourly points, where a whole hour is missing."""
    import numpy as np

    if len(t) < 2:
        return np.array([], dtype=int)
    dt = np.diff(t.astype(float))
    if step is None:
        raw = dt[(samples[:-1] == 1) & (samples[1:] == 1)]
        step = float(np.median(raw)) if len(raw) else 3600.0
    hourly = (samples[:-1] > 1) | (samples[1:] > 1)
    limit = np.where(hourly, 1.5 * 3600.0, 2.5 * step)  # 3 steps: two records missed; 2 hours: one hour missed
    return np.flatnonzero(dt > limit) + 1


def _capacity_at(t, cap_t, values):
    """Each point's capacity: the last tick at or before it (None when none was recorded)."""
    import numpy as np

    if values is None or cap_t is None or not len(cap_t):
        return None
    idx = np.clip(np.searchsorted(cap_t, t, side="right") - 1, 0, len(cap_t) - 1)
    base = values[idx]
    return np.where(base > 0, base, np.nan)
