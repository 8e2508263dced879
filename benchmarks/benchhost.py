"""The benchmarks' host: ``user-UID.slice`` directories of real kernel interface files
(tests/fixtures) on a tmpfs, watched by the real :class:`monitors.cgroupmonitor.CgroupMonitor`
and governed by the real :class:`governor.control.loop.Governor` with the dry-run backend, as
``drfgov run --dry-run`` would (no automatic garbage collection, as in the daemon's loop).
Between ticks every user's ``cpu.stat``, ``cpu.pressure``, ``memory.current`` and
``memory.stat`` move (the kernel's side, :meth:`BenchHost.advance`), so each tick sees new usage. tmpfs stands in for cgroupfs: the
kernel's cost of generating the files is not in the figures.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cgroups import Cgroup  # noqa: E402
from governor.config.policy import Policy  # noqa: E402
from governor.control.loop import Governor, TickReport  # noqa: E402
from governor.control.model import Capacity  # noqa: E402
from governor.enforce import DryRunBackend  # noqa: E402
from governor.service.runtime import GarbageCollection  # noqa: E402
from governor.service.state import IDLE_EVERY_S, state_document, write_state  # noqa: E402
from monitors.cgroupmonitor import CgroupMonitor  # noqa: E402
from tests.fakecgroup import KERNEL_FILES, fake_cgroup  # noqa: E402

__all__ = ["NESTED", "STAGES", "BenchHost", "StageClock", "TickCost", "cpu_s"]

#: cpu.pressure as the kernel writes it, the totals moving (``{0}``: µs).
_PSI_TEXT = ("some avg10=4.00 avg60=4.00 avg300=4.00 total={0}\n"
             "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
#: memory.stat as the captured kernel wrote it (tests/fixtures), ``anon`` and ``file`` moving
#: (``{anon}``, ``{file}``: bytes).
_MEMORY_STAT_TEXT = "".join(
    f"{line.split()[0]} {{{line.split()[0]}}}\n" if line.split()[0] in ("anon", "file") else f"{line}\n"
    for line in (KERNEL_FILES / "memory.stat").read_text().splitlines())


def cpu_s() -> float:
    """User + system CPU seconds of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class TickCost:
    """CPU seconds of ticks, the governor's and state.json's (document and write) apart, in the
    daemon's two modes by turns: while someone reads state.json it is written every tick and
    the reasons are worded as the users are planned (``Governor.word_reasons``); while nobody
    does, it is written every :data:`~governor.service.state.IDLE_EVERY_S`
    (:mod:`governor.service.statereaders`) and the reasons are worded then."""

    def __init__(self):
        self.ticks: dict[bool, list[tuple[float, float]]] = {True: [], False: []}  # read? → (governor_s, state_s)

    def add(self, read: bool, governor_s: float, state_s: float) -> None:
        self.ticks[read].append((governor_s, state_s))

    def add_to_governor(self, seconds: float) -> None:
        """Add ``seconds`` to every tick's governor time (its share of a periodic cost)."""
        self.ticks = {read: [(g + seconds, s) for g, s in ticks] for read, ticks in self.ticks.items()}

    def counted(self, skip: int = 1) -> int:
        """Ticks each median is of (per mode, after ``skip`` warm-ups)."""
        return min(len(ticks) for ticks in self.ticks.values()) - skip

    def read_s(self, skip: int = 1) -> float:
        """Median tick while state.json is read, after ``skip`` warm-ups of this mode."""
        return statistics.median(g + s for g, s in self.ticks[True][skip:])

    def unread_s(self, skip: int = 1) -> float:
        """Median tick while nobody reads it: the governor's, and state.json every
        IDLE_EVERY_S ticks (at one a second) spread over them."""
        ticks = self.ticks[False][skip:]
        return statistics.median(g for g, _ in ticks) + statistics.median(s for _, s in ticks) / IDLE_EVERY_S

    def governor_ticks(self, skip: int = 1) -> list[tuple[float, int]]:
        """The governor's CPU seconds of each tick after the first ``skip`` of each mode (state.json
        not counted: the same work every tick), with the tick's number (the modes alternate,
        the read one first)."""
        return [(g, 2 * i + (not read)) for read, mode in self.ticks.items() for i, (g, _) in enumerate(mode)
                if i >= skip]

    def slowest_tick(self, skip: int = 1) -> tuple[float, int]:
        """The governor's slowest tick, CPU seconds, and its number (:meth:`governor_ticks`): whether a tick
        fits the interval is decided by the slowest, not the median; a periodic cost shows here."""
        return max(self.governor_ticks(skip))

    def mean_s(self, skip: int = 1) -> float:
        """The governor's mean tick (:meth:`governor_ticks`): what a periodic cost adds on average."""
        return statistics.mean(g for g, _ in self.governor_ticks(skip))


class BenchHost:
    """``users`` fake slices under ``root`` (uids 1000…; weights 1–3 by uid) and their governor,
    on a host of 64 cores and 256 GiB per 1,000 users: the same host shape at any size, CPU and
    memory both contended in steady state. (A fixed 64-core, 256 GiB host made 10,000 users a
    memory host 30× over-committed, every memory.high still stepping down — a write per user
    per tick — when the ticks were measured: another scenario, not the same one grown.)"""

    def __init__(self, root: Path, users: int, active: float = 1.0):
        """``active``: the fraction of the users who compute (:meth:`advance`); the others are
        logged in and idle, their files as the kernel last wrote them."""
        self.slices = [fake_cgroup(root, f"user.slice/user-{1000 + i}.slice") for i in range(users)]
        self.active_users = round(active * users)
        self.clock_s = 0.0
        self.garbage = GarbageCollection(lambda: self.clock_s)
        self.garbage.pause()  # as the daemon's loop does (its full collection every minute: full_collection_s)
        self.monitor = CgroupMonitor(Cgroup(root / "user.slice"), lambda: self.clock_s, min_uid=1000)
        capacity = Capacity(64.0 * users / 1000, 256 * 2**30 * users // 1000)
        weights: dict[int, dict[str, float]] = {}  # cached per uid, as the daemon's PolicyWeights does
        self.governor = Governor(Policy().loop_settings(), capacity, self.monitor, DryRunBackend(),
                                 lambda: self.clock_s,
                                 lambda u: weights.get(u.uid) or weights.setdefault(
                                     u.uid, {"cpu": 1.0 + u.uid % 3, "memory": 1.0, "io": 1.0}))

    def advance(self, tick: int) -> None:
        """The kernel's side of one second for each active user, who computes and holds memory: her
        cpu.stat and cpu.pressure (the CPUs are contended) move, and her memory.current and
        with it memory.stat's ``anon`` and ``file`` by a few pages either way around a level;
        memory.events, memory.pressure and io.* stay as they are (no memory stall, no events,
        no disk)."""
        for i, path in enumerate(self.slices[:self.active_users]):
            usec = (tick + 1) * (20_000 + (i % 7) * 20_000)
            (path / "cpu.stat").write_text(f"usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0\n"
                                           f"nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
            stalled_usec = (tick + 1) * (i % 3 + 1) * 50_000
            (path / "cpu.pressure").write_text(_PSI_TEXT.format(stalled_usec))
            anon_bytes = ((i % 5 + 1) << 28) + (tick % 4) * (i % 3 + 1) * 4096
            file_bytes = (i % 4) << 24
            (path / "memory.current").write_text(f"{anon_bytes + file_bytes}\n")
            (path / "memory.stat").write_text(_MEMORY_STAT_TEXT.format(anon=anon_bytes, file=file_bytes))
        self.clock_s += 1.0

    def tick(self) -> TickReport:
        """One governor tick (the dry-run backend's record of writes cleared after it)."""
        report = self.governor.tick()
        self.governor.backend.recorded.clear()
        return report

    def timed_tick(self, cost: TickCost, state_path: Path, tick: int) -> TickReport:
        """One tick and its state.json (as the daemon writes it: each user's entry built as it
        is encoded), each timed into ``cost``; even ticks as while state.json is read, odd ones
        as while it is not (:class:`TickCost`)."""
        read = tick % 2 == 0
        self.governor.word_reasons = read
        t0 = cpu_s()
        report = self.tick()
        t1 = cpu_s()
        write_state(state_path, state_document(report, tick=tick, time_unix_s=time.time(), interval_s=1.0,
                                               mode="dry-run", backend="dry-run", policy_file="-", users_once=True))
        cost.add(read, t1 - t0, cpu_s() - t1)
        return report

    def files_kept_open(self) -> str:
        """How many counter files are kept open, and by how many users (the descriptor budget,
        :class:`cgroups.cgroup.Descriptors`), as text."""
        users = self.monitor.discovery()
        budget = self.monitor.discovery.descriptors
        return (f"{budget.held:,} counter files kept open by {sum(u.cgroup.keeps_open for u in users):,} of "
                f"{len(users):,} users (a budget of {budget.total:,}: RLIMIT_NOFILE "
                f"{resource.getrlimit(resource.RLIMIT_NOFILE)[0]:,})")

    def full_collection_s(self) -> float:
        """CPU seconds of one full garbage collection now (the daemon runs one a minute)."""
        import gc

        start = cpu_s()
        gc.collect()
        return cpu_s() - start

    def close(self) -> None:
        """Close the files the monitor keeps open (before removing ``root``)."""
        self.monitor.close()


#: The tick's stages timed by :class:`StageClock`: the governor's own steps (methods of
#: :class:`~governor.control.loop.Governor`, some per user, some per tick), her counters' read
#: (the monitor's ``sample``, nested in ``_sample``) and their rates (``usage_between``, nested
#: in ``_measure``).
STAGES = ("_sample", "sample", "_measure", "usage_between", "_evidence", "_demand_all", "_demand_rows",
          "demand_columns", "_scale_starters", "_allocate", "_memory_bounds", "_plan_rows", "_plan",
          "_enforce", "_write_first")
#: The stages that run inside another (their time is part of its).
NESTED = frozenset({"sample", "usage_between", "_evidence", "_demand_rows", "demand_columns"})


class StageClock:
    """Where a tick's time goes: each of :data:`STAGES` wrapped to add up its thread CPU time
    (clock_gettime(CLOCK_THREAD_CPUTIME_ID) around each call) while installed. The wrappers
    cost ~0.5 µs a call, so the stages add up to a little more than an unwrapped tick. One
    clock at a time: :meth:`remove` puts back what was there when it was made."""

    def __init__(self, host: BenchHost):
        import governor.control.loop as loop

        self.seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self._undo: list[tuple[object, str, object]] = []
        try:
            for name in STAGES:
                if name == "sample":
                    self._wrap(host.monitor, name)
                elif name in ("usage_between", "_memory_bounds", "demand_columns"):
                    self._wrap(loop, name)
                else:
                    self._wrap(host.governor, name)
        except AttributeError:  # a stage renamed: no wrapper left behind
            self.remove()
            raise

    def _wrap(self, owner, name: str) -> None:
        import time

        inner, seconds, clock = getattr(owner, name), self.seconds, time.thread_time

        def timed(*args, **kwargs):
            start = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[name] += clock() - start
        self._undo.append((owner, name, owner.__dict__.get(name) if hasattr(owner, "__dict__") else None))
        setattr(owner, name, timed)

    def reset(self) -> None:
        """Start every stage at zero again."""
        self.seconds.update(dict.fromkeys(STAGES, 0.0))

    def remove(self) -> None:
        """Put the unwrapped stages back."""
        for owner, name, before in reversed(self._undo):
            if before is None and not isinstance(owner, type(sys)):
                delattr(owner, name)  # an instance's wrapper over its class's method
            else:
                setattr(owner, name, before)
        self._undo.clear()
