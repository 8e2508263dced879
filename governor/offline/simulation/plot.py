"""Plots of simulation outcomes, like the paper's Figures 8 and 13: per policy, each user's
dominant share over time (top) and each resource's committed share of the cluster (bottom;
above 1 means overcommitted). matplotlib, headless (Agg); the format follows the file name
(``.svg``, ``.png``, ``.pdf``).
"""

from __future__ import annotations

from pathlib import Path

from governor.offline.simulation.engine import Outcome

__all__ = ["PlotError", "plot_outcomes"]


class PlotError(Exception):
    """Plotting is unavailable (matplotlib missing) or the file cannot be written."""


def plot_outcomes(outcomes: list[Outcome], path: str | Path) -> None:
    """Write one figure with a column per policy.

    Raises:
        PlotError: matplotlib is not installed, or an unsupported extension / unwritable path.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("plots need matplotlib: pip install 'drf-governor[plot]'") from None
    columns = len(outcomes)
    fig, axes = plt.subplots(2, columns, figsize=(4 * columns, 6), sharex=True, squeeze=False)
    for col, outcome in enumerate(outcomes):
        series = outcome.series
        top, bottom = axes[0][col], axes[1][col]
        for user, shares in sorted(series.dominant_share.items()):
            top.plot(series.time_s, shares, linewidth=0.8, label=user)
        top.set_title(f"{outcome.policy}: {outcome.jobs_completed} jobs")
        top.set_ylim(bottom=0)
        for resource, committed in series.committed.items():
            bottom.plot(series.time_s, committed, linewidth=1.0, label=resource)
        bottom.axhline(1.0, color="grey", linewidth=0.5, linestyle="--")
        bottom.set_xlabel("time (s)")
        bottom.set_ylim(bottom=0)
    axes[0][0].set_ylabel("dominant share")
    axes[1][0].set_ylabel("committed / capacity")
    axes[0][-1].legend(fontsize="x-small", loc="upper right")
    axes[1][-1].legend(fontsize="x-small", loc="lower right")
    fig.tight_layout()
    try:
        fig.savefig(path)
    except (OSError, ValueError) as exc:
        raise PlotError(f"{path}: cannot write the plot: {exc}") from None
    finally:
        plt.close(fig)
