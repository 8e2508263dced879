"""Still users (issue 16): a user nothing of whose moved over her last full reading, and whose
CPU time and memory (and disk bytes) have not moved since, is measured as then without her
other files being read — and governed as if they had been. The oracle: the same loop made to
read every user in full, over a copy of the same files, report for report and write for write.
The one difference admitted: what only an unread file shows is seen at her next full reading."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cgroups import Cgroup
from governor.config.policy import Policy
from governor.control.loop import STILL_BLOCK_UIDS, STILL_KEPT_S, Governor, full_reading_due_s
from governor.control.model import Capacity
from governor.enforce import DryRunBackend
from monitors.cgroupmonitor import CgroupMonitor
from tests.fakecgroup import fake_cgroup

PSI = "some avg10=0.00 avg60=0.00 avg300=0.00 total={}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total={}\n"
#: What a report holds that the two loops must agree on.
FIELDS = ("usage", "demand", "allocation", "dominant_share", "weighted_share", "held", "evidence",
          "stall_some_fraction", "stall_full_fraction", "throttled_cores", "planned", "limits", "written", "error")
#: 2 cores and 800 MiB for the users: both contended, so every knob is written and memory.high's
#: details (memory.events, memory.pressure) are read.
CONTENDED = Capacity(2.0, 800 * 2**20)
DISK = "254:0"  # the captured io.stat's disk


class ReadsAll(CgroupMonitor):
    """The oracle's monitor: never says a user is unmoved, so every user is read in full."""

    def unmoved(self, user, kept, io_detail):
        return False


class Twin:
    """One governor over a fake cgroupfs under ``root`` (``uids``' slices, the captured files with
    ``overrides``), read by ``monitor_class``; a fake /proc whose host stands still."""

    def __init__(self, root, monitor_class, now, uids, capacity, **overrides):
        self.slices = {uid: fake_cgroup(root, f"user.slice/user-{uid}.slice", **overrides) for uid in uids}
        self.procfs = root / "proc"
        self.procfs.mkdir()
        (self.procfs / "stat").write_text("cpu  100 0 100 10000 0 0 0 0 0 0\n")
        (self.procfs / "meminfo").write_text("MemTotal: 16000000 kB\nMemAvailable: 8000000 kB\n")
        self.monitor = monitor_class(Cgroup(root / "user.slice"), lambda: now[0], min_uid=1000,
                                     procfs=str(self.procfs))
        self.governor = Governor(Policy().loop_settings(), capacity, self.monitor, DryRunBackend(), lambda: now[0],
                                 lambda u: {"cpu": 1.0 + u.uid % 2, "memory": 1.0, "io": 1.0})

    def write(self, uid, name, text):
        (self.slices[uid] / name).write_text(text)


class Run:
    """The fast loop and the oracle over the same kernel side, tick by tick: ``kernel(run, tick)``
    writes both trees (:meth:`both`) before each tick; :attr:`diffs` lists (tick, uid, field,
    fast's, oracle's) where they differ, :attr:`dormant` each user's ticks not read in full."""

    def __init__(self, tmp_path, uids, capacity=CONTENDED, **overrides):
        self.now, self.uids = [0.0], uids
        self.fast = Twin(tmp_path / "fast", CgroupMonitor, self.now, uids, capacity, **overrides)
        self.oracle = Twin(tmp_path / "oracle", ReadsAll, self.now, uids, capacity, **overrides)
        self.diffs, self.dormant = [], {uid: [] for uid in uids}

    def both(self, uid, name, text):
        for twin in (self.fast, self.oracle):
            twin.write(uid, name, text)

    def ticks(self, kernel, count, step_s=lambda tick: 1.0, between=None):
        try:
            for tick in range(count):
                kernel(self, tick)
                if between is not None:
                    between(self, tick)
                self.now[0] += step_s(tick)
                got, want = self.fast.governor.tick(), self.oracle.governor.tick()
                for uid in self.uids:
                    a, b = got.users[uid], want.users[uid]
                    self.diffs += [(tick, uid, f, getattr(a, f), getattr(b, f)) for f in FIELDS
                                   if getattr(a, f) != getattr(b, f)]
                    state = self.fast.governor.state.get(uid)
                    if state is not None and state.still is not None and state.still.time_s < self.now[0]:
                        self.dormant[uid].append(tick)  # her still reading is older than this tick
                if (got.capacity, got.saturated) != (want.capacity, want.saturated):
                    self.diffs.append((tick, None, "capacity", got.capacity, want.capacity))
                if self.fast.governor.backend.recorded != self.oracle.governor.backend.recorded:
                    self.diffs.append((tick, None, "writes", None, None))
        finally:
            self.fast.monitor.close()
            self.oracle.monitor.close()
        return self


def next_full_tick(uid, still_clock_s):
    """The tick of :meth:`Run.ticks` (tick ``k`` runs at clock ``k + 1``) at which a user whose
    still reading was at ``still_clock_s`` is read in full again (:func:`full_reading_due_s`)."""
    return math.ceil(full_reading_due_s(uid, still_clock_s)) - 1


def computes(run, uid, tick, cores=0.9):
    run.both(uid, "cpu.stat", f"usage_usec {round(tick * cores * 1e6)}\nuser_usec 0\nsystem_usec 0\n")


def four_users(run, tick):
    """1000 computes throughout; 1001 is idle throughout; 1002 computes in ticks 8–12 and 25–26
    only; 1003 is idle but her memory grows once (tick 6: a socket's buffers, no CPU of hers)."""
    computes(run, 1000, tick)
    run.both(1000, "cpu.pressure", PSI.format(tick * 300_000, tick * 100_000))
    busy_ticks = [t for t in range(tick + 1) if 8 <= t <= 12 or 25 <= t <= 26]
    computes(run, 1002, len(busy_ticks), 1.2)
    if tick == 6:
        run.both(1003, "memory.current", f"{700 << 20}\n")


def test_still_users_are_governed_as_if_every_user_were_read(tmp_path):
    run = Run(tmp_path, (1000, 1001, 1002, 1003)).ticks(four_users, 40)
    assert run.diffs == []
    # the still ones were measured without being read in full, most ticks; the busy one never
    assert run.dormant[1000] == []
    assert len(run.dormant[1001]) >= 30 and len(run.dormant[1002]) >= 20 and len(run.dormant[1003]) >= 20, run.dormant
    # what they keep meanwhile is one copy of each mapping for all of them (RSS: issue 16)
    kept = [run.fast.governor.state[uid].still for uid in (1001, 1003)]
    assert kept[0].evidence is kept[1].evidence and kept[0].usage.memory_events is kept[1].usage.memory_events
    assert kept[0].usage.stall_some_fraction is kept[1].usage.stall_some_fraction


def test_with_disks_governed_her_writeback_wakes_her(tmp_path):
    """Disks governed: io.stat is read each tick she is still (the flusher writes her dirty pages
    back without a µs of her CPU: disk time DRF must see), and her io.pressure with it when read."""
    def kernel(run, tick):
        computes(run, 1000, tick)
        written_bytes = 50_000_000 * ((tick >= 6) + (tick >= 15))
        run.both(1001, "io.stat", f"{DISK} rbytes=1048576 wbytes={written_bytes} rios=16 wios=40 dbytes=0 dios=0\n")
        if tick in (15, 16):
            run.both(1001, "io.pressure", PSI.format(900_000 * (tick - 14), 0))

    run = Run(tmp_path, (1000, 1001), Capacity(2.0, 800 * 2**20, disks={DISK: (100e6, 100e6)})).ticks(kernel, 24)
    assert run.diffs == []
    assert 6 not in run.dormant[1001] and 15 not in run.dormant[1001] and len(run.dormant[1001]) >= 12, run.dormant


def test_memory_growing_into_her_limit_and_stalling_wakes_her(tmp_path):
    """Memory contended: 1001 grows once with a stall and memory.high events (read, as her
    memory.current moved), stalls on a tick after (read: not still since), then sits."""
    def kernel(run, tick):
        computes(run, 1000, tick)
        if tick == 6:
            run.both(1001, "memory.current", f"{300 << 20}\n")
            run.both(1001, "memory.events", "low 0\nhigh 7\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
            run.both(1001, "memory.pressure", PSI.format(500_000, 200_000))
        if tick == 7:
            run.both(1001, "memory.pressure", PSI.format(900_000, 400_000))

    run = Run(tmp_path, (1000, 1001), Capacity(2.0, 400 * 2**20)).ticks(kernel, 24)
    assert run.diffs == []
    assert 6 not in run.dormant[1001] and 7 not in run.dormant[1001] and len(run.dormant[1001]) >= 12, run.dormant


def test_a_still_user_whose_threads_a_full_reading_would_read_is_read_in_full(tmp_path):
    """Her quota throttled her, then she sat still before the governor's own quota was written:
    while her threads are wanted (within THREADS_KEPT_TICKS of the throttling, a quota in force)
    she is read in full, so that when she wakes her threads have a reading to be measured from
    (the auditor's case: read from cpu.stat alone she wanted 0.2 core, not her 1.0)."""
    def kernel(run, tick):
        hog = max(0, tick - 3) * 2_000_000
        run.both(1000, "cpu.stat", f"usage_usec {hog}\nuser_usec {hog}\nsystem_usec 0\n"
                                   "nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n")
        if tick <= 3:
            used, periods, throttled, throttled_usec = tick * 300_000, tick * 10, 3 * (tick == 3), 400_000 * (tick == 3)
        elif tick < 6:
            used, periods, throttled, throttled_usec = 900_000, 30, 3, 400_000
        else:
            woke = tick - 5
            used, periods, throttled, throttled_usec = 900_000 + woke * 200_000, 30 + woke * 10, 3 + woke * 8, \
                400_000 + woke * 800_000
        run.both(1001, "cpu.stat", f"usage_usec {used}\nuser_usec {used}\nsystem_usec 0\nnr_periods {periods}\n"
                                   f"nr_throttled {throttled}\nthrottled_usec {throttled_usec}\n")
        for twin in (run.fast, run.oracle):  # one CPU-bound thread of hers
            (twin.slices[1001] / "cgroup.threads").write_text("4242\n")
            (twin.procfs / "4242").mkdir(exist_ok=True)
            (twin.procfs / "4242" / "schedstat").write_text(f"{used * 1000} {int((tick + 1) * 1e9) - used * 1000} 5\n")
            (twin.procfs / "4242" / "status").write_text("Name:\tloop\nvoluntary_ctxt_switches:\t0\n"
                                                         "nonvoluntary_ctxt_switches:\t9\n")

    run = Run(tmp_path, (1000, 1001), Capacity(2.0, 100 * 2**20), cpu_max="max 100000", memory_high="max")
    assert run.ticks(kernel, 10).diffs == []


def test_ticks_at_the_same_clock_reading_measure_no_still_interval(tmp_path):
    """Two ticks at one clock reading: no interval, no rates — not a still interval to carry."""
    run = Run(tmp_path, (1000, 1001)).ticks(lambda run, tick: computes(run, 1000, tick), 12,
                                             step_s=lambda tick: 0.0 if tick == 3 else 1.0)
    assert run.diffs == [] and len(run.dormant[1001]) >= 6


def test_a_reload_that_changes_the_disks_reads_still_users_in_full(tmp_path):
    """Her still measure has the old disks' evidence: a reload that adds a governed disk, or
    takes one away, forgets it."""
    def reload(run, tick):
        if tick in (6, 12):
            disks = {DISK: (100e6, 100e6)} if tick == 6 else {}
            for twin in (run.fast, run.oracle):
                g = twin.governor
                g.reconfigure(g.settings, Capacity(2.0, 800 * 2**20, disks=disks), g.monitor, g.backend, g.weight_of,
                              g.network)

    run = Run(tmp_path, (1000, 1001)).ticks(lambda run, tick: computes(run, 1000, tick), 18, between=reload)
    assert run.diffs == [], run.diffs[:3]
    assert {6, 12}.isdisjoint(run.dormant[1001]) and {8, 14} <= set(run.dormant[1001]), run.dormant


def test_a_still_user_reads_two_files_a_tick_and_all_of_them_every_few_seconds(tmp_path, monkeypatch):
    """What is saved: her cpu.stat and memory.current each tick; all her files at first, when
    she is first found still, and again when her full reading is due (within STILL_KEPT_S)."""
    run = Run(tmp_path, (1000, 1001))
    reads: list[str] = []
    read_bytes = Cgroup._read_bytes

    def counted(self, name):
        if self.path.name == "user-1001.slice" and self.path.parent.parent.name == "fast":
            reads.append(name)
        return read_bytes(self, name)

    monkeypatch.setattr(Cgroup, "_read_bytes", counted)
    per_tick = []

    def kernel(run, tick):
        computes(run, 1000, tick)
        per_tick.append(sorted(set(reads) - {"cpu.max", "memory.high", "memory.low", "memory.max", "io.max",
                                             "cpu.weight"}))
        reads.clear()

    run.ticks(kernel, int(STILL_KEPT_S) + 7)
    per_tick = per_tick[1:]  # each tick's reads, as the next tick's kernel side found them
    fast = ["cpu.stat", "memory.current"]
    full = ["cpu.pressure", "cpu.stat", "memory.current", "memory.events", "memory.pressure", "memory.stat"]
    kept_stat = [f for f in full if f != "memory.stat"]
    # in full (memory.stat too: her admin's memory.high is in force): first sight, her first
    # interval (still), then twice more as memory.high's details start to be read (tick 1 wrote
    # the governor's) — a still measure stands only for the files it read — the second time
    # with the memory.stat of the first (her memory.events did not move: nothing was reclaimed
    # at her limit); then the two files a tick, and all of them again when due: tick 3's still
    # reading was at clock 4, memory.stat's over MEMORY_STAT_MAX_AGE_S before
    due = next_full_tick(1001, 4.0)
    assert 4 < due <= 3 + STILL_KEPT_S
    assert per_tick[2:4] == [full, kept_stat], per_tick
    assert per_tick[4:due] == [fast] * (due - 4), per_tick
    assert per_tick[due] == full, per_tick
    assert per_tick[due + 1] == fast, per_tick
    assert run.diffs == []


def test_users_found_still_together_are_read_in_full_a_few_a_tick(tmp_path, monkeypatch):
    """Forty users idle from the start, each of another block of uids, are found still in one
    tick; their full readings then come a few a tick (each block on its own grid:
    full_reading_due_s), not all forty in one tick every STILL_KEPT_S — and each of them at
    least once in every STILL_KEPT_S."""
    uids = tuple(2048 + STILL_BLOCK_UIDS * k for k in range(40))
    run = Run(tmp_path, uids)
    full: dict[int, set[int]] = {}  # tick → the users read in full (their cpu.pressure is read only then)
    read_bytes, tick_now = Cgroup._read_bytes, [0]

    def counted(self, name):
        if name == "cpu.pressure" and self.path.parent.parent.name == "fast":
            full.setdefault(tick_now[0], set()).add(int(self.path.name.removeprefix("user-").removesuffix(".slice")))
        return read_bytes(self, name)

    monkeypatch.setattr(Cgroup, "_read_bytes", counted)
    run.ticks(lambda run, tick: tick_now.__setitem__(0, tick), 36)
    assert run.diffs == []
    steady = [len(full.get(tick, ())) for tick in range(6, 36)]
    assert max(steady) <= 10 and sum(steady) >= 3 * len(uids), steady  # ~4 a tick, ≥ 1 each a grid period
    for uid in uids:
        read_at = [tick for tick in range(36) if uid in full.get(tick, ())]
        assert all(b - a <= STILL_KEPT_S for a, b in zip(read_at, read_at[1:])), (uid, read_at)
        assert 35 - read_at[-1] < STILL_KEPT_S, (uid, read_at)


def test_a_reading_on_a_grid_line_is_due_at_the_next_one():
    """Due strictly after the still reading: uid 0's grid has its lines at multiples of
    STILL_KEPT_S, and a still reading on a line is due at the next, not at once."""
    assert full_reading_due_s(0, 0.0) == STILL_KEPT_S and full_reading_due_s(0, 2 * STILL_KEPT_S) == 3 * STILL_KEPT_S
    assert full_reading_due_s(0, 2 * STILL_KEPT_S - 0.5) == 2 * STILL_KEPT_S
    due = full_reading_due_s(4242, 5.0)
    assert full_reading_due_s(4242, due) == pytest.approx(due + STILL_KEPT_S)


def test_a_clock_gone_back_reads_still_users_in_full(tmp_path, monkeypatch):
    """A clock that went back (before her still reading) measures nothing as still: she is read
    in full at once, and governed as by the loop that reads everyone."""
    run = Run(tmp_path, (1000, 1001))
    full = []
    read_bytes, tick_now = Cgroup._read_bytes, [0]

    def counted(self, name):
        if name == "cpu.pressure" and self.path.parent.parent.name == "fast":
            full.append((tick_now[0], self.path.name))
        return read_bytes(self, name)

    monkeypatch.setattr(Cgroup, "_read_bytes", counted)
    run.ticks(lambda run, tick: (computes(run, 1000, tick), tick_now.__setitem__(0, tick)), 10,
              step_s=lambda tick: -2.5 if tick == 6 else 1.0)
    assert (5, "user-1001.slice") not in full and (6, "user-1001.slice") in full, full  # still, then back
    assert run.diffs == []


@given(st.integers(0, 2**32 - 1), st.floats(0.0, 1e8))
def test_a_full_reading_is_due_once_a_grid_period_within_still_kept_s(uid, time_s):
    """Due after the still reading and at most STILL_KEPT_S after it; the same due time for any
    still reading before it (one full reading per line of her grid); the same for her block.
    Monotonic seconds up to three years, to within float rounding there (a due time rounded
    down to the reading's time reads her in full at once: the safe side)."""
    slack_s = 1e-6  # an ulp at 1e8 s is 1.5e-8 s
    due = full_reading_due_s(uid, time_s)
    assert time_s - slack_s < due <= time_s + STILL_KEPT_S + slack_s
    block = uid - uid % STILL_BLOCK_UIDS  # her block's users share her grid
    assert full_reading_due_s(block, time_s) == full_reading_due_s(block + STILL_BLOCK_UIDS - 1, time_s) == due
    if due - time_s > 2 * slack_s:
        assert full_reading_due_s(uid, (time_s + due) / 2) == pytest.approx(due, abs=slack_s)


def test_what_moves_unseen_while_she_is_still_is_seen_at_her_next_full_reading(tmp_path):
    """A stall with no CPU time and no memory charged (a task of hers blocked for seconds in
    reclaim's I/O) shows in memory.pressure alone, which a still user's ticks do not read: it
    is seen at her next full reading, within STILL_KEPT_S, as if in the interval just before
    (her reading of the tick before stands for all her files, so that a user who wakes has her
    rates over the interval she woke in). The oracle saw it at once: the one difference."""
    def kernel(run, tick):
        computes(run, 1000, tick)
        if tick == 6:  # still since tick 4: 4.0 s of memory stall, no CPU, no memory charged
            run.both(1001, "memory.pressure", PSI.format(4_000_000, 4_000_000))

    run = Run(tmp_path, (1000, 1001)).ticks(kernel, int(STILL_KEPT_S) + 4)
    seen = {(tick, field): (fast, oracle) for tick, uid, field, fast, oracle in run.diffs if uid == 1001}
    due = next_full_tick(1001, 4.0)  # her still reading: tick 3's, at clock 4
    assert 6 < due
    assert seen[(6, "stall_some_fraction")] == ({"cpu": 0.0, "memory": 0.0}, {"cpu": 0.0, "memory": 1.0})
    assert seen[(due, "stall_some_fraction")] == ({"cpu": 0.0, "memory": 1.0}, {"cpu": 0.0, "memory": 0.0})
    assert {tick for tick, _ in seen} == {6, due}  # and nothing else differs


@pytest.mark.parametrize("moved", ["cpu.stat", "memory.current", "io.stat"])
def test_unmoved_reads_the_counters_that_move_with_any_work_of_hers(tmp_path, moved):
    """monitors.sample.unmoved: cpu.stat and memory.current, and io.stat with io_detail; its
    errors are the sampler's (a gone slice raises CgroupGone)."""
    from cgroups import CgroupGone
    from monitors.sample import sample_cgroup, unmoved

    path = fake_cgroup(tmp_path)
    cg = Cgroup(path, keep_open=True)
    kept = sample_cgroup(cg, lambda: 1.0)
    assert unmoved(cg, kept, io_detail=True) and unmoved(cg, kept, io_detail=False)
    (path / "cpu.pressure").write_text(PSI.format(9, 9))  # not one of them
    assert unmoved(cg, kept, io_detail=True)
    text = {"cpu.stat": "usage_usec 1\nuser_usec 1\nsystem_usec 0\n", "memory.current": "4096\n",
            "io.stat": f"{DISK} rbytes=1 wbytes=1 rios=1 wios=1 dbytes=0 dios=0\n"}[moved]
    (path / moved).write_text(text)
    assert not unmoved(cg, kept, io_detail=True)
    assert unmoved(cg, kept, io_detail=False) == (moved == "io.stat")
    cg.close()
    for name in path.iterdir():
        name.unlink()
    path.rmdir()
    with pytest.raises(CgroupGone):
        unmoved(cg, kept, io_detail=False)


#: What a user may do in a tick, each moving what ``unmoved`` reads (an unread file moving alone
#: is the one difference admitted: test above): name → the files it changes.
ACTIONS = ("sit", "compute", "wait for a CPU", "allocate", "stall at memory.high", "read the disk")


def act(run, uid, action, counts):
    """Her kernel side of ``action``; ``counts`` holds her cumulative counters between ticks."""
    if action == "sit":
        return
    counts["cpu"] += 137_000  # every action runs something of hers
    run.both(uid, "cpu.stat", f"usage_usec {counts['cpu']}\nuser_usec 0\nsystem_usec 0\n")
    if action == "wait for a CPU":
        counts["cpu_some"] += 300_000
        run.both(uid, "cpu.pressure", PSI.format(counts["cpu_some"], counts["cpu_some"] // 3))
    if action in ("allocate", "stall at memory.high"):
        counts["anon"] += 24 << 20
        run.both(uid, "memory.current", f"{counts['anon'] + (8 << 20)}\n")
        run.both(uid, "memory.stat", f"anon {counts['anon']}\nfile {8 << 20}\nshmem 0\n")
    if action == "stall at memory.high":
        counts["high"] += 3
        counts["mem_some"] += 200_000
        run.both(uid, "memory.events", f"low 0\nhigh {counts['high']}\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n")
        run.both(uid, "memory.pressure", PSI.format(counts["mem_some"], counts["mem_some"] // 2))
    if action == "read the disk":
        counts["read"] += 8 << 20
        counts["io_some"] += 100_000
        run.both(uid, "io.stat", f"{DISK} rbytes={counts['read']} wbytes=0 rios=64 wios=0 dbytes=0 dios=0\n")
        run.both(uid, "io.pressure", PSI.format(counts["io_some"], 0))


@settings(max_examples=20, deadline=None)
@given(st.lists(st.lists(st.sampled_from(ACTIONS + ("sit",) * 5), min_size=3, max_size=3), min_size=14, max_size=14),
       st.booleans())
def test_any_mix_of_sitting_and_working_is_governed_as_if_every_user_were_read(ticks, disks):
    """Property: whatever three users do tick by tick — sit (most often, so that users are
    still), compute, wait for a CPU, allocate, stall at their memory.high, read a governed
    disk — the fast loop's reports and writes are the read-everything loop's (memory and CPU
    contended as they grow; disks governed or not)."""
    import tempfile
    from pathlib import Path

    uids = (1000, 1001, 1002)
    capacity = Capacity(1.0, 300 * 2**20, disks={DISK: (100e6, 100e6)} if disks else {})
    with tempfile.TemporaryDirectory(prefix="drfgov-still-") as tmp:
        run = Run(Path(tmp), uids, capacity, memory_high="max")
        counts = {uid: {"cpu": 0, "cpu_some": 0, "anon": 0, "high": 0, "mem_some": 0, "read": 0, "io_some": 0}
                  for uid in uids}
        for uid in uids:  # as the kernel had them before the first tick
            act(run, uid, "allocate", counts[uid])

        def kernel(run, tick):
            for uid, action in zip(uids, ticks[tick]):
                act(run, uid, action, counts[uid])

        run.ticks(kernel, len(ticks))
    assert run.diffs == [], run.diffs[:3]
