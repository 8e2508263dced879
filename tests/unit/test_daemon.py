"""drfgov run's service logic on a simulated host: state each tick, the snapshot before the
first write, SIGHUP-style reload (a bad file keeps the last good policy), restore on stop and
after a crash, bounded failure."""

import os
import threading
import time

import pytest

from cgroups import Cgroup, CpuMax
from governor.service.daemon import Daemon
from governor.enforce import DryRunBackend
from governor.enforce.model import EnforceError, LimitSet, Target
from governor.service.hostsetup import HostSetup, SetupError
from governor.control.model import Capacity
from governor.service.snapshot import load_snapshot, save_snapshot
from governor.service.state import read_state
from tests.simhost import SimBackend, SimHost, SimMonitor

POLICY = """\
interval_s: 1
state_path: {tmp}/run/state.json
history: {{path: {tmp}/lib/history.db, every_s: 0}}
memory: {{margin_bytes: 64MiB}}
weights:
  users: {{alice: {alice}, bob: 1}}
"""


class SteppingMonitor(SimMonitor):
    """Each tick's discovery advances the simulated host by one second."""

    def users(self):
        self.host.step(1.0)
        return super().users()


def host_with_two_busy_users():
    host = SimHost(cores=2.0)
    host.add(1000, "alice", 2.0)
    host.add(1001, "bob", 2.0)
    return host


def setup_for(host, backends):
    def make(policy, dry_run, clock):
        backend = DryRunBackend() if dry_run else SimBackend(host)
        backends.append(backend)
        return HostSetup(SteppingMonitor(host), backend, "simulated", Capacity(host.cores, host.memory_bytes), "sim")
    return make


def daemon_with_outputs(tmp_path):
    """A daemon of two busy users, its policy file's path and text, its outputs open."""
    config = tmp_path / "drfgov.yaml"
    text = POLICY.format(tmp=tmp_path, alice=2)
    config.write_text(text)
    d = Daemon(config, host_setup=setup_for(host_with_two_busy_users(), []), runtime_dir=tmp_path / "run")
    d._open_outputs()
    return config, text, d


@pytest.fixture
def world(tmp_path):
    host = host_with_two_busy_users()
    config = tmp_path / "drfgov.yaml"
    config.write_text(POLICY.format(tmp=tmp_path, alice=2))
    backends = []

    def daemon(**kw):
        return Daemon(config, host_setup=setup_for(host, backends), runtime_dir=tmp_path / "run", **kw)
    return host, config, daemon, backends, tmp_path


def test_each_tick_publishes_state_and_saves_originals_before_writing(world):
    host, _, daemon, _, tmp = world
    originals = {uid: u.limits for uid, u in host.users.items()}
    d = daemon()
    for _ in range(6):
        d.tick()
    state = read_state(tmp / "run" / "state.json")
    assert state["tick"] == 6 and state["mode"] == "enforce" and state["saturated"] == ["cpu"]
    by_name = {u["name"]: u for u in state["users"]}
    for name, uid in (("alice", 1000), ("bob", 1001)):
        limits = host.users[uid].limits
        assert by_name[name]["limits"]["cpu.max"] == f"{limits.cpu_max.quota_usec} {limits.cpu_max.period_usec}"
    assert by_name["alice"]["limits"]["cpu.weight"] == 200 and by_name["bob"]["limits"]["cpu.weight"] == 100
    snap = load_snapshot(d.snapshot_path)
    assert {uid: limits for uid, (_, limits) in snap.originals.items()} == originals


def test_run_reloads_keeps_last_good_policy_and_restores_on_stop(world):
    host, config, daemon, _, tmp = world
    originals = {uid: u.limits for uid, u in host.users.items()}
    d = daemon(interval_s=0.01)
    thread = threading.Thread(target=lambda: setattr(d, "status", d.run()))
    thread.start()
    wait_for(lambda: d.ticks >= 5)
    assert host.users[1000].limits.cpu_weight == 200

    config.write_text(POLICY.format(tmp=tmp, alice=2) + "bogus: 1\n")
    d.request_reload()
    wait_for(lambda: not d.reload_requested and d.ticks >= 8)
    assert d.policy.user_weights["alice"] == 2.0 and thread.is_alive()  # the bad file changed nothing

    config.write_text(POLICY.format(tmp=tmp, alice=3))
    d.request_reload()
    wait_for(lambda: host.users[1000].limits.cpu_weight == 300)

    d.request_stop()
    thread.join(10)
    assert d.status == 0
    assert {uid: u.limits for uid, u in host.users.items()} == originals
    assert not d.snapshot_path.exists()
    assert read_state(tmp / "run" / "state.json")["tick"] == d.ticks


def test_a_stop_asked_during_a_reload_runs_no_tick_after_it(world):
    """A SIGTERM while the policy is read again (a reload can take seconds on a loaded host):
    the loop stops once the reload is done, without one more tick writing limits it is about to
    give back (it ran one: the service audit of 2026-11-27)."""
    host, _, daemon, _, _ = world
    originals = {uid: u.limits for uid, u in host.users.items()}
    d = daemon(interval_s=0.01)
    reload, tick, ticks_after = d.reload, d.tick, []

    def reload_then_stop():
        reload()
        d.request_stop()

    def counted_tick():
        if d.stop_requested:
            ticks_after.append(d.ticks)
        return tick()

    d.reload, d.tick = reload_then_stop, counted_tick
    d.reload_requested = True
    assert d.run() == 0
    assert ticks_after == [] and d.ticks == 0
    assert {uid: u.limits for uid, u in host.users.items()} == originals


def test_the_loop_pauses_automatic_garbage_collection_only_while_it_runs(world):
    """No collection by allocation counts during ticks (runtime.GC_EVERY_S); the collector as
    it was once run() returns (a test process, or a caller, goes on with its own)."""
    import gc

    *_, daemon, _, _ = world
    d = daemon(interval_s=0.01, once=True)
    seen, tick = [], d.tick
    d.tick = lambda: seen.append(gc.isenabled()) or tick()
    assert gc.isenabled()
    assert d.run() == 0
    assert seen == [False, False] and gc.isenabled()


def test_the_loop_collects_garbage_fully_once_a_minute(world, monkeypatch):
    """With automatic collection off, the loop's own full collection is what frees cycles:
    one when GC_EVERY_S has passed on the loop's clock, none before."""
    import gc

    from governor.service.runtime import GC_EVERY_S

    now = [0.0]
    collections = []
    monkeypatch.setattr(gc, "collect", lambda *a: collections.append(now[0]) or 0)
    *_, daemon, _, _ = world
    d = daemon(interval_s=1.0, clock=lambda: now[0])
    ticks, tick = [], d.tick

    def tick_and_advance():
        ticks.append(now[0])
        if len(ticks) >= 70:
            d.request_stop()
        now[0] += 1.0
        return tick()
    d.tick = tick_and_advance
    monkeypatch.setattr(d, "_sleep_until", lambda deadline: deadline)  # no waiting: the clock is the ticks'
    assert d.run() == 0
    assert len(ticks) == 70 and collections == [GC_EVERY_S]


def test_a_stop_signal_that_lands_inside_a_log_write_does_not_write_again(world):
    """The SIGTERM handler only sets flags: logging from it re-entered a write to stderr the
    main thread was in (seen as "reentrant call inside BufferedWriter" when a full pipe held
    the daemon's log). The loop logs the signal once it has stopped."""
    import logging
    import os
    import signal

    *_, daemon, _, _ = world
    d = daemon(interval_s=0.01)

    class SignalInsideWrite(logging.Handler):
        busy, reentered = False, []

        def emit(self, record):
            if self.busy:
                self.reentered.append(record.getMessage())
                return
            self.busy = True
            os.kill(os.getpid(), signal.SIGTERM)  # Python runs the handler before this returns
            self.busy = False

    handler = SignalInsideWrite()
    logger = logging.getLogger("drfgov")
    logger.addHandler(handler)
    d._install_signals()
    try:
        logger.warning("a line being written")
    finally:
        d._restore_signals()
        logger.removeHandler(handler)
    assert d.stop_requested and d.stop_signal == "SIGTERM" and handler.reentered == []


def test_a_signal_is_ignored_from_its_handler_until_the_loop_acts_on_it(world):
    """Python runs a pending handler at the start of any Python call, the handler's own too: a
    flood of SIGHUPs nested handler in handler until RecursionError killed the loop (the fault
    suite's flood, once, on a loaded machine). Each handler now ignores its signals first, and
    SIGHUP is heeded again just before the policy is read: a later one makes another reload."""
    import signal

    *_, daemon, _, _ = world
    d = daemon(interval_s=0.01)
    before = signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM)  # SIG_IGN under nohup
    d._install_signals()
    try:
        os.kill(os.getpid(), signal.SIGHUP)  # Python runs the handler before this returns
        assert d.reload_requested and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGHUP)  # dropped by the kernel: no handler runs
        d.reload_requested = False
        d._rearm_reload()
        assert callable(signal.getsignal(signal.SIGHUP))
        os.kill(os.getpid(), signal.SIGHUP)
        assert d.reload_requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert d.stop_requested and signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        d._restore_signals()
    assert (signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM)) == before  # as they were


def test_sighup_is_heeded_again_before_the_policy_is_read_and_no_signal_kills_the_stop(world):
    """run() in the main thread, signals and all. A SIGHUP in a tick: the reload reads the
    policy with SIGHUP heeded again (one sent after an edit it might miss makes another reload).
    While the limits are given back every signal is ignored: the handlers were restored before
    _stop, and a SIGHUP flood with a SIGTERM in it ended the process by their default action
    (exit 129) with every limit in place (the review of 2026-11-27)."""
    import signal

    *_, daemon, _, _ = world
    d = daemon(interval_s=0.01)
    seen, ticked = {}, []
    real_tick = d._guarded_tick
    before = signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM)  # SIG_IGN under nohup

    def tick():
        ticked.append(1)
        if len(ticked) == 2:
            os.kill(os.getpid(), signal.SIGHUP)  # the handler runs before this returns
            seen["after_hup"] = signal.getsignal(signal.SIGHUP)
        return real_tick()

    def reload():
        seen["at_reload"] = signal.getsignal(signal.SIGHUP)
        d.request_stop()

    real_stop = d._stop

    def stop():
        seen["at_stop"] = (signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM),
                           signal.getsignal(signal.SIGINT))
        return real_stop()

    d._guarded_tick, d.reload, d._stop = tick, reload, stop
    assert d.run() == 0
    assert seen["after_hup"] is signal.SIG_IGN and callable(seen["at_reload"]), seen
    assert seen["at_stop"] == (signal.SIG_IGN,) * 3, seen
    assert (signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM)) == before  # as they were


def test_a_reload_that_moves_user_slice_takes_the_new_monitor(tmp_path):
    """cgroup_v1.parent moves where v1 and mixed monitors find users: a reload that changes it
    must not keep the old monitor (it kept looking in the old place)."""
    host = host_with_two_busy_users()
    config = tmp_path / "drfgov.yaml"
    config.write_text(POLICY.format(tmp=tmp_path, alice=2))
    monitors = []

    def make(policy, dry_run, clock):
        monitor = SteppingMonitor(host)
        monitor.user_slice = f"{policy.cgroup_v1_parent}/user.slice" if policy.cgroup_v1_parent else "user.slice"
        monitors.append(monitor)
        return HostSetup(monitor, SimBackend(host), "simulated", Capacity(host.cores, host.memory_bytes), "sim")

    original = host.users[1000].limits
    d = Daemon(config, host_setup=make, runtime_dir=tmp_path / "run", interval_s=0.01)
    d.tick(), d.tick()
    assert host.users[1000].limits != original and d.governor.originals  # governed
    d.reload()  # the same policy: the monitor and its counters stay
    assert d.host.monitor is monitors[0]
    config.write_text(POLICY.format(tmp=tmp_path, alice=2) + "cgroup_v1: {parent: site}\n")
    d.reload()
    assert d.host.monitor is monitors[2] and d.host.monitor.user_slice == "site/user.slice"
    # the slices written are given back before they are left behind (the review of the slice
    # identity: each taken for a slice made again, their originals were dropped unrestored)
    assert host.users[1000].limits == original and not d.governor.originals


def test_a_snapshot_left_by_a_crash_is_restored_at_start(world):
    host, _, daemon, _, tmp = world
    crashed = LimitSet(CpuMax(10_000), 42, 0, None, None, {})
    true_original = host.users[1000].limits
    host.users[1000].limits = crashed  # what the dead daemon had written
    d = daemon()
    save_snapshot(d.snapshot_path, "sim", {1000: (Target(1000, Cgroup("/sys/fs/cgroup/user.slice/user-1000.slice")), true_original)})
    d.restore_leftovers()
    assert host.users[1000].limits == true_original
    assert not d.snapshot_path.exists()


def test_a_failed_leftover_restore_keeps_the_true_original(world):
    host, _, daemon, _, _ = world
    true_original = host.users[1000].limits
    d = daemon()
    save_snapshot(d.snapshot_path, "sim", {1000: (Target(1000, Cgroup("/sys/fs/cgroup/user.slice/user-1000.slice")), true_original)})
    host.fail_writes_for.add(1000)
    d.restore_leftovers()
    assert d.governor.originals[1000][1] == true_original
    assert load_snapshot(d.snapshot_path).originals[1000][1] == true_original


def test_once_dry_run_writes_nothing_and_returns_the_plan(world):
    host, _, daemon, backends, tmp = world
    before = {uid: u.limits for uid, u in host.users.items()}
    d = daemon(dry_run=True, once=True, interval_s=0.01)
    assert d.run() == 0 and d.ticks == 2
    assert {u["name"] for u in d.last_document["users"]} == {"alice", "bob"}
    assert d.last_document["users"][0]["demand"]["cpu"] > 0
    assert {uid: u.limits for uid, u in host.users.items()} == before
    assert backends[0].recorded and not (tmp / "run").exists()


def test_a_failed_tick_leaves_no_report_and_the_state_file_as_last_written(world, caplog):
    host, _, daemon, _, tmp = world
    d = daemon(interval_s=0.01)
    d.tick()
    d.tick()
    written = read_state(tmp / "run" / "state.json", fresh=False)
    assert written["tick"] == 2

    def broken():
        raise RuntimeError("bug")
    d.governor.monitor.users = broken
    assert d._guarded_tick() is None and d.failed_ticks == 1
    assert d.report is None  # the last tick's went before this one was built (one generation at a time)
    d._leave_state()
    assert "the last tick failed: no document of it to leave" in caplog.text
    assert read_state(tmp / "run" / "state.json", fresh=False) == written
    d._stop()


def test_repeated_tick_failures_stop_the_daemon_and_restore(world):
    host, _, daemon, _, _ = world
    d = daemon(interval_s=0.01)
    original = host.users[1000].limits
    for _ in range(3):
        d.tick()
    assert host.users[1000].limits != original

    def broken():
        raise RuntimeError("bug")
    d.governor.monitor.users = broken
    assert d.run() == 1 and d.failed_ticks == 5
    assert host.users[1000].limits == original


def wait_for(condition, timeout_s=10.0):
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.01)


class RecordingNetwork:
    """A shaper that records what the daemon asks of it (the real one: tests/netns, tests/vm)."""

    def __init__(self, fail_install=None):
        from governor.shaping.model import link_resources

        self.links = link_resources({"eth0": 1e9}, {"eth0": True})
        self.in_force = {r: {} for r in self.links}
        self.missing = {}
        self.calls, self.fail_install = [], fail_install

    def install(self, every_link=False):
        self.calls.append("install")
        if self.fail_install:
            from governor.shaping.model import ShapingError

            raise ShapingError(self.fail_install)

    def sample(self, uids):
        from governor.shaping.model import NetSample

        return NetSample(time.monotonic(), {r: {u: 0 for u in uids} for r in self.links},
                         {r: {u: 0 for u in uids} for r in self.links})

    def apply(self, wanted):
        self.calls.append("apply")
        self.in_force = {r: dict(c) for r, c in wanted.items()}
        return []

    def remove(self, keep_table=False):
        self.calls.append("remove")
        self.kept_table = keep_table
        return []


def net_config(tmp_path):
    config = tmp_path / "drfgov.yaml"
    config.write_text(POLICY.format(tmp=tmp_path, alice=2) + "enforce: [cpu, memory, net]\n")
    return config


def offering(networks):
    """host_setup giving each call the next of ``networks`` (a shaper per setup, as a reload makes)."""
    host = host_with_two_busy_users()

    def make(policy, dry_run, clock):
        network = networks.pop(0)
        links = {r: link.capacity_bits_per_s for r, link in network.links.items()}
        return HostSetup(SteppingMonitor(host), SimBackend(host), "simulated",
                         Capacity(host.cores, host.memory_bytes, links=links), "sim", network=network)
    return make


def net_world(tmp_path, network):
    return Daemon(net_config(tmp_path), host_setup=offering([network] * 10), interval_s=0.01, runtime_dir=tmp_path / "run")


def test_the_daemon_installs_shaping_publishes_classes_and_removes_it_on_stop(tmp_path):
    network = RecordingNetwork()
    d = net_world(tmp_path, network)
    thread = threading.Thread(target=lambda: setattr(d, "status", d.run()))
    thread.start()
    wait_for(lambda: d.ticks >= 4)
    d.request_stop()
    thread.join(10)
    assert d.status == 0
    assert network.calls[0] == "install" and network.calls[-1] == "remove" and "apply" in network.calls
    assert network.kept_table is False  # stopping leaves nothing of the governor's
    state = read_state(tmp_path / "run" / "state.json")
    assert set(state["capacity"]) >= {"net:eth0:tx", "net:eth0:rx"}
    alice = next(u for u in state["users"] if u["name"] == "alice")
    assert alice["classes"]["net:eth0:tx"] == {"rate_bits_per_s": 666_666_666, "ceil_bits_per_s": 1_000_000_000}  # weight 2 of 3
    assert state["network_error"] is None


def test_shaping_that_cannot_be_installed_stops_the_daemon_before_any_tick(tmp_path):
    from governor.service.hostsetup import SetupError

    d = net_world(tmp_path, RecordingNetwork(fail_install="drfgov2: mark classifier (module cls_fw): not found"))
    with pytest.raises(SetupError, match="module cls_fw.*ingress: false"):
        d.run()
    assert d.ticks == 0


def test_a_reload_keeps_the_shaper_when_its_links_are_the_same_and_replaces_it_when_not(tmp_path):
    first, same, other = RecordingNetwork(), RecordingNetwork(), RecordingNetwork()
    other.links = {r: link for r, link in other.links.items() if r.direction == "tx"}  # ingress turned off
    offered = [first, same, other]
    d = Daemon(net_config(tmp_path), host_setup=offering(offered), runtime_dir=tmp_path / "run")
    d.reload()
    assert d.governor.network is first and same.calls == []  # same links: nothing torn down
    d.reload()
    assert d.governor.network is other
    assert first.calls[-1] == "remove" and other.calls == ["install"]
    # the table stays for the new install to replace in one transaction: connection tracking
    # never lapses (governor/shaping/nft.py, NftClassifier.install)
    assert first.kept_table is True


def test_a_reload_whose_shaping_cannot_be_installed_keeps_the_running_one(tmp_path):
    first = RecordingNetwork()
    broken = RecordingNetwork(fail_install="va: an ingress qdisc is configured already")
    broken.links = {r: link for r, link in broken.links.items() if r.direction == "tx"}
    offered = [first, broken]
    d = Daemon(net_config(tmp_path), host_setup=offering(offered), runtime_dir=tmp_path / "run")
    d.reload()
    assert d.governor.network is first and d.host.network is first
    assert first.calls == ["remove", "install"]  # torn down for the new one, then put back


def test_a_reload_that_changes_backend_and_network_restores_through_the_old_and_keeps_the_new_shaping(tmp_path):
    """The old backend gives back what it wrote; the new shaper, installed first, is not torn
    down by that restore (it was: every later tick then failed to shape)."""
    host = host_with_two_busy_users()
    original = host.users[1000].limits
    kernel_log = []  # shaping is per host: removing "ours" removes whatever any shaper of ours installed

    class HostShaper(RecordingNetwork):
        def install(self, every_link=False):
            kernel_log.append((self, "install"))
            super().install(every_link)

        def remove(self, keep_table=False):
            kernel_log.append((self, "remove"))
            return super().remove(keep_table)

    first, second = HostShaper(), HostShaper()
    second.links = {r: link for r, link in second.links.items() if r.direction == "tx"}
    setups = [(first, SimBackend(host, name="sim-a")), (second, SimBackend(host, name="sim-b"))]

    def make(policy, dry_run, clock):
        network, backend = setups.pop(0)
        links = {r: link.capacity_bits_per_s for r, link in network.links.items()}
        return HostSetup(SteppingMonitor(host), backend, "simulated", Capacity(host.cores, host.memory_bytes, links=links),
                         "sim", network=network)

    d = Daemon(net_config(tmp_path), host_setup=make, runtime_dir=tmp_path / "run")
    old_backend = d.host.backend
    for _ in range(4):
        d.tick()
    assert host.users[1000].limits != original  # the old backend wrote
    d.reload()
    assert host.users[1000].limits == original and old_backend.writes[-1][1] in (1000, 1001)  # given back by the old one
    assert first.calls[-1] == "remove" and second.calls == ["install"]
    assert kernel_log[-1] == (second, "install")  # no removal after the new shaping went in: it stays
    assert d.governor.backend is d.host.backend is not old_backend and d.governor.network is second
    for _ in range(3):
        d.tick()
    assert "apply" in second.calls and d.host.backend.writes  # the next ticks shape and write through the new ones


def test_an_unreadable_snapshot_at_start_is_a_clear_error_not_a_traceback(world):
    from governor.service.hostsetup import SetupError

    _, _, daemon, _, _ = world
    d = daemon()
    path = d.snapshot_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.raises(SetupError, match=f"unreadable snapshot.*mv {path} {path}.bad"):
        d.run()
    assert path.read_text() == "{not json"  # kept for the admin


def test_a_second_run_is_refused_while_the_first_holds_the_lock(world):
    from governor.service.hostsetup import SetupError

    _, _, daemon, _, _ = world
    first, second = daemon(), daemon()
    first.lock.acquire()
    try:
        with pytest.raises(SetupError, match="another drfgov run"):
            second.run()
        assert second.ticks == 0
    finally:
        first.lock.release()


def test_state_and_history_that_cannot_be_written_never_fail_a_tick(world, caplog):
    host, _, daemon, _, tmp = world
    d = daemon()
    d._open_outputs()
    (tmp / "run" / "state.json").mkdir(parents=True)  # a directory where state.json goes: every write fails
    (tmp / "run" / "state.json" / "x").write_text("")
    d.history.db.execute("PRAGMA query_only = ON")  # and the database refuses writes
    for _ in range(6):
        assert d._guarded_tick() is not None
    assert d.failed_ticks == 0 and host.users[1000].limits.cpu_max.quota_usec is not None  # still governing
    assert sum("not written (the tick goes on)" in r.message for r in caplog.records) == 2  # once each, not per tick


def test_a_full_disk_at_start_still_starts_the_metrics(world, monkeypatch):
    """The review: the disk-full branch returned before the metrics were started, so a daemon
    started on a full disk ran without metrics for its whole life, silently."""
    import errno

    host, config, daemon, backends, tmp = world
    config.write_text(config.read_text() + f"metrics: {{textfile: {tmp}/metrics/drfgov.prom}}\n")

    def full(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Daemon, "_open_history", full)
    d = daemon()
    d._open_outputs()
    try:
        assert d._history_pending and d.metrics is not None
    finally:
        if d.metrics is not None:
            d.metrics.close()


def test_the_host_is_prepared_each_tick_by_the_backend_kept_and_finished_once_at_stop(tmp_path):
    """A reload that keeps the backend keeps what prepares the host for it (on v1 with systemd:
    CPU accounting of new user slices), not the discarded new set-up's; a failing prepare is
    logged once and never stops a tick; at stop, after the limits, the preparation is undone."""
    host = host_with_two_busy_users()
    config = tmp_path / "drfgov.yaml"
    config.write_text(POLICY.format(tmp=tmp_path, alice=2))
    calls: list[str] = []
    setups: list[HostSetup] = []

    def make(policy, dry_run, clock):
        n = len(setups)

        def prepare():
            calls.append(f"prepare {n}")
            if len(calls) in (2, 3):
                raise EnforceError("systemd: no answer within 5 s")
        setup = HostSetup(SteppingMonitor(host), SimBackend(host), "simulated", Capacity(host.cores, host.memory_bytes),
                          "sim", prepare=prepare, finish=lambda: calls.append(f"finish {n}"))
        setups.append(setup)
        return setup

    d = Daemon(config, host_setup=make, runtime_dir=tmp_path / "run", interval_s=0.01)
    for _ in range(4):
        d.tick()
    config.write_text(POLICY.format(tmp=tmp_path, alice=3))
    d.reload()
    d.tick()
    assert calls == ["prepare 0"] * 5 and len(setups) == 2 and d.host.prepare is setups[0].prepare
    d.request_stop()
    assert d.run() == 0
    assert calls[-1] == "finish 0" and calls.count("finish 0") == 1 and "finish 1" not in calls


def test_with_metrics_on_the_tick_builds_no_document_and_a_scrape_sees_that_ticks_users(world, monkeypatch):
    """Metrics on, state.json watched and unread: the tick neither words reasons nor builds the
    metrics' document (issue 16); the collector builds it when collected, from that tick's
    report and header, as state.json would show them less the reasons — even after later
    ticks ran, with other demands. (History, due every tick here, builds its own, a user at a time.)"""
    from prometheus_client import generate_latest

    from governor.service import state as state_module
    from governor.service.statereaders import StateReaders

    from tests.cli.prometheus import free_port

    host, config, daemon, backends, tmp = world
    config.write_text(config.read_text() + f"metrics: {{listen: '127.0.0.1:{free_port('127.0.0.1')}'}}\n")
    d = daemon()
    d._open_outputs()
    built, real = [], state_module.state_document
    monkeypatch.setattr("governor.service.daemon.state_document",
                        lambda *a, **kw: (kw.get("reasons") is False and built.append(kw["tick"])) or real(*a, **kw))
    try:
        d.readers = StateReaders(tmp / "run" / "state.json", d.clock, lambda: None)
        assert d.readers.start()  # watched: nobody opens it
        d._state_written_s = d.clock()  # written just now: the next write is IDLE_EVERY_S away
        words = []
        for _ in range(3):
            d.tick()
            words.append(d.governor.word_reasons)
        assert words == [False] * 3 and built == []
        third, report, header = d.metrics.collector._latest, d.report, dict(d._document_of)
        expected = real(report, **header)
        for user in expected["users"]:
            user["reasons"] = {}
        assert any(u["planned"] for u in expected["users"]) and any(u["reasons"] for u in real(report, **header)["users"])
        host.users[1001].want_cores = 0.2
        for _ in range(2):
            d.tick()
        assert built == []
        assert third.get(lambda: None) == expected and built == [3]  # tick 3's, built after tick 5
        doc = d.metrics.collector.document()
        assert built == [3, 5] and doc["tick"] == 5 and doc != expected
        assert b'drfgov_user_weight{kind="cpu",uid="1000",user="alice"} 2.0' in generate_latest(d.metrics.registry)
        assert built == [3, 5]
    finally:
        d.readers.close()
        d.metrics.close()


def test_a_reload_that_moves_the_history_records_to_the_new_file(tmp_path):
    """A reload that moved history.path logged "reloaded" and went on writing the old file,
    while drfgov history followed the policy to the new one (the hostile-input audit of
    2026-11-26). A history that cannot be opened there fails the reload: the old one goes on."""
    from governor.service.history import HistoryReader

    config, _, d = daemon_with_outputs(tmp_path)
    try:
        d.tick(), d.tick()
        moved = POLICY.format(tmp=tmp_path, alice=2).replace(f"{tmp_path}/lib/history.db", f"{tmp_path}/lib2/h.db")
        config.write_text(moved)
        d.reload()
        assert d.policy.history_path == f"{tmp_path}/lib2/h.db"
        d.tick(), d.tick()
        assert HistoryReader(tmp_path / "lib2" / "h.db").names() == {1000: "alice", 1001: "bob"}
        hers = tmp_path / "hers"
        hers.mkdir(mode=0o700)
        os.chown(hers, 65534, 65534)
        config.write_text(moved.replace(f"{tmp_path}/lib2/h.db", f"{hers}/h.db"))
        d.reload()  # refused: the history stays where it was
        assert d.policy.history_path == f"{tmp_path}/lib2/h.db" and d.history.path == tmp_path / "lib2" / "h.db"
        config.write_text(moved.replace(f"{tmp_path}/lib2/h.db", f"{tmp_path}/lib3/x/h.db"))
        set_up = d._set_up

        def refused(policy):
            raise SetupError("reserve.cpu_cores 64 leaves no CPU for users")
        d._set_up = refused
        d.reload()  # refused by the host's setup: no new history made
        assert not (tmp_path / "lib3").exists() and d.history.path == tmp_path / "lib2" / "h.db"
        d._set_up = set_up
    finally:
        d._stop()


def test_a_reload_that_fails_makes_no_state_directory_and_one_in_hers_is_refused(tmp_path):
    """A reload moving state_path made its new directory at once, also when the reload then
    failed (a left-alone item of the seventh session). Now a failed reload leaves nothing;
    a new directory is judged by its nearest existing parent (one of hers is refused) and
    made when the reload holds."""
    config, text, d = daemon_with_outputs(tmp_path)
    try:
        d.tick()
        hers = tmp_path / "hers"
        hers.mkdir(mode=0o755)
        os.chown(hers, 65534, 65534)
        config.write_text(text.replace(f"{tmp_path}/run/state.json", f"{hers}/new/state.json"))
        d.reload()  # refused: she could make new/ and plant state.json there
        assert not (hers / "new").exists() and d.policy.state_path == f"{tmp_path}/run/state.json"
        config.write_text(text.replace(f"{tmp_path}/run/state.json", f"{tmp_path}/a/b/state.json")
                          .replace(f"{tmp_path}/lib/history.db", f"{hers}/h.db"))
        d.reload()  # refused for the history, checked after state_path: no directory made
        assert not (tmp_path / "a").exists()
        config.write_text(text.replace(f"{tmp_path}/run/state.json", f"{tmp_path}/a/b/state.json"))
        d.reload()
        assert d.policy.state_path == f"{tmp_path}/a/b/state.json"
        d.tick()
        assert read_state(tmp_path / "a" / "b" / "state.json", fresh=False)["tick"] == 2
    finally:
        d._stop()


def test_a_daemon_started_without_the_default_policy_file_reads_it_once_made(tmp_path):
    """Started with no file at the default path, the daemon ran the built-in defaults and every
    reload read them again: a file made at the default path later was never read (the CLI
    audit of 2026-11-26). The default path is asked again at each load."""
    default = tmp_path / "etc" / "drfgov.yaml"
    d = Daemon(None, host_setup=setup_for(host_with_two_busy_users(), []), runtime_dir=tmp_path / "run",
               default_config=default)
    assert d.policy.source == "<defaults>"
    default.parent.mkdir()
    default.write_text(POLICY.format(tmp=tmp_path, alice=5))
    d.reload()
    assert d.policy.source == str(default) and d.policy.user_weights["alice"] == 5


def test_a_state_directory_not_made_yet_under_a_sticky_one_is_judged_as_when_made(tmp_path):
    """check-config, run's early check and a reload judge a state directory not there yet by its
    nearest existing parent: under a root-owned sticky directory (as /tmp) that refused what
    the start accepts once it made the directory, so a policy worked until /tmp was cleared
    (the review of the directory checks). The sticky directory is judged as one on the way
    now; the directory itself sticky and shared is still refused."""
    from governor.config.policy import Policy
    from governor.service.daemon import trusted_state_directory

    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    below = Policy(state_path=str(sticky / "drfgov" / "state.json"))
    trusted_state_directory(below, create=False)  # accepted, and nothing made
    assert not (sticky / "drfgov").exists()
    trusted_state_directory(below)  # made, and accepted then too
    with pytest.raises(SetupError, match="world-writable"):
        trusted_state_directory(Policy(state_path=str(sticky / "state.json")), create=False)


def test_the_default_policy_file_once_read_gone_at_a_reload_keeps_the_last_good_policy(tmp_path, caplog):
    """Asked again at each reload, a default file deleted (a config tool's mv and write, an rm)
    switched the daemon to the built-in defaults: everyone's weights, state_path and history
    with one INFO line (the review of the default location). Once read, it is the file."""
    default = tmp_path / "drfgov.yaml"
    default.write_text(POLICY.format(tmp=tmp_path, alice=5))
    d = Daemon(None, host_setup=setup_for(host_with_two_busy_users(), []), runtime_dir=tmp_path / "run",
               default_config=default)
    default.unlink()
    d.reload()
    assert d.policy.source == str(default) and d.policy.user_weights["alice"] == 5
    assert "reload failed, keeping the last good policy" in caplog.text and "no such file" in caplog.text


def test_a_ticks_note_is_logged_when_it_appears_not_every_tick(world, caplog, monkeypatch):
    """A fallback that fails the same way every tick (its traceback the tick's note) is logged
    once, and again once it has been gone for a tick."""
    import governor.control.loop as loop

    _, _, daemon, _, _ = world
    d = daemon(interval_s=0.01)
    refused = [True]
    over_arrays = loop.demand_columns

    def columns(rows, params):
        if refused[0]:
            raise ValueError("refused by the test")
        return over_arrays(rows, params)

    monkeypatch.setattr(loop, "demand_columns", columns)
    for tick in range(6):
        refused[0] = tick != 3
        d.tick()
    said = [r.message for r in caplog.records if "demand over arrays failed" in r.getMessage()]
    assert len(said) == 2  # ticks 0 and 4: the same traceback in ticks 1, 2 and 5 is not logged again
    d._stop()


def test_a_state_path_or_history_at_a_file_not_drfgovs_is_refused_at_start_and_left_as_it_is(tmp_path):
    """The audit of 2026-11-27: state_path at an existing file (the policy file, in the audit)
    had it replaced by state JSON, even in a dry run; a text file as history.path was made 0600
    before SQLite refused it. Now the start refuses, naming the setting, the file and what it is,
    and touches nothing; an earlier state.json and history of drfgov's are taken as before."""
    notes = tmp_path / "notes.yaml"
    notes.write_text("keep: me\n")
    precious = tmp_path / "imp.txt"
    precious.write_text("precious\n")
    precious.chmod(0o644)
    config = tmp_path / "drfgov.yaml"
    text = POLICY.format(tmp=tmp_path, alice=2)
    for field, changed in (("state_path", text.replace(f"{tmp_path}/run/state.json", str(notes))),
                           ("history.path", text.replace(f"{tmp_path}/lib/history.db", str(precious)))):
        config.write_text(changed)
        d = Daemon(config, dry_run=True, host_setup=setup_for(host_with_two_busy_users(), []),
                   runtime_dir=tmp_path / "run")
        with pytest.raises(SetupError, match=f"{field}: .* exists and is not a drfgov"):
            d.run()
        d.lock.release()
    assert notes.read_text() == "keep: me\n" and precious.read_text() == "precious\n"
    assert precious.stat().st_mode & 0o777 == 0o644
    config.write_text(text)
    for _ in range(2):  # the second start finds the first one's state.json and history: its own
        d = Daemon(config, dry_run=True, interval_s=0.01, host_setup=setup_for(host_with_two_busy_users(), []),
                   runtime_dir=tmp_path / "run")
        d.tick = (lambda tick: lambda: (d.request_stop(), tick())[1])(d.tick)
        assert d.run() == 0
    assert read_state(tmp_path / "run" / "state.json")["tick"] >= 1


def test_a_reload_that_points_state_path_at_a_file_not_drfgovs_keeps_the_last_good_policy(tmp_path, caplog):
    config, text, d = daemon_with_outputs(tmp_path)
    try:
        d.tick()
        notes = tmp_path / "run" / "notes.txt"
        notes.write_text("keep me\n")
        config.write_text(text.replace(f"{tmp_path}/run/state.json", str(notes)).replace("alice: 2", "alice: 5"))
        d.reload()
        assert d.policy.state_path == f"{tmp_path}/run/state.json" and d.policy.user_weights["alice"] == 2
        assert "reload failed, keeping the last good policy" in caplog.text
        assert f"state_path: {notes} exists and is not a drfgov state document (it is a text file" in caplog.text
        d.tick()
        assert notes.read_text() == "keep me\n"
    finally:
        d._stop()


def test_output_refusals_name_a_foreign_file_and_the_snapshot_as_check_config_shows_them(tmp_path):
    from governor.config.policy import Policy
    from governor.service.daemon import file_refusals, output_refusals

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "h.db").write_text("not a database\n")
    policy = Policy(state_path=str(tmp_path / "run" / "originals.json"), history_path=str(tmp_path / "lib" / "h.db"))
    refusals = file_refusals(policy, tmp_path / "run")
    assert refusals["state_path"].endswith("is where drfgov keeps its snapshot of original limits: "
                                           "point state_path elsewhere")
    assert "it is a text file, 15 bytes" in refusals["history.path"]
    assert "it is a text file" in output_refusals(policy)["history.path"]


def test_a_textfile_directory_root_cannot_write_is_refused_when_run_must_make_it_else_a_warning(tmp_path, monkeypatch):
    """The audit's leftovers (check-config did not judge metrics.textfile's directory). As root:
    not there and its parent not writable (a read-only filesystem) — run cannot make it and
    refuses to start, so it is a refusal; there and not writable — run starts and logs each
    failed write, so a warning. Another user's access says nothing of root's: not asked."""
    from governor.config.metrics import MetricsExport
    from governor.config.policy import Policy
    from governor.service import daemon
    from governor.service.daemon import directory_refusals, textfile_directory_access

    from tests.textfiledirs import read_only_as_root

    read_only = read_only_as_root(monkeypatch, tmp_path)

    def policy(textfile):
        return Policy(state_path=str(tmp_path / "run" / "state.json"), history_path=str(tmp_path / "lib" / "h.db"),
                      metrics=MetricsExport(textfile=str(textfile)))

    to_make = policy(read_only / "prom" / "drfgov.prom")
    refused, why = textfile_directory_access(to_make)
    assert refused and why.startswith(f"{read_only}/prom is not there and cannot be made: {read_only} is not writable")
    assert directory_refusals(to_make)["metrics.textfile"] == why
    there = policy(read_only / "drfgov.prom")
    refused, why = textfile_directory_access(there)
    assert not refused and "run starts, and logs each textfile write that fails" in why
    assert "metrics.textfile" not in directory_refusals(there)
    assert textfile_directory_access(policy(tmp_path / "prom" / "drfgov.prom")) is None  # writable: made by run
    monkeypatch.setattr(daemon.os, "geteuid", lambda: 1000)
    assert textfile_directory_access(to_make) is None
