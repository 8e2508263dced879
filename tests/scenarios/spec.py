"""A scenario, declared: users (uid, weight, workloads), the phases of the run, policy overrides.

A scenario runs in two parts (:mod:`tests.scenarios.runner`):

* **alone** — each user's workloads run by themselves, outside ``user.slice`` (the daemon does
  not govern them), to measure her true demand vector;
* **together** — every user has her ``user.slice/user-UID.slice`` (an idle user's stays empty)
  and the phases follow one another: in each, the users named in ``running`` have their
  workloads going. A user who appears in a phase *starts* at its beginning (her reaction is
  measured), one who disappears *stops* (the others' reaction is measured: work conservation).

Weights are the governor's: a scalar, or per kind (``cpu``, ``memory``, ``io``). Users exist
only as uids (no passwd entry), so the policy names them ``uid<UID>`` as the governor does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CPU_LOOP", "DIRECT_READER", "Phase", "Scenario", "User", "Workload", "grower"]

KINDS = ("cpu", "memory", "io")  # the weight kinds of the resources the scenarios use


@dataclass(frozen=True)
class Workload:
    """One load generator (:mod:`tests.scenarios.workloads` runs it).

    ``kind``:

    * ``"cpu"`` — a shell busy loop: one always-runnable thread;
    * ``"reader"`` — ``dd iflag=direct bs=64k`` over the scratch disk, again and again;
    * ``"grower"`` — anonymous memory touched page by page up to ``size_bytes`` at
      ``rate_bytes_per_s``, then held (sleeping).
    """

    kind: str
    size_bytes: int = 0
    rate_bytes_per_s: float = 0.0

    def __post_init__(self):
        if self.kind not in ("cpu", "reader", "grower"):
            raise ValueError(f"unknown workload kind {self.kind!r}")
        if self.kind == "grower" and (self.size_bytes <= 0 or self.rate_bytes_per_s <= 0):
            raise ValueError("a grower needs size_bytes and rate_bytes_per_s > 0")

    def label(self) -> str:
        if self.kind == "grower":
            return f"grower {self.size_bytes / 2**30:.2g} GiB at {self.rate_bytes_per_s / 2**20:g} MiB/s"
        return {"cpu": "cpu loop", "reader": "O_DIRECT reader"}[self.kind]


CPU_LOOP = Workload("cpu")
DIRECT_READER = Workload("reader")


def grower(size_bytes: int, rate_bytes_per_s: float) -> Workload:
    return Workload("grower", size_bytes, rate_bytes_per_s)


@dataclass(frozen=True)
class User:
    """A Unix user of a scenario. ``name`` labels her in tables (``"cpu"``, ``"reader"``)."""

    name: str
    uid: int
    workloads: tuple[Workload, ...]
    weight: float | Mapping[str, float] = 1.0

    @property
    def login(self) -> str:
        """Her name in the policy: she has no passwd entry, so the governor calls her ``uid<UID>``."""
        return f"uid{self.uid}"

    def weights(self) -> dict[str, float]:
        """``{kind: weight}`` for cpu, memory and io (a kind a mapping leaves out weighs 1)."""
        if isinstance(self.weight, Mapping):
            return {kind: float(self.weight.get(kind, 1.0)) for kind in KINDS}
        return {kind: float(self.weight) for kind in KINDS}

    def workload_key(self) -> tuple[Workload, ...]:
        """What her alone measurement depends on: users with the same workloads share it."""
        return tuple(sorted(self.workloads, key=lambda w: (w.kind, w.size_bytes, w.rate_bytes_per_s)))

    def describe(self) -> str:
        counts: dict[str, int] = {}
        for w in self.workloads:
            counts[w.label()] = counts.get(w.label(), 0) + 1
        return " + ".join(f"{n} × {label}" if n > 1 else label for label, n in counts.items()) or "idle"


@dataclass(frozen=True)
class Phase:
    """A stretch of the together part: the users in ``running`` have their workloads going.

    ``settle_s``: seconds from the phase's start to its measurement window (convergence, and
    the reaction is watched meanwhile); ``measure_s``: the window over which each user's use
    is compared with her expected DRF allocation. While growers run, the window waits on past
    ``settle_s`` until no user's memory grows by more than 1% of it over 2 s (growth under
    TCG follows the host's load), at most ``settle_max_s`` (default: ``settle_s`` + 15 s).
    """

    running: frozenset[str]
    settle_s: float
    measure_s: float = 8.0
    settle_max_s: float | None = None

    @property
    def longest_settle_s(self) -> float:
        return self.settle_max_s if self.settle_max_s is not None else self.settle_s + 15.0


@dataclass(frozen=True)
class Scenario:
    """Users, phases and policy overrides (merged into the base policy, key by key)."""

    name: str
    title: str
    users: tuple[User, ...]
    phases: tuple[Phase, ...]
    tolerance: float = 0.15  # relative error allowed on each contended resource (memory: 0.25)
    policy: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        names = [u.name for u in self.users]
        if len(set(names)) != len(names) or len({u.uid for u in self.users}) != len(self.users):
            raise ValueError(f"{self.name}: user names and uids must be unique")
        for phase in self.phases:
            unknown = phase.running - set(names)
            if unknown:
                raise ValueError(f"{self.name}: phase runs unknown users {sorted(unknown)}")

    def user(self, name: str) -> User:
        return next(u for u in self.users if u.name == name)

    def running_users(self) -> list[User]:
        """Users who run in at least one phase (the alone part measures them)."""
        running = frozenset().union(*(p.running for p in self.phases))
        return [u for u in self.users if u.name in running]
