"""Still users (issue 16): a user nothing of whose moved over her last full reading, and whose
CPU time and memory have not moved since, is measured as then without her other files being
read — and governed exactly as if they had been (the oracle: the same loop made to read every
user in full, over a copy of the same files)."""

from cgroups import Cgroup
from governor.config.policy import Policy
from governor.control.loop import STILL_KEPT_S, Governor
from governor.control.model import Capacity
from governor.enforce import DryRunBackend
from monitors.cgroupmonitor import CgroupMonitor
from tests.fakecgroup import fake_cgroup

UIDS = (1000, 1001, 1002, 1003)
PSI = "some avg10=0.00 avg60=0.00 avg300=0.00 total={}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total={}\n"


class ReadsAll(CgroupMonitor):
    """The oracle's monitor: never says a user is unmoved, so every user is read in full."""

    def unmoved(self, user, kept, io_detail):
        return False


class Twin:
    """One governor over a fake cgroupfs under ``root``, reading it with ``monitor_class``: 2
    cores and 800 MiB for the users, both contended, so every knob is written and memory.high's
    details (memory.events, memory.pressure) are read; a fake /proc whose host stands still."""

    def __init__(self, root, monitor_class, now):
        self.slices = {uid: fake_cgroup(root, f"user.slice/user-{uid}.slice") for uid in UIDS}
        procfs = root / "proc"
        procfs.mkdir()
        (procfs / "stat").write_text("cpu  100 0 100 10000 0 0 0 0 0 0\n")
        (procfs / "meminfo").write_text("MemTotal: 16000000 kB\nMemAvailable: 8000000 kB\n")
        self.monitor = monitor_class(Cgroup(root / "user.slice"), lambda: now[0], min_uid=1000, procfs=str(procfs))
        self.governor = Governor(Policy().loop_settings(), Capacity(2.0, 800 * 2**20), self.monitor, DryRunBackend(),
                                 lambda: now[0], lambda u: {"cpu": 1.0 + u.uid % 2, "memory": 1.0, "io": 1.0})

    def write(self, uid, name, text):
        (self.slices[uid] / name).write_text(text)


def kernel_side(twins, tick):
    """What the kernel writes before tick ``tick``: 1000 computes throughout; 1001 is idle
    throughout; 1002 computes in ticks 8–12 and 25–26 only; 1003 is idle but her memory grows
    once (tick 6: a socket's buffers, no CPU of hers) and her memory.stat with it."""
    def both(uid, name, text):
        for twin in twins:
            twin.write(uid, name, text)

    both(1000, "cpu.stat", f"usage_usec {tick * 900_000}\nuser_usec {tick * 900_000}\nsystem_usec 0\n")
    both(1000, "cpu.pressure", PSI.format(tick * 300_000, tick * 100_000))
    busy_ticks = [t for t in range(tick + 1) if 8 <= t <= 12 or 25 <= t <= 26]
    usec = len(busy_ticks) * 1_200_000
    both(1002, "cpu.stat", f"usage_usec {usec}\nuser_usec {usec}\nsystem_usec 0\n")
    if tick == 6:
        both(1003, "memory.current", f"{700 << 20}\n")


def test_still_users_are_governed_as_if_every_user_were_read(tmp_path):
    now = [0.0]
    fast, oracle = Twin(tmp_path / "fast", CgroupMonitor, now), Twin(tmp_path / "oracle", ReadsAll, now)
    dormant_ticks = {uid: 0 for uid in UIDS}
    try:
        for tick in range(40):
            kernel_side((fast, oracle), tick)
            now[0] += 1.0
            got, want = fast.governor.tick(), oracle.governor.tick()
            for uid in UIDS:
                a, b = got.users[uid], want.users[uid]
                for field in ("usage", "demand", "allocation", "dominant_share", "weighted_share", "held", "evidence",
                              "stall_some_fraction", "stall_full_fraction", "throttled_cores", "planned", "limits",
                              "written", "error"):
                    assert getattr(a, field) == getattr(b, field), (tick, uid, field)
                state = fast.governor.state.get(uid)
                if state is not None and state.still is not None:
                    dormant_ticks[uid] += state.still.time_s < now[0]  # not read in full this tick
            assert got.capacity == want.capacity and got.saturated == want.saturated, tick
            assert fast.governor.backend.recorded == oracle.governor.backend.recorded, tick
    finally:
        fast.monitor.close()
        oracle.monitor.close()
    # the still ones were measured without being read in full, most ticks; the busy one never
    assert dormant_ticks[1000] == 0
    assert dormant_ticks[1001] >= 30 and dormant_ticks[1002] >= 20 and dormant_ticks[1003] >= 20, dormant_ticks


def test_a_still_user_reads_two_files_a_tick_and_all_of_them_every_few_seconds(tmp_path, monkeypatch):
    """What is saved: her cpu.stat and memory.current each tick; all her files at first, when
    she is first found still, and again once STILL_KEPT_S has passed since."""
    now = [0.0]
    twin = Twin(tmp_path, CgroupMonitor, now)
    reads: list[str] = []
    read_bytes = Cgroup._read_bytes

    def counted(self, name):
        if self.path.name == "user-1001.slice":
            reads.append(name)
        return read_bytes(self, name)

    monkeypatch.setattr(Cgroup, "_read_bytes", counted)
    per_tick = []
    try:
        for tick in range(int(STILL_KEPT_S) + 6):
            kernel_side((twin,), tick)
            now[0] += 1.0
            reads.clear()
            twin.governor.tick()
            per_tick.append(sorted(set(reads) - {"cpu.max", "memory.high", "memory.low", "memory.max", "io.max",
                                                 "cpu.weight"}))
    finally:
        twin.monitor.close()
    fast, kept_s = ["cpu.stat", "memory.current"], int(STILL_KEPT_S)
    full = ["cpu.pressure", "cpu.stat", "memory.current", "memory.events", "memory.pressure", "memory.stat"]
    # in full (memory.stat too: her admin's memory.high is in force): first sight, her first
    # interval (still), then twice more as memory.high's details start to be read (tick 1 wrote
    # the governor's) — a still measure stands only for the files it read — then the two files
    # a tick, and all of them again 10 s after the still reading
    assert per_tick[2:4] == [full, full], per_tick
    assert per_tick[4:4 + kept_s - 1] == [fast] * (kept_s - 1), per_tick
    assert per_tick[4 + kept_s - 1] == full, per_tick
    assert per_tick[4 + kept_s] == fast, per_tick


def test_what_moves_unseen_while_she_is_still_is_seen_at_her_next_full_reading(tmp_path):
    """A stall with no CPU time and no memory charged (a task of hers blocked for seconds in
    reclaim's I/O) shows in memory.pressure alone, which a still user's ticks do not read: it
    is seen at her next full reading, within STILL_KEPT_S, as if in the interval just before
    (her reading of the tick before stands for all her files, so that a user who wakes has her
    rates over the interval she woke in)."""
    now = [0.0]
    twin = Twin(tmp_path, CgroupMonitor, now)
    stalls = []
    try:
        for tick in range(int(STILL_KEPT_S) + 4):
            kernel_side((twin,), tick)
            if tick == 6:  # still since tick 4: 4.0 s of memory stall, no CPU, no memory charged
                twin.write(1001, "memory.pressure", PSI.format(4_000_000, 4_000_000))
            now[0] += 1.0
            report = twin.governor.tick()
            stalls.append(report.users[1001].stall_some_fraction.get("memory"))
    finally:
        twin.monitor.close()
    seen = [tick for tick, s in enumerate(stalls) if s]
    assert seen == [3 + int(STILL_KEPT_S)] and stalls[seen[0]] == 1.0, stalls  # 4 s in a second: all of it
