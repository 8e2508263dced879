"""CPU demand from her threads' own scheduler accounting (monitors/schedstat.py,
monitors/rates.thread_demand, governor/control/demand.cpu_evidence).

The real kernel's side — a throttled loop's run + wait is one core — is proven in the VM tier
(tests/vm/test_kernel_monitors.py::test_thread_accounting_reads_a_throttled_loop_as_one_core)."""

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from governor.config.policy import Policy
from governor.control.demand import THREAD_HELD_MARGIN, cpu_evidence
from governor.control.loop import Governor
from governor.control.model import Capacity
from governor.control.resources import CPU
from monitors.model import ThreadSchedstats
from monitors.rates import CPU_BOUND_BLOCKS_PER_CPU_S, MIN_SLEEP_FRACTION, ThreadDemand, thread_cores, thread_demand
from monitors.schedstat import thread_schedstats
from tests.simhost import SimBackend, SimHost, SimMonitor

S = 10**9  # ns


def thread_demand_cores(before, now, used_cores=None):
    """:func:`thread_demand`'s cores (None as there)."""
    found = thread_demand(before, now, used_cores)
    return None if found is None else found.cores


def demand(before, now, dt_s=1.0):
    """``before``/``now``: tid → (run_ns, wait_ns[, voluntary switches: 0])."""
    full = lambda d: {t: (v + (0,))[:3] for t, v in d.items()}  # noqa: E731
    return thread_demand_cores(ThreadSchedstats(10.0, full(before)), ThreadSchedstats(10.0 + dt_s, full(now)))


def test_a_throttled_busy_loop_is_one_core_at_any_quota():
    # 0.3 core run, 0.7 waited (throttled, or behind other users); never blocked
    assert demand({7: (0, 0)}, {7: (3 * S // 10, 7 * S // 10)}) == pytest.approx(1.0)
    # a reading early or late (the daemon held up behind the loops it reads) changes nothing
    assert demand({7: (0, 0)}, {7: (S // 2, S // 2 + S // 100)}) == 1.0
    assert demand({7: (0, 0)}, {7: (S // 2, S // 2 - S // 7)}) == 1.0


def test_a_thread_that_woke_just_before_the_reading_counts_its_share():
    # asleep since before the interval (no switch in it), woke 100 ms before the end
    assert demand({7: (0, 0, 4)}, {7: (S // 20, S // 20, 4)}) == pytest.approx(0.1)
    # woke mid-interval and has run since, never blocking: CPU-bound from now on
    assert demand({7: (0, 0, 4)}, {7: (S // 2, S // 10, 4)}) == 1.0


def test_a_thread_that_blocks_counts_what_it_ran():
    # a reader: 20 ms run, 300 ms waited for a CPU, 400 voluntary switches (its disk): its use
    assert demand({7: (0, 0, 100)}, {7: (S // 50, 3 * S // 10, 500)}) == pytest.approx(0.02)
    # the build host's sleeper under a 0.05-core quota: waited 0.96 s, blocked 87 times
    assert demand({7: (0, 0, 0)}, {7: (7 * S // 1000, 96 * S // 100, 87)}) == pytest.approx(0.007)


def test_a_cpu_bound_thread_that_blocks_now_and_then_is_still_a_core():
    # a Python thread handing the GIL to its sibling every 5 ms: 0.4 s run, 80 blocks, 0.5 s waited
    assert demand({7: (0, 0, 10)}, {7: (4 * S // 10, S // 2, 90)}) == 1.0


def test_a_thread_that_blocks_now_and_then_is_not_credited_its_waits_for_a_cpu():
    # the scenario tier's mixed user under host load (cpu-disk-mixed, tick 46): dd iflag=direct
    # beside her throttled loop ran 0.143 s, waited 0.368 s, slept the rest, and blocked 89 times
    # (625 a CPU-second, 1.6 ms a read under TCG: below the bound); runnable half the interval,
    # it read as a whole core. Without its waits it would cycle in run + sleep: 0.143 / 0.632
    assert demand({7: (0, 0, 0)}, {7: (143 * S // 1000, 368 * S // 1000, 89)}) == pytest.approx(0.226, abs=1e-3)
    # tick 53: 0.130 run, 0.346 waited, 101 blocks: was (r + w) / T = 0.48 core
    assert demand({7: (0, 0, 0)}, {7: (130 * S // 1000, 346 * S // 1000, 101)}) == pytest.approx(0.199, abs=1e-3)
    # the same dd alone (no waits): its duty cycle, whatever the contention
    assert demand({7: (0, 0, 0)}, {7: (143 * S // 1000, 0, 89)}) == pytest.approx(0.143)
    # her loop beside it: one core, the two together 1.23, not 2.0
    loop, reader = (459 * S // 1000, 539 * S // 1000), (143 * S // 1000, 368 * S // 1000, 89)
    assert demand({1: (0, 0), 7: (0, 0, 0)}, {1: loop, 7: reader}) == pytest.approx(1.226, abs=1e-3)


def test_a_thread_that_blocked_and_waited_all_the_interval_wanted_a_core():
    assert thread_cores(S // 10, S, 3, S) == (1.0, False)


def test_a_thread_that_slept_once_wants_what_it_was_runnable():
    # one sleep of 0.6 s (a file read, a lock) in a throttled loop's second: runnable the other
    # 0.4 (ran 0.05, waited 0.35), it wants 0.4 core — read as a duty cycle, 0.05 / 0.65; a
    # thread that slept twice or more is read as one
    assert thread_cores(S // 20, 35 * S // 100, 1, S) == (pytest.approx(0.4), False)
    assert thread_cores(S // 20, 35 * S // 100, 2, S)[0] == pytest.approx(0.05 / 0.65)


@given(blocked=st.integers(2, 200), burst_ns=st.integers(10**6, 5 * 10**6), waited_ns=st.integers(0, S),
       slept_ns=st.integers(S // 2, S), more_wait_ns=st.integers(0, 2 * S))
def test_waiting_for_a_cpu_adds_no_demand_to_a_thread_that_blocked(blocked, burst_ns, waited_ns, slept_ns,
                                                                   more_wait_ns):
    # contention stretches a thread's cycle by its waits for a CPU and leaves its run and its
    # sleep as they were: a CPU-bound thread (bursts of 1 ms or more) that blocked wants the
    # same whatever it waited
    ran_ns = blocked * burst_ns
    interval_ns = ran_ns + waited_ns + slept_ns
    assume(slept_ns >= MIN_SLEEP_FRACTION * (interval_ns + more_wait_ns))  # a sleep beyond the readings' error
    alone, alone_probed = thread_cores(ran_ns, waited_ns, blocked, interval_ns)
    crowded, _ = thread_cores(ran_ns, waited_ns + more_wait_ns, blocked, interval_ns + more_wait_ns)
    assert alone_probed  # a duty cycle: probed up under a quota that binds (a sleep may be a throttled sibling's)
    assert crowded == pytest.approx(alone)
    assert ran_ns / interval_ns - 1e-9 <= alone <= 1.0


def test_short_lived_processes_leave_the_counters_to_speak():
    # her cgroup used 1.0 core; the threads read at both ends ran 0.5 of it (make -j's compilers came and went)
    one = lambda t, run: ThreadSchedstats(t, {1: (run, 0, 0)})  # noqa: E731
    assert thread_demand_cores(one(1.0, 0), one(2.0, S // 2), used_cores=1.0) is None
    assert thread_demand_cores(one(1.0, 0), one(2.0, 9 * S // 10), used_cores=1.0) == 1.0


def test_a_reused_thread_id_is_left_out():
    assert demand({1: (5 * S, 5 * S, 50), 2: (0, 0)}, {1: (S // 10, 0, 1), 2: (S // 2, 0, 900)}) == pytest.approx(0.5)


def test_a_thread_asleep_all_the_interval_wants_nothing():
    assert demand({1: (5, 5, 3)}, {1: (5, 5, 3)}) == 0.0


def test_threads_add_up_and_each_is_at_most_one_core():
    before = {1: (0, 0), 2: (0, 0), 3: (0, 0, 0)}
    now = {1: (S // 2, S // 2), 2: (S // 4, 3 * S // 4), 3: (S // 10, S // 10, 400)}  # two loops and a light one
    assert demand(before, now) == pytest.approx(2.1)


def test_a_thread_that_waited_the_whole_interval_wanted_a_core():
    assert demand({1: (5, 5)}, {1: (5, 5 + S)}) == 1.0


def test_threads_born_or_gone_within_the_interval_are_left_out():
    assert demand({1: (0, 0), 2: (0, 0)}, {1: (S // 2, 0, 3000), 3: (S, 0)}) == pytest.approx(0.5)


def test_the_interval_is_the_threads_own():
    # read 2 s apart (the rest of her sample was read at other times): a loop is one core
    assert thread_demand_cores(ThreadSchedstats(3.0, {1: (0, 0, 0)}), ThreadSchedstats(5.0, {1: (S, S, 0)})) == 1.0


def test_no_reading_at_either_end_gives_none():
    one = ThreadSchedstats(1.0, {1: (0, 0, 0)})
    assert thread_demand_cores(None, one) is None
    assert thread_demand_cores(one, None) is None
    assert thread_demand_cores(one, ThreadSchedstats(1.0, {1: (1, 1, 0)})) is None


@given(st.dictionaries(st.integers(1, 50), st.tuples(st.integers(0, 2 * S), st.integers(0, 2 * S), st.integers(0, 3)),
                       max_size=8),
       st.floats(0.1, 3.0))
def test_thread_demand_is_between_their_use_and_one_core_each(deltas, dt_s):
    found = demand({tid: (0, 0, 0) for tid in deltas}, deltas, dt_s)
    used = sum(min(r / (dt_s * 1e9), 1.0) for r, _, _ in deltas.values())
    assert 0.0 <= found <= len(deltas) + 1e-9
    assert found >= used - 1e-9


def test_cpu_evidence_takes_her_threads_word_over_the_cgroup_counters():
    # the scenario tier's mixed user: a loop and a reader at 0.47 core, throttled_usec 0.47 over
    # two CPUs, PSI some 0.36: the counters said 0.94; her threads say 1.03
    ev = cpu_evidence(0.47, 0.47, 0.36, 2.0, quota_cores=0.46, thread_demand_cores=1.03)
    assert ev.held and ev.wanted == pytest.approx(1.03)
    assert cpu_evidence(0.47, 0.47, 0.36, 2.0, quota_cores=0.46).wanted == pytest.approx(0.94)


def test_threads_that_barely_waited_are_not_held_back():
    ev = cpu_evidence(0.5, 0.01, 0.02, 2.0, quota_cores=1.0, thread_demand_cores=0.5 * (1 + THREAD_HELD_MARGIN / 2))
    assert not ev.held and ev.speedup == 1.0
    assert cpu_evidence(0.5, 0.0, 0.0, 2.0, thread_demand_cores=3.0).wanted == 2.0  # the CPUs there are


def test_threads_paced_by_what_they_block_on_are_probed_up_while_her_quota_binds():
    # a thread pool under a 0.3-core quota, at it and throttled: what its threads ran is the
    # quota's pace; their part is probed up by probe_factor, within used + throttled
    ev = cpu_evidence(0.3, 0.6, 0.5, 2.0, quota_cores=0.3, thread_demand_cores=0.3, thread_paced_cores=0.3)
    assert ev.held and ev.wanted == pytest.approx(0.3 * 1.25)
    assert cpu_evidence(0.3, 0.01, 0.5, 2.0, quota_cores=0.3, thread_demand_cores=0.3,
                        thread_paced_cores=0.3).wanted == pytest.approx(0.31)  # the counters bound it
    # a CPU-bound thread's word is its whole demand: not probed
    ev = cpu_evidence(1.0, 0.5, 0.5, 2.0, quota_cores=1.0, thread_demand_cores=1.0, thread_paced_cores=0.0)
    assert not ev.held and ev.wanted == 1.0
    # only the paced part: a loop (1 core) and a pool that ran 0.6 beside it
    ev = cpu_evidence(1.6, 0.5, 0.5, 3.0, quota_cores=1.6, thread_demand_cores=1.6, thread_paced_cores=0.6)
    assert ev.held and ev.wanted == pytest.approx(1.6 + 0.25 * 0.6)
    # not at her quota, or not throttled: what they ran is their own pace
    assert not cpu_evidence(0.3, 0.6, 0.5, 2.0, quota_cores=0.5, thread_demand_cores=0.3, thread_paced_cores=0.3).held
    assert not cpu_evidence(0.3, 0.0, 0.5, 2.0, quota_cores=0.3, thread_demand_cores=0.3, thread_paced_cores=0.3).held


class ThreadPoolHost(SimHost):
    """The simulated host, each user's CPU time split evenly over her threads, with their
    scheduler accounting: a ``"loop"`` thread never blocks and is runnable all the time; a
    ``"pool"`` thread (a server's workers, futex hand-offs) blocks 5,000 times a CPU-second and
    is runnable for its share of what she wants."""

    def __init__(self, cores: float):
        super().__init__(cores)
        self.threads: dict[int, dict[int, str]] = {}  # uid → tid → kind
        self.stats: dict[int, dict[int, tuple[int, int, int]]] = {}  # uid → tid → (run, wait, blocks)

    def step(self, seconds: float = 1.0) -> None:
        before = {uid: u.usage_usec for uid, u in self.users.items()}
        super().step(seconds)
        for uid, threads in self.threads.items():
            u, stats = self.users[uid], self.stats.setdefault(uid, {})
            ran_s = (u.usage_usec - before[uid]) / 1e6 / len(threads)
            wanted_s = self._cpu_want(u) * seconds / len(threads)
            for tid, kind in threads.items():
                run, wait, blocks = stats.get(tid, (0, 0, 0))
                waited_s = max(0.0, (seconds if kind == "loop" else wanted_s) - ran_s)
                stats[tid] = (run + round(ran_s * 1e9), wait + round(waited_s * 1e9),
                              blocks + (round(5000 * ran_s) if kind == "pool" else 0))


class ThreadPoolMonitor(SimMonitor):
    def sample(self, user, memory_detail=True, io_detail=True, cpu_detail=False, kept=None):
        sample = super().sample(user)
        if not cpu_detail:
            return sample
        return sample._replace(thread_schedstats=ThreadSchedstats(self.host.now, dict(self.host.stats[user.uid])))


def test_a_thread_pool_whose_cap_fell_in_a_lull_gets_its_share_back():
    """The gaming audit of 2026-11-27: a pool of threads that block often, capped below its
    need, read as wanting exactly its cap (what its threads ran), was given it again, and
    stayed there: after a one-tick lull, 0.3 of its fair 1.0 core for every tick after (44 of
    44), the loop beside it taking the rest."""
    host = ThreadPoolHost(cores=2.0)
    host.add(1000, "loops", 2.0)
    pool = host.add(1001, "pool", 1.5)
    host.threads = {1000: {1: "loop", 2: "loop"}, 1001: {11: "pool", 12: "pool", 13: "pool", 14: "pool"}}
    gov = Governor(Policy().loop_settings(), Capacity(host.cores, host.memory_bytes), ThreadPoolMonitor(host),
                   SimBackend(host), host.clock, lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0})
    used = []
    for tick in range(40):
        pool.want_cores = 0.3 if tick == 15 else 1.5
        was = pool.usage_usec
        gov.tick()
        host.step(1.0)
        used.append((pool.usage_usec - was) / 1e6)
    print(f"\nthe pool's cores by tick: {[round(u, 2) for u in used]}")
    assert min(used[8:15]) > 0.95  # its fair share, before the lull
    assert used[16] < 0.5  # capped at what it used in the lull
    assert all(u > 0.9 for u in used[28:]), used[28:]  # and back within a dozen ticks


class BurstyPoolHost(ThreadPoolHost):
    """A pool whose bursts are caught at period ends: throttled 0.3 s a second whenever she uses
    ≥ 90% of her quota (the README's bursty reader), never when it is above her need by more."""

    def step(self, seconds: float = 1.0) -> None:
        u = self.users[1001]
        quota = u.limits.cpu_max.cores
        super().step(seconds)
        if quota is not None and min(u.want_cores, quota) >= 0.9 * quota:
            u.throttled_usec += round(0.3 * seconds * 1e6)
            u.nr_throttled += round(seconds / 0.1)


def test_a_pool_whose_quota_is_her_whole_need_is_not_probed_every_other_tick():
    """The review of 2026-11-27: a pool wanting 0.5 core, throttled in bursts at a 0.5-core
    quota, was probed to 0.625, used 0.5 of it, fell back, and was probed again: her cap and
    the other user's swung by a quarter every other tick (40 cpu.max writes in 20 ticks). After
    a probe she leaves unused she rests (PROBE_REST_TICKS)."""
    host = BurstyPoolHost(cores=2.0)
    host.add(1000, "loops", 2.0)
    host.add(1001, "pool", 0.5)
    host.threads = {1000: {1: "loop", 2: "loop"}, 1001: {11: "pool", 12: "pool", 13: "pool", 14: "pool"}}
    backend = SimBackend(host)
    gov = Governor(Policy().loop_settings(), Capacity(host.cores, host.memory_bytes), ThreadPoolMonitor(host),
                   backend, host.clock, lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0})
    quotas = []
    for tick in range(40):
        gov.tick()
        host.step(1.0)
        quotas.append(host.users[1001].limits.cpu_max.cores)
    writes = [w for w in backend.writes if w[0] >= 10 and "cpu_max" in w[2]]
    print(f"\nher cpu.max by tick: {[q and round(q, 3) for q in quotas]}; cpu.max writes after tick 10: {len(writes)}")
    assert len(writes) <= 15  # a swing of both users' caps every PROBE_REST_TICKS (60 before: one a tick)
    assert all(q is not None and q >= 0.5 for q in quotas[10:])  # never below her need


def _tree(tmp_path, layout, procfs):
    """``layout``: cgroup path (relative) → tids; ``procfs``: tid → schedstat text (None: absent)."""
    for rel, tids in layout.items():
        d = tmp_path / "cg" / rel
        d.mkdir(parents=True, exist_ok=True)
        for parent in [d, *d.relative_to(tmp_path / "cg").parents][:-1]:  # every cgroup has the file
            threads = tmp_path / "cg" / parent / "cgroup.threads"
            if not threads.exists():
                threads.write_text("")
        (d / "cgroup.threads").write_text("".join(f"{t}\n" for t in tids))
        (d / "cpu.stat").write_text("usage_usec 0\n")  # files beside the directories are not walked
    for tid, text in procfs.items():
        if text is not None:
            (tmp_path / "proc" / str(tid)).mkdir(parents=True)
            (tmp_path / "proc" / str(tid) / "schedstat").write_text(text)
            (tmp_path / "proc" / str(tid) / "status").write_text(
                f"Name:\tx\nState:\tR (running)\nvoluntary_ctxt_switches:\t{tid % 7}\n"
                "nonvoluntary_ctxt_switches:\t99\n")
    (tmp_path / "proc").mkdir(exist_ok=True)
    return tmp_path / "cg" / "user-1000.slice", str(tmp_path / "proc")


def test_schedstats_of_every_thread_below_her_slice(tmp_path):
    slice_dir, procfs = _tree(tmp_path, {
        "user-1000.slice": [], "user-1000.slice/session-2.scope": [101, 102],
        "user-1000.slice/user@1000.service/app.slice/x.service": [103, 104],
    }, {101: "300 700 12\n", 102: "5 6 7\n", 103: "1 2 3\n", 104: None})  # 104 exited meanwhile
    assert thread_schedstats(slice_dir, procfs) == {101: (300, 700, 3), 102: (5, 6, 4), 103: (1, 2, 5)}


def test_too_many_threads_or_no_schedstat_reads_nothing(tmp_path):
    slice_dir, procfs = _tree(tmp_path, {"user-1000.slice": [1, 2, 3]}, {1: "1 1 1\n", 2: "x\n", 3: "1 1 1\n"})
    assert thread_schedstats(slice_dir, procfs, max_threads=2) is None
    assert thread_schedstats(slice_dir, procfs) is None  # a format we do not know: none, not a wrong sum
    assert thread_schedstats(tmp_path / "gone", procfs) is None


class ThreadedMonitor(SimMonitor):
    """The simulated host's users with one always-runnable thread each (run = her CPU time, wait
    = the rest since she started); records what the loop asked for."""

    def __init__(self, host):
        super().__init__(host)
        self.asked: list[tuple[str, bool]] = []

    def sample(self, user, memory_detail=True, io_detail=True, cpu_detail=False, kept=None):
        self.asked.append((user.name, cpu_detail))
        sample = super().sample(user)
        if not cpu_detail:
            return sample
        run_ns = self.host.users[user.uid].usage_usec * 1000
        threads = ThreadSchedstats(self.host.now, {user.uid: (run_ns, int(self.host.now * 1e9) - run_ns, 0)})
        return sample._replace(thread_schedstats=threads)


def test_the_loop_reads_threads_only_while_a_quota_throttles_her_and_takes_their_word():
    host = SimHost(cores=2.0)
    host.add(1000, "alice", 1.5)  # the counters say 1.5 cores; her one thread says one core
    host.add(1001, "bob", 2.0)
    host.add(1002, "carol", 0.2)  # under her share: no quota, never read
    monitor = ThreadedMonitor(host)
    gov = Governor(Policy().loop_settings(), Capacity(host.cores, host.memory_bytes), monitor, SimBackend(host),
                   host.clock, lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0})
    reports = []
    for _ in range(8):
        reports.append(gov.tick())
        host.step(1.0)
    asked = [[detail for name, detail in monitor.asked[i * 3:(i + 1) * 3]] for i in range(8)]
    assert asked[0] == asked[1] == [False, False, False]  # no quota written yet, then not yet throttled
    assert all(tick[0] and tick[1] and not tick[2] for tick in asked[3:]), asked
    assert reports[2].users[1000].evidence[CPU].wanted == pytest.approx(1.5, rel=0.02)  # the counters, meanwhile
    alice = reports[-1].users[1000].evidence[CPU]
    assert alice.held and alice.wanted == pytest.approx(1.0, rel=0.02)
    assert reports[-1].users[1001].evidence[CPU].wanted == pytest.approx(1.0, rel=0.02)


def test_a_thread_gone_between_open_and_read_and_a_scope_gone_mid_walk_are_left_out(tmp_path, monkeypatch):
    slice_dir, procfs = _tree(tmp_path, {
        "user-1000.slice": [101], "user-1000.slice/session-2.scope": [102],
        "user-1000.slice/gone.scope": [103],
    }, {101: "1 2 3\n", 102: "4 5 6\n", 103: "7 8 9\n"})
    real_open = open

    def racing_open(path, *args, **kwargs):
        path = str(path)
        if path.endswith("/102/schedstat"):
            raise ProcessLookupError(3, "No such process")  # ESRCH: it exited after open
        if "gone.scope" in path:
            raise FileNotFoundError(2, "No such file or directory")  # the scope was removed
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr("monitors.schedstat.open", racing_open, raising=False)
    assert thread_schedstats(slice_dir, procfs) == {101: (1, 2, 3)}


def test_her_slice_gone_or_too_many_cgroups_reads_nothing(tmp_path):
    layout = {"user-1000.slice": [1]} | {f"user-1000.slice/user@1000.service/c{i}.scope": [] for i in range(5)}
    slice_dir, procfs = _tree(tmp_path, layout, {1: "1 1 1\n"})
    assert thread_schedstats(slice_dir, procfs) == {1: (1, 1, 1)}
    assert thread_schedstats(slice_dir, procfs, max_cgroups=6) is None  # 7 cgroups: hers, user@, 5 scopes
    assert thread_schedstats(slice_dir / "nothing-here", procfs) is None


def test_a_directory_of_hers_with_many_children_is_not_listed_past_the_bound(tmp_path, monkeypatch):
    """Each directory walked was listed whole before the cgroup bound applied: one of hers with
    50,000 children cost 20 ms a tick she was throttled (the hostile-input audit of 2026-11-26)."""
    import os as real_os

    layout = {"user-1000.slice": [1]} | {f"user-1000.slice/wide/c{i}": [] for i in range(300)}
    slice_dir, procfs = _tree(tmp_path, layout, {1: "1 1 1\n"})
    listed = []
    real_scandir = real_os.scandir

    class Counting:
        def __init__(self, path):
            self.inner = real_scandir(path)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.inner.close()

        def __iter__(self):
            for entry in self.inner:
                listed.append(entry)
                yield entry

    monkeypatch.setattr("monitors.schedstat.os.scandir", Counting)
    assert thread_schedstats(slice_dir, procfs, max_cgroups=50) is None
    assert len(listed) <= 52
    assert thread_schedstats(slice_dir, procfs, max_cgroups=302) == {1: (1, 1, 1)}  # 302 cgroups: all walked


def test_threads_passing_a_lock_under_a_quota_are_probed_up_not_left_at_their_cap():
    # the review of 2026-11-27: sixteen threads of hers pass one lock, one runnable at a time,
    # under a 0.3-core quota: each ran 0.3/16, waited 0.7/16 and slept the rest waiting for the
    # lock — a sleep her quota causes. Their duty cycles sum to 0.31 core (her cap: she would
    # read as not held, and stay there); as paced cores they are probed up while it binds
    n, quota = 16, 0.3
    before = {tid: (0, 0, 0) for tid in range(n)}
    after = {tid: (round(quota / n * S), round((1 - quota) / n * S), 10) for tid in range(n)}  # 533 a CPU-second
    got = thread_demand(ThreadSchedstats(0.0, before), ThreadSchedstats(1.0, after), used_cores=quota)
    assert got.cores == pytest.approx(n * quota / (quota + n - 1), rel=1e-6) and got.paced_cores == got.cores
    ev = cpu_evidence(quota, 1 - quota, 0.7, 2.0, quota_cores=quota, thread_demand_cores=got.cores,
                      thread_paced_cores=got.paced_cores)
    assert ev.held and ev.wanted == pytest.approx(got.cores * 1.25)  # a quarter more a tick, within used + throttled


def test_a_throttled_loop_that_blocked_twice_with_a_sleep_within_the_readings_error_is_a_core():
    # a loop at a 0.02-core quota that blocked twice (a log line): its sleep of 30 ms is the
    # readings' error, not a cycle; read as a duty cycle it would be 0.02 / 0.05 = 0.4 core
    assert thread_cores(S // 50, 95 * S // 100, 2, S) == (1.0, False)
