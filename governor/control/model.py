"""The types the control loop shares with its adapters and its views (pure).

* :class:`Capacity` — what the users share; :class:`LoopSettings` — the policy as the loop
  needs it (built by the service from the policy file, so this room never reads config);
* :class:`Monitor` and :class:`Network` — the measurement and shaping the loop is given;
* :class:`UserReport` and :class:`TickReport` — one tick's outcome, for state.json, history
  and ``drfgov shares``/``explain``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from governor.control.resources import CPU, MEMORY, Resource
from governor.control.demand import Evidence
from governor.enforce.model import Knob, LimitSet
from governor.shaping.model import ClassRate, Link, NetSample
from monitors.model import CgroupSample, GovernedUser, HostSample

__all__ = ["Capacity", "LoopSettings", "Monitor", "Network", "TickReport", "UserReport"]


@dataclass(frozen=True)
class Capacity:
    """The most the users may share: ``cpu_cores`` (the CPUs less the policy's reserve),
    ``memory_bytes`` (MemTotal less the reserve), per disk ``"MAJ:MIN"`` its (read, write)
    bytes/s, and per shaped link (``net:IF:tx``/``net:IF:rx``) its bits/s.

    Each tick the loop measures how much of the CPUs and memory is really left for the users
    (see :mod:`governor.control.loop`); for that it needs ``host_cpu_cores`` (every CPU the
    users' slice may run on; default ``cpu_cores``) and ``memory_keep_free_bytes``, the memory
    the kernel should always have available (the reserve, or a floor of its own).
    """

    cpu_cores: float
    memory_bytes: float
    disks: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    links: Mapping[Resource, float] = field(default_factory=dict)
    host_cpu_cores: float | None = None
    memory_keep_free_bytes: int = 0

    def __post_init__(self) -> None:
        if self.host_cpu_cores is None:
            object.__setattr__(self, "host_cpu_cores", self.cpu_cores)

    def disk_resources(self) -> dict[str, Resource]:
        """``MAJ:MIN`` → its resource id, for every governed disk."""
        return {device: Resource.disk(device) for device in self.disks}

    def vector(self) -> dict[Resource, float]:
        """Resource → capacity (floats); a disk is one resource measured in fraction of its time (1.0)."""
        out = {CPU: float(self.cpu_cores), MEMORY: float(self.memory_bytes)}
        out.update({resource: 1.0 for resource in self.disk_resources().values()})
        out.update((resource, float(bits_per_s)) for resource, bits_per_s in self.links.items())
        return out


@dataclass(frozen=True)
class LoopSettings:
    """What the loop takes from the policy: which resource kinds it enforces (``cpu``,
    ``memory``, ``io``, ``net``), the hysteresis band (a fraction), and the memory safety
    margins in bytes (``memory.max`` stays ``margin_bytes`` above use; ``memory.high`` moves
    down at most ``high_step_bytes`` a tick)."""

    enforce: frozenset[str] = frozenset({"cpu", "memory", "io"})
    hysteresis: float = 0.05
    margin_bytes: int = 256 * 2**20
    high_step_bytes: int = 256 * 2**20


class Monitor(Protocol):
    """What the loop needs to see: governed users and one sample of a user's counters.

    ``exempt`` (uids or login names never listed by :meth:`users`) may be replaced on reload.
    Errors: :meth:`sample` raises :class:`cgroups.CgroupError` (CgroupGone when her slice
    vanished) and nothing else.
    """

    exempt: Collection[int | str]

    def users(self) -> list[GovernedUser]: ...

    def host_sample(self) -> HostSample | None:
        """The host's CPU busy time and available memory now (None: not measurable here)."""
        ...

    def close(self) -> None:
        """Release what it keeps open (files of the users seen); it stays usable."""
        ...

    def sample(self, user: GovernedUser, memory_detail: bool = True, io_detail: bool = True,
               cpu_detail: bool = False, kept: CgroupSample | None = None) -> CgroupSample:
        """Her counters now. ``memory_detail``: memory.events and memory PSI are wanted (she
        has a memory.high in force); ``io_detail``: io.stat and io PSI are wanted (disks are
        governed); ``cpu_detail``: her threads' scheduler accounting is wanted (her CPU quota
        throttled her; :mod:`monitors.schedstat`). A monitor may skip what is not wanted, to save reads.
        ``kept``: her last sample, whose slow-moving readings a monitor may take again while
        her fast ones say they still hold (:func:`monitors.sample.sample_cgroup`: memory.stat)."""
        ...

    def slice_id(self, user: GovernedUser) -> int:
        """Which slice of hers is there now (:attr:`GovernedUser.slice_id`: its directory's inode;
        a monitor without slices says ``user.slice_id``). Raises :class:`cgroups.CgroupGone`
        when none is."""
        ...

    def unmoved(self, user: GovernedUser, kept: CgroupSample, io_detail: bool) -> bool:
        """Whether her counters that move with any work of hers — CPU time, memory charged, with
        ``io_detail`` disk bytes — are still ``kept``'s (:func:`monitors.sample.unmoved`). True
        only when sure; a monitor that cannot tell cheaply says False. Errors as :meth:`sample`."""
        ...


class Network(Protocol):
    """Per-user shaping (:class:`governor.shaping.shaper.Shaper`): the links it shapes, their
    counters per uid, and the classes to have. It raises ShapingError when the kernel refuses."""

    links: Mapping[Resource, Link]
    in_force: Mapping[Resource, Mapping[int, ClassRate]]
    #: links not installed now, and why (their interface away): tried again at each sample
    missing: Mapping[Resource, str]

    def sample(self, uids: Collection[int]) -> NetSample: ...

    def apply(self, wanted: Mapping[Resource, Mapping[int, ClassRate]]) -> list[str]: ...


class _NoneYet(dict):
    """An empty dict that refuses to change (TypeError) and hashes, so a dataclass takes it as a
    default: shared by every report, it must never hold anything."""

    __slots__ = ()

    def __hash__(self) -> int:
        return 0

    def _refuse(self, *args, **kwargs):
        raise TypeError("a report's empty default is shared and read-only: give the field a dict of its own")

    __setitem__ = __delitem__ = __ior__ = update = setdefault = pop = popitem = clear = _refuse


#: What a :class:`UserReport`'s mapping fields hold until the loop fills them: one shared,
#: read-only empty mapping (writing into it is a TypeError, never a change to every report).
NONE_YET: Mapping = _NoneYet()


@dataclass(slots=True)
class UserReport:
    """One user's tick: what she used and demanded, what DRF gave her, what was written and why.

    Amounts are per resource in its unit (:mod:`governor.control.resources`); ``weight`` maps a
    weight kind (cpu, memory, io, net) to her weight. The loop gives each field that it fills a
    container of its own; until then a field is the one read-only empty :data:`NONE_YET` (or an
    empty tuple): a report is made per user per tick, and ten empty containers made with it,
    most of them replaced within the tick, cost 1.2 µs and ~0.6 KiB a user (issue 16).
    """

    uid: int
    name: str
    weight: Mapping[str, float]  # as ``weight_of`` gave it (the policy's cache): read, never changed
    usage: Mapping[Resource, float] = NONE_YET
    demand: Mapping[Resource, float] = NONE_YET
    allocation: Mapping[Resource, float] = NONE_YET
    dominant_resource: Resource | None = None
    dominant_share: float = 0.0
    weighted_share: float = 0.0
    limits: LimitSet | None = None  # in force: what the kernel holds after this tick's writes
    planned: LimitSet | None = None  # this tick's plan (within the hysteresis band it may differ)
    reasons: Mapping[Knob, str] = NONE_YET  # why each knob was planned as it was (worded when read)
    classes: Mapping[Resource, ClassRate] = NONE_YET  # per link: her HTB class in force
    held: Sequence[Resource] = ()  # where the kernel held her back this tick
    evidence: Mapping[Resource, Evidence] = NONE_YET  # what the demand estimate read this tick
    stall_some_fraction: Mapping[str, float] = NONE_YET  # PSI some, share of the interval
    stall_full_fraction: Mapping[str, float] = NONE_YET  # PSI full, share of the interval
    throttled_cores: float | None = None  # cpu.stat throttled_usec per second
    # memory not contended: the memory.high that holds her growth not yet confirmed, bytes
    # (None: nothing held; governor.control.loop._growth_guards)
    memory_guard_bytes: float | None = None
    written: Sequence[Knob] = ()
    error: str | None = None


@dataclass
class TickReport:
    """One tick: per uid her report, the capacity vector, the saturated (contended) resources."""

    time_s: float
    users: dict[int, UserReport]
    capacity: dict[Resource, float]
    saturated: list[Resource]
    errors: int = 0
    network_error: str | None = None  # shaping failed this tick (users' cgroup limits still applied)
    notes: list[str] = field(default_factory=list)  # what went wrong that is no user's own, for the caller to log
