"""The daemon's files: state.json, the restore snapshot, history, and sd_notify messages."""

import json
import os
import socket
import stat

import pytest

from cgroups import Cgroup, CpuMax, IoMax
from governor.enforce.model import LimitSet, Target
from governor.service.history import History, HistoryReader
from governor.service.notify import Notifier
from governor.service.snapshot import SnapshotError, load_snapshot, restore_snapshot, save_snapshot
from governor.service.state import CHUNK_USERS, StateError, read_state, write_state
from tests.simhost import SimBackend, SimHost

ORIGINAL = LimitSet(CpuMax(50_000, 100_000), 77, 1 << 20, 512 << 20, None, {"8:0": IoMax(rbps=1_000_000)})


def test_knobs_round_trip_in_kernel_words():
    doc = ORIGINAL.to_json()
    assert doc["cpu.max"] == "50000 100000" and doc["memory.max"] is None
    assert doc["io.max"] == {"8:0": "rbps=1000000 wbps=max riops=max wiops=max"}
    assert LimitSet.from_json(json.loads(json.dumps(doc))) == ORIGINAL


def test_state_is_replaced_atomically_and_world_readable(tmp_path):
    path = tmp_path / "run" / "state.json"
    doc = {"version": 1, "time_unix_s": 1e9, "users": [], "tick": 1}  # a state document's first keys
    write_state(path, doc)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert read_state(path) == doc
    write_state(path, {**doc, "tick": 2})
    assert read_state(path)["tick"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]  # no temporary left behind


@pytest.mark.parametrize("users", [0, 1, CHUNK_USERS, CHUNK_USERS + 1, 3 * CHUNK_USERS + 7])
@pytest.mark.parametrize("around", [True, False])
def test_state_written_a_chunk_of_users_at_a_time_is_the_same_file(tmp_path, users, around):
    entries = [{"uid": 1000 + i, "name": f"u{i}", "demand": {"cpu": i / 7, "memory": 2.0**40 + i}} for i in range(users)]
    head = {"version": 1, "time_unix_s": 1e9, "saturated": ["cpu"]} if around else {}
    tail = {"network_error": "tc: no such device"} if around else {}
    whole, streamed = tmp_path / "whole.json", tmp_path / "streamed.json"
    write_state(whole, {**head, "users": entries, **tail})
    write_state(streamed, {**head, "users": iter(entries), **tail})
    assert streamed.read_bytes() == whole.read_bytes()
    assert json.loads(streamed.read_bytes()) == {**head, "users": entries, **tail}


def test_state_streamed_with_a_name_orjson_refuses_and_a_failing_user(tmp_path):
    path = tmp_path / "state.json"
    odd = "caf\udce9"  # a passwd name that is not UTF-8, surrogate-escaped
    entries = [{"uid": i, "name": odd if i == CHUNK_USERS + 3 else f"u{i}"} for i in range(2 * CHUNK_USERS)]
    write_state(path, {"version": 1, "time_unix_s": 1e9, "users": iter(entries)})
    assert json.loads(path.read_text())["users"] == entries

    def failing():
        yield {"uid": 1}
        raise RuntimeError("a bug in one user's entry")
    with pytest.raises(RuntimeError):
        write_state(path, {"version": 1, "time_unix_s": 1e9, "users": failing()})
    assert json.loads(path.read_text())["users"] == entries  # the last good file stays
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]


@pytest.mark.parametrize("content, message", [(None, "no such file"), ("{", "not JSON \\(line 1"), ('{"version": 9}', "not a drfgov state")])
def test_state_read_errors_say_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "state.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(StateError, match=message):
        read_state(path)


def test_snapshot_round_trip_and_restore(tmp_path):
    host = SimHost(cores=2)
    user = host.add(1000, "alice", 1.0)
    path = tmp_path / "originals.json"
    target = Target(1000, Cgroup("/sys/fs/cgroup/user.slice/user-1000.slice"))
    save_snapshot(path, "sim", {1000: (target, ORIGINAL)})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    snap = load_snapshot(path)
    assert snap.backend == "sim" and snap.originals[1000] == (target, ORIGINAL)
    restored, failed = restore_snapshot(snap, SimBackend(host))
    assert restored == ["user-1000.slice"] and failed == {}
    assert user.limits == ORIGINAL


def test_snapshot_restore_skips_gone_slices_and_reports_refusals(tmp_path):
    host = SimHost(cores=2)
    host.add(1001, "bob", 1.0)
    host.fail_writes_for.add(1001)
    originals = {uid: (Target(uid, Cgroup(f"/sys/fs/cgroup/user.slice/user-{uid}.slice")), ORIGINAL) for uid in (1000, 1001)}
    save_snapshot(tmp_path / "o.json", "sim", originals)
    restored, failed = restore_snapshot(load_snapshot(tmp_path / "o.json"), SimBackend(host))
    assert restored == [] and list(failed) == [1001] and "refused" in failed[1001]


def test_missing_snapshot_is_none_and_a_broken_one_is_an_error(tmp_path):
    assert load_snapshot(tmp_path / "none.json") is None
    (tmp_path / "bad.json").write_text('{"version": 1, "backend": "x", "slices": {"1": {"cgroup": "/a"}}}')
    with pytest.raises(SnapshotError, match="bad.json: slices.1.cgroup: '/a' is not user.slice/user-1.slice"):
        load_snapshot(tmp_path / "bad.json")


def _doc(t, uids=(1000, 1001)):
    return {"time_unix_s": t, "users": [
        {"uid": u, "name": f"u{u}", "dominant_resource": "cpu", "dominant_share": 0.5, "weighted_share": 0.25,
         "weight": {"cpu": 2.0}, "usage": {"cpu": 1.0}, "demand": {"cpu": 1.0}, "allocation": {"cpu": 1.0},
         "limits": None} for u in uids]}


def test_history_records_at_most_every_interval_and_prunes_old_rows(tmp_path):
    history = History(tmp_path / "lib" / "history.db", retention_days=1, every_s=60, background=False)
    assert history.record(_doc(0.0))
    assert not history.record(_doc(30.0))  # too soon
    assert history.record(_doc(60.0))
    reader = HistoryReader(tmp_path / "lib" / "history.db")
    assert sum(len(s.t) for s in reader.series(0, 1e9).values()) == 4 and len(reader.series(0, 1e9, 1000)[1000].t) == 2
    day = 86400.0
    assert history.record(_doc(day + 3600.0 + 61, uids=(1000,)))  # prunes: rows older than one day go
    assert [list(s.t) for s in reader.series(0, 1e9).values()] == [[day + 3600.0 + 61]]
    reader.close()
    history.close()


def test_notifier_speaks_the_sd_notify_protocol(tmp_path, monkeypatch):
    address = str(tmp_path / "notify.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(address)
    server.settimeout(2)
    for key, value in {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "3000000", "WATCHDOG_PID": str(os.getpid())}.items():
        monkeypatch.setenv(key, value)
    notifier = Notifier()
    assert notifier.watchdog_period_s == 1.5
    notifier.ready("tick 1")
    notifier.watchdog()
    notifier.stopping("bye")
    got = [server.recv(4096).decode() for _ in range(3)]
    assert got == ["READY=1\nSTATUS=tick 1", "WATCHDOG=1", "STOPPING=1\nSTATUS=bye"]
    server.close()


def test_notifier_is_silent_outside_systemd(monkeypatch):
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        monkeypatch.delenv(key, raising=False)
    notifier = Notifier()
    assert not notifier.enabled and notifier.watchdog_period_s is None
    notifier.ready("x")  # nothing to send to, nothing raised
    monkeypatch.setenv("WATCHDOG_USEC", "1000")
    monkeypatch.setenv("WATCHDOG_PID", "1")  # the watchdog is someone else's
    assert Notifier().watchdog_period_s is None


@pytest.mark.parametrize("cgroup", ["/sys/fs/cgroup/system.slice/sshd.service", "/sys/fs/cgroup/user.slice/user-1001.slice",
                                    "relative/user.slice/user-1000.slice", "/sys/fs/cgroup/user.slice/../user.slice/user-1000.slice"])
def test_a_snapshot_entry_must_be_its_uids_own_slice(tmp_path, cgroup):
    """Restore writes as root where the snapshot says: only uid's user.slice/user-UID.slice."""
    path = tmp_path / "originals.json"
    path.write_text(json.dumps({"version": 1, "backend": "cgroupfs",
                                "slices": {"1000": {"cgroup": cgroup, "limits": ORIGINAL.to_json()}}}))
    with pytest.raises(SnapshotError, match="is not user.slice/user-1000.slice"):
        load_snapshot(path)


def test_history_is_root_s_alone_so_nobody_can_lock_it(tmp_path):
    """The audit's denial of service: uid 65534 read-locked byte 120 of history.db-shm (0644)
    and five failed ticks stopped the daemon. Now nobody else can even open the files."""
    history = History(tmp_path / "lib" / "history.db", retention_days=1, every_s=0)
    history.record({"time_unix_s": 1.0, "users": []})
    assert stat.S_IMODE((tmp_path / "lib").stat().st_mode) == 0o700
    for name in ("history.db", "history.db-wal", "history.db-shm"):
        assert stat.S_IMODE((tmp_path / "lib" / name).stat().st_mode) == 0o600, name
    history.close()
    if os.geteuid() == 0:
        import subprocess

        probe = "import sys\ntry:\n    open(sys.argv[1], 'rb')\nexcept PermissionError:\n    print('denied')\n"
        out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                              probe, str(tmp_path / "lib" / "history.db-shm")], capture_output=True, text=True)
        assert out.stdout.strip() == "denied", out.stderr


def test_history_refuses_a_directory_others_may_write(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o1777)
    with pytest.raises(PermissionError, match=rf"^history\.path: {shared}: world-writable \(mode 1777\)"):
        History(shared / "history.db", retention_days=1)


def test_history_refuses_a_directory_another_user_owns(tmp_path):
    """Mode 0700 but hers: root chmod-ed through her symlinks there, and SQLite created the
    database where her symlink pointed (the hostile-input audit of 2026-11-26)."""
    hers = tmp_path / "hers"
    hers.mkdir(mode=0o700)
    os.chown(hers, 65534, 65534)
    (hers / "history.db").symlink_to(tmp_path / "planted")
    with pytest.raises(PermissionError, match=rf"^history\.path: {hers}: owned by uid 65534"):
        History(hers / "history.db", retention_days=1)
    assert not (tmp_path / "planted").exists()


def test_one_instance_at_a_time_and_stale_temporaries_go(tmp_path):
    from governor.service.runtime import InstanceLock, LockHeld, remove_stale_temporaries

    first, second = InstanceLock(tmp_path), InstanceLock(tmp_path)
    assert second.holder() is None
    first.acquire()
    with pytest.raises(LockHeld, match=f"pid {os.getpid()}"):
        second.acquire()
    assert second.holder() == str(os.getpid()) and stat.S_IMODE(first.path.stat().st_mode) == 0o600
    first.release()
    second.acquire()
    second.release()
    (tmp_path / ".state.json.abcd1234").write_text("{torn")
    (tmp_path / ".state.json.keep").write_text("not ours")
    assert [p.name for p in remove_stale_temporaries(tmp_path / "state.json")] == [".state.json.abcd1234"]
    assert (tmp_path / ".state.json.keep").exists()


def test_the_loop_collects_garbage_once_a_minute_and_not_by_allocation_counts():
    """Issue 16: no automatic collection between pause and resume (a tick's objects hold no
    cycles; the collections allocations set off were 22% of a tick at 10,000 users), a full
    one when due, and the collector as it was afterwards."""
    import gc

    from governor.service.runtime import GC_EVERY_S, GarbageCollection

    now = [100.0]
    garbage = GarbageCollection(lambda: now[0])
    assert gc.isenabled()
    garbage.pause()
    try:
        assert not gc.isenabled()
        cycles = []
        for _ in range(1000):
            cycle = [None]
            cycle[0] = cycle
            cycles.append(cycle)
        del cycle, cycles
        assert garbage.collect_if_due() is None  # not yet due: the cycles wait
        now[0] += GC_EVERY_S
        assert garbage.collect_if_due() >= 1000
        assert garbage.collect_if_due() is None and garbage.due_s == now[0] + GC_EVERY_S
    finally:
        garbage.resume()
    assert gc.isenabled()



def test_state_json_is_never_kept_in_a_directory_another_user_owns_or_may_write(tmp_path):
    """She could replace state.json there with forged shares that everyone reads."""
    from governor.config.policy import policy_from_text
    from governor.service.daemon import trusted_state_directory
    from governor.service.hostsetup import SetupError

    hers = tmp_path / "hers"
    hers.mkdir(mode=0o755)
    os.chown(hers, 65534, 65534)
    with pytest.raises(SetupError, match=rf"state_path: {hers}: owned by uid 65534"):
        trusted_state_directory(policy_from_text(f"state_path: {hers}/state.json\n")[0])
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    with pytest.raises(SetupError, match=rf"state_path: {shared}: group-writable \(mode 0775\)"):
        trusted_state_directory(policy_from_text(f"state_path: {shared}/state.json\n")[0])
    trusted_state_directory(policy_from_text(f"state_path: {tmp_path}/new/state.json\n")[0])
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o755
