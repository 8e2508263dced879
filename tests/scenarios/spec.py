"""A scenario, declared: users (uid, weight, workloads), the phases of the run, policy overrides.

A scenario runs in two parts (:mod:`tests.scenarios.runner`):

* **alone** — each user's workloads run by themselves, outside ``user.slice`` (the daemon does
  not govern them), to measure her true demand vector;
* **together** — every user has her ``user.slice/user-UID.slice`` (an idle user's stays empty)
  and the phases follow one another: in each, the users named in ``running`` have their
  workloads going. A user who appears in a phase *starts* at its beginning (her reaction is
  measured), one who disappears *stops* (the others' reaction is measured: work conservation).

Weights are the governor's: a scalar, or per kind (``cpu``, ``memory``, ``io``, ``net``). Users exist
only as uids (no passwd entry), so the policy names them ``uid<UID>`` as the governor does.

A user who runs a spiker has no steady demand vector (:attr:`Workload.steady`): she is not
measured alone, and the expectation and reactions are the other users'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CPU_LOOP", "DIRECT_READER", "SENDER", "Phase", "Scenario", "User", "Workload", "grower", "spiker"]

KINDS = ("cpu", "memory", "io")  # the weight kinds of the resources every user has (and net: a sender's link)


@dataclass(frozen=True)
class Workload:
    """One load generator (:mod:`tests.scenarios.workloads` runs it).

    ``kind``:

    * ``"cpu"`` — a shell busy loop: one always-runnable thread;
    * ``"reader"`` — ``dd iflag=direct bs=64k`` over the scratch disk, again and again;
    * ``"sender"`` — one TCP flow, as fast as TCP allows, over the scenario link to her port
      (:mod:`tests.scenarios.link`; at most one a user: her port is her uid);
    * ``"grower"`` — anonymous memory touched page by page up to ``size_bytes`` at
      ``rate_bytes_per_s``, then held (sleeping);
    * ``"spiker"`` — a jump in memory that one reading of the daemon sees: right after a tick
      of the daemon, ``size_bytes`` of anonymous memory mapped and populated at once, held
      through the next tick (whose reading sees it) and freed; then ``pause_ticks`` ticks
      without it (a spike every ``pause_ticks + 1`` ticks). It keeps time by the daemon's
      state.json, replaced at every tick: under TCG populating 200 MiB takes ~0.7 s, and a
      spike started at any moment would often be half made at a reading — seen growing in
      two readings, a grower's pattern, where a real host makes it in a tenth of a second.
      When a reading does catch one half made, it is freed at once: a spike is seen growing
      in one reading and gone by the next — unless populating it took longer than an interval
      (a loaded host), which the verdict tells apart (:mod:`tests.scenarios.verdict`).
    """

    kind: str
    size_bytes: int = 0
    rate_bytes_per_s: float = 0.0
    pause_ticks: int = 0

    def __post_init__(self):
        if self.kind not in ("cpu", "reader", "sender", "grower", "spiker"):
            raise ValueError(f"unknown workload kind {self.kind!r}")
        if self.kind == "grower" and (self.size_bytes <= 0 or self.rate_bytes_per_s <= 0):
            raise ValueError("a grower needs size_bytes and rate_bytes_per_s > 0")
        if self.kind == "spiker" and (self.size_bytes <= 0 or self.pause_ticks < 1):
            raise ValueError("a spiker needs size_bytes > 0 and pause_ticks ≥ 1")

    @property
    def armed(self) -> bool:
        """Started before its phase's event and released at it (:mod:`tests.scenarios.workloads`):
        a Python workload, whose start over 9p takes seconds."""
        return self.kind in ("grower", "spiker")

    @property
    def steady(self) -> bool:
        """Whether her use of it is a demand vector DRF's expectation holds for. A spiker's is
        not: what she holds is all or nothing from one tick to the next, her mean over a window
        is her duty cycle, and one unit of either is no demand she would hold alone."""
        return self.kind != "spiker"

    def label(self) -> str:
        if self.kind == "grower":
            return f"grower {self.size_bytes / 2**30:.2g} GiB at {self.rate_bytes_per_s / 2**20:g} MiB/s"
        if self.kind == "spiker":
            return f"spiker {self.size_bytes / 2**20:g} MiB for one tick in {self.pause_ticks + 1}"
        return {"cpu": "cpu loop", "reader": "O_DIRECT reader", "sender": "TCP sender"}[self.kind]


CPU_LOOP = Workload("cpu")
DIRECT_READER = Workload("reader")
SENDER = Workload("sender")


def grower(size_bytes: int, rate_bytes_per_s: float) -> Workload:
    return Workload("grower", size_bytes, rate_bytes_per_s)


def spiker(size_bytes: int, pause_ticks: int) -> Workload:
    return Workload("spiker", size_bytes, pause_ticks=pause_ticks)


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
        """``{kind: weight}`` for cpu, memory, io, and net when she sends (a kind a mapping leaves
        out weighs 1)."""
        kinds = (*KINDS, "net") if self.sends else KINDS
        if isinstance(self.weight, Mapping):
            return {kind: float(self.weight.get(kind, 1.0)) for kind in kinds}
        return {kind: float(self.weight) for kind in kinds}

    @property
    def steady(self) -> bool:
        """Whether she has a demand vector to measure alone and expect DRF of (:attr:`Workload.steady`)."""
        return all(w.steady for w in self.workloads)

    @property
    def sends(self) -> bool:
        """Whether she has a flow on the scenario link (:mod:`tests.scenarios.link`)."""
        return any(w.kind == "sender" for w in self.workloads)

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
    """Users, phases and policy overrides (merged into the base policy, key by key).

    ``never_capped``: users whose slice must have ``memory.high`` and ``memory.max`` at
    ``max`` after every tick of every phase (read right after each tick): nothing the scenario
    does gives the governor cause to hold them back on memory (but growth seen in two readings
    in a row, which it projects by design: :func:`tests.scenarios.verdict.memory_capped`).
    """

    name: str
    title: str
    users: tuple[User, ...]
    phases: tuple[Phase, ...]
    tolerance: float = 0.15  # relative error allowed on each contended resource (memory: 0.25)
    policy: Mapping[str, object] = field(default_factory=dict)
    never_capped: frozenset[str] = frozenset()

    def __post_init__(self):
        names = [u.name for u in self.users]
        if len(set(names)) != len(names) or len({u.uid for u in self.users}) != len(self.users):
            raise ValueError(f"{self.name}: user names and uids must be unique")
        if any(sum(w.kind == "sender" for w in u.workloads) > 1 for u in self.users):
            raise ValueError(f"{self.name}: one sender a user (her flow's port is her uid)")
        if self.never_capped - set(names):
            raise ValueError(f"{self.name}: never_capped names unknown users {sorted(self.never_capped - set(names))}")
        for phase in self.phases:
            unknown = phase.running - set(names)
            if unknown:
                raise ValueError(f"{self.name}: phase runs unknown users {sorted(unknown)}")

    def user(self, name: str) -> User:
        return next(u for u in self.users if u.name == name)

    def senders(self) -> dict[str, int]:
        """name → uid of the users who have a flow on the scenario link."""
        return {u.name: u.uid for u in self.users if u.sends}

    def running_users(self) -> list[User]:
        """Users who run in at least one phase (the alone part measures the steady ones)."""
        running = frozenset().union(*(p.running for p in self.phases))
        return [u for u in self.users if u.name in running]
