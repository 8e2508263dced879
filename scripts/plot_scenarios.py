"""Figures of the scenario tier: each user's use per daemon tick against her expected DRF allocation.

    .venv/bin/python scripts/plot_scenarios.py [out/scenarios/results.json] [--out DIR]

One PNG per scenario (``DIR/NAME.png``, default: beside results.json): a panel per resource the
users used (cpu in cores, the scratch disk in fraction of its time, memory in MiB); a solid
line per user (her use over each tick interval, from the kernel's counters), a dashed line of
the same colour at her expected allocation in each phase, and a vertical line where a phase
began (a user started or stopped).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SCALE = {"cpu": (1.0, "cores"), "memory": (2**-20, "MiB")}
NEGLIGIBLE = {"memory": 32 * 2**20}  # a panel only for resources someone really used


def _scale(resource: str) -> tuple[float, str]:
    return SCALE.get(resource, (1.0, "fraction of the disk's time"))


def plot(scenario: dict, path: Path) -> None:
    timeline = scenario["timeline"]
    users = [u["name"] for u in scenario["users"]]
    resources = [r for r in ("cpu", *sorted(k for e in timeline for u in e["users"].values() if u["use"]
                                           for k in u["use"] if k.startswith("disk:")), "memory")
                 if any((u["use"] or {}).get(r, 0) > NEGLIGIBLE.get(r, 0) for e in timeline for u in e["users"].values())]
    resources = list(dict.fromkeys(resources))
    if not timeline or not resources:
        return
    ticks0 = timeline[0]["tick"]
    fig, axes = plt.subplots(len(resources), 1, figsize=(9, 2.6 * len(resources)), sharex=True, squeeze=False)
    colours = {name: f"C{i}" for i, name in enumerate(users)}
    for ax, resource in zip(axes[:, 0], resources):
        factor, unit = _scale(resource)
        for name in users:
            xs = [e["tick"] - ticks0 for e in timeline if name in e["users"] and e["users"][name]["use"]]
            ys = [e["users"][name]["use"][resource] * factor for e in timeline
                  if name in e["users"] and e["users"][name]["use"]]
            ax.plot(xs, ys, color=colours[name], label=name, linewidth=1.4)
        phases = scenario["phases"]
        for i, phase in enumerate(phases):
            if phase["event_tick"] is None or not phase["expectation"]:
                continue
            start = phase["event_tick"] - ticks0
            end = phases[i + 1]["event_tick"] - ticks0 if i + 1 < len(phases) and phases[i + 1]["event_tick"] \
                else timeline[-1]["tick"] - ticks0
            ax.axvline(start, color="grey", linewidth=0.8, linestyle=":")
            for name, allocation in phase["expectation"]["allocation"].items():
                ax.hlines(allocation.get(resource, 0.0) * factor, start, end, colors=colours[name], linestyles="--",
                          linewidth=1.0)
        ax.set_ylabel(f"{resource}\n({unit})")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize="small")
    axes[0, 0].set_title(f"{scenario['name']}: {scenario['title']} — {'PASS' if scenario['passed'] else 'FAIL'}",
                         fontsize="medium")
    axes[-1, 0].set_xlabel("daemon ticks (solid: use per tick; dashed: expected DRF allocation)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", default="out/scenarios/results.json", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    document = json.loads(args.results.read_text())
    out = args.out or args.results.parent
    out.mkdir(parents=True, exist_ok=True)
    for scenario in document["scenarios"]:
        path = out / f"{scenario['name']}.png"
        plot(scenario, path)
        print(path)


if __name__ == "__main__":
    main()
