"""How each scheduler (a `drfgov simulate` policy) orders users and fits tasks onto machines, one task at a time.

Every scheduling step gives the next task to the user the policy ranks first among those
with pending tasks: on the machine where a task of hers just finished, if it fits there (as
Mesos offers freed resources to the user it ranks first), else on the first machine in order
where the policy considers it fits — machine by machine, as in the paper's Theorem 7. A user
whose task fits nowhere waits until a task finishes on a machine where it then fits.

============  =====================================================  ============================
policy        next user: the lowest …                                fits when the machine has …
============  =====================================================  ============================
drf           dominant share of her running tasks ÷ weight          room in every resource
asset         sum of her resource shares ÷ weight                    room in every resource
ceei          running tasks ÷ her CEEI (Nash bargaining) target     room in every resource
cpu-fair      CPU share ÷ weight                                     room in CPU (memory may be overcommitted)
slots:K       running tasks ÷ weight                                 a free slot of K (resources unchecked)
============  =====================================================  ============================

The CEEI target is the fluid Nash bargaining allocation (:func:`governor.fairness.alternatives.ceei`) of
the cluster's total capacity among the users with work, each capped at her remaining tasks;
it is recomputed when that set or their demand vectors change.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SCHEDULERS", "Scheduler", "parse_scheduler"]

SCHEDULERS = ("drf", "asset", "ceei", "cpu-fair", "slots:K")


@dataclass(frozen=True)
class Scheduler:
    """A parsed scheduler name: ``kind`` drf|asset|ceei|cpu-fair|slots, and ``slots`` per machine."""

    kind: str
    slots: int = 0

    @property
    def name(self) -> str:
        return f"slots:{self.slots}" if self.kind == "slots" else self.kind

    def fit_mask(self, resources: list[str]) -> np.ndarray | None:
        """Which resources the fit check looks at (None: slots only)."""
        if self.kind == "slots":
            return None
        if self.kind == "cpu-fair":
            return np.array([r == "cpu" for r in resources])
        return np.ones(len(resources), dtype=bool)


def parse_scheduler(name: str, resources: list[str]) -> Scheduler:
    """``drf``, ``asset``, ``ceei``, ``cpu-fair`` or ``slots:K`` (K ≥ 1 slots per machine).

    Raises:
        ValueError: anything else, or cpu-fair without a ``cpu`` resource.
    """
    if name.startswith("slots:"):
        count = name.split(":", 1)[1]
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"policy {name!r}: expected slots:K with K a whole number ≥ 1")
        return Scheduler("slots", int(count))
    if name not in ("drf", "asset", "ceei", "cpu-fair"):
        raise ValueError(f"unknown policy {name!r}; expected one of: {', '.join(SCHEDULERS)}")
    if name == "cpu-fair" and "cpu" not in resources:
        raise ValueError(f"cpu-fair needs a resource named cpu (the trace has: {', '.join(resources)})")
    return Scheduler(name)
