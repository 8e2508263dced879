"""The main job on a real systemd host: systemd/drfgov.service as shipped, governing real
``user-UID.slice`` units through the systemd backend.

alice runs two CPU-bound workers (weight 2), bob two (weight 1), carol a 600 MiB memory grower
and one CPU worker (weight 1), all at once, each in her own user slice made by systemd. The
tests run in file order against one governed host: the unit becomes ready; after five ticks
alice's and bob's CPU time (cpu.stat) is 2:1 within ±10%; ``drfgov shares --json`` matches the
cgroup files; carol is never OOM-killed; a bad reload keeps the last good policy; stopping the
unit, and killing it, both put every original limit back. Each limit written is a journal
entry with DRFGOV_* fields; the shipped unit refuses a metrics listener with one clear line
(no IP sockets), and with docs/fleet.md's drop-in the metrics are served on the loopback; the
cgroupfs backend writes and restores the slices' files under the unit's read-only /sys.
"""

import json
import subprocess
import time
from pathlib import Path

import pytest

from cgroups import Cgroup
from governor.enforce.cgroupfs import read_limit_set
from tests.systemd_vm.guest import STATE, cores_used_over, journal, sh, show_the_daemon_when_a_test_fails, state, wait_for  # noqa: F401 (autouse)

USERS = {"alice": 1001, "bob": 1002, "carol": 1003}
SLICES = Path("/sys/fs/cgroup/user.slice")
POLICY_FILE = Path("/etc/drfgov/drfgov.yaml")
POLICY = """\
interval_s: 1
reserve: {cpu_cores: 0, memory_bytes: 256MiB}
memory: {margin_bytes: 128MiB, high_step_bytes: 128MiB}
history: {every_s: 0}
weights:
  users: {alice: 2, bob: 1, carol: 1}
"""
BUSY = "while True: pass"
GROWER = """\
import os, time
held = []
while len(held) < 30:  # 30 × 20 MiB = 600 MiB, every page written
    held.append(bytearray(os.urandom(1)) * (20 << 20))
    time.sleep(0.2)
print("grown", flush=True)
while True:
    time.sleep(60)
"""
WORKLOADS = {"alice-cpu1": ("alice", BUSY), "alice-cpu2": ("alice", BUSY), "bob-cpu1": ("bob", BUSY),
             "bob-cpu2": ("bob", BUSY), "carol-cpu": ("carol", BUSY), "carol-mem": ("carol", GROWER)}


def slice_dir(name: str) -> Path:
    return SLICES / f"user-{USERS[name]}.slice"


def limits(name: str) -> dict:
    """Every managed knob of her slice, read from the cgroup files."""
    return read_limit_set(Cgroup(slice_dir(name))).to_json()


@pytest.fixture(scope="module")
def host():
    """Users, their workloads in their slices, the policy; the slices' original limits."""
    for name, uid in USERS.items():
        subprocess.run(["useradd", "-u", str(uid), "-M", "-s", "/usr/sbin/nologin", name], check=False)
    for unit, (user, code) in WORKLOADS.items():
        sh("systemd-run", f"--unit={unit}", f"--uid={user}", f"--slice=user-{USERS[user]}.slice",
           "/usr/bin/python3", "-c", code)
    wait_for(lambda: all(slice_dir(n).is_dir() for n in USERS), 30, "the user slices")
    wait_for(lambda: "grown" in sh("journalctl", "-u", "carol-mem", "-o", "cat", "--no-pager"), 120, "carol's 600 MiB")
    POLICY_FILE.parent.mkdir(parents=True, exist_ok=True)
    POLICY_FILE.write_text(POLICY)
    originals = {name: limits(name) for name in USERS}
    print(f"\noriginal limits: {json.dumps(originals)}")
    yield originals
    sh("systemctl", "stop", "drfgov", *WORKLOADS, check=False)


def test_the_unit_starts_and_reports_ready(host):
    sh("systemctl", "start", "drfgov")  # Type=notify: returns once READY=1 was sent
    assert sh("systemctl", "is-active", "drfgov").strip() == "active"
    status = sh("systemctl", "show", "-p", "StatusText", "--value", "drfgov")
    assert status.startswith("tick "), status
    doc = state()
    assert doc["backend"] == "systemd" and doc["mode"] == "enforce"
    assert {u["name"] for u in doc["users"]} >= set(USERS)
    assert oct(STATE.stat().st_mode & 0o777) == "0o644"


def test_each_limit_written_is_a_journal_entry_with_fields(host):
    wait_for(lambda: sh("journalctl", "-u", "drfgov", "DRFGOV_UID=1001", "-o", "json", "--no-pager").strip(), 30,
             "alice's limit changes in the journal")
    entries = [json.loads(line) for line in sh("journalctl", "-u", "drfgov", "DRFGOV_UID=1001", "-o", "json",
                                               "--no-pager").splitlines()]
    print("\n" + "\n".join(e["MESSAGE"] for e in entries[:6]))
    knobs = {e["DRFGOV_KNOB"] for e in entries}
    assert "cpu.weight" in knobs and all(e["DRFGOV_USER"] == "alice" and e["SYSLOG_IDENTIFIER"] == "drfgov"
                                         for e in entries)
    weight = [e for e in entries if e["DRFGOV_KNOB"] == "cpu.weight"][-1]
    assert weight["DRFGOV_VALUE"] == "200" and weight["MESSAGE"].startswith("alice (uid 1001): set cpu.weight 200: ")
    assert weight["PRIORITY"] == "6"


def cpu_usec(name: str) -> int:
    return Cgroup(slice_dir(name)).cpu_stat().usage_usec


def test_alice_and_bob_get_cpu_in_their_weights_ratio(host):
    used = cores_used_over(USERS, lambda n: cpu_usec(n) / 1e6)
    ratio = used["alice"] / used["bob"]
    print(f"\ncores used over 10 s: {', '.join(f'{n} {c:.3f}' for n, c in used.items())}; alice:bob = {ratio:.3f}")
    shares = {u["name"]: u for u in state()["users"]}
    print("allocations: " + ", ".join(f"{n} {shares[n]['allocation']['cpu']:.3f} cores" for n in USERS))
    assert 1.8 <= ratio <= 2.2


def test_shares_json_matches_the_cgroup_files(host):
    for _ in range(10):  # the daemon writes a tick's limits before it publishes the tick: a
        # reading of the files between the two is the next tick's, shares' the last one's
        doc = json.loads(sh("drfgov", "shares", "--json"))
        files = {name: limits(name) for name in USERS}
        by_name = {u["name"]: u for u in doc["users"]}
        if state()["tick"] == doc["tick"] and all(files[n] == by_name[n]["limits"] for n in USERS):
            break
        time.sleep(1.0)
    for name in USERS:
        planned = by_name[name]["limits"]
        assert files[name] == planned, f"{name}: files {files[name]} != shares {planned}"
    assert by_name["alice"]["limits"]["cpu.weight"] == 2 * by_name["bob"]["limits"]["cpu.weight"]


def test_explain_and_the_shares_table_run_for_any_user(host):
    explained = subprocess.run(["setpriv", "--reuid=1002", "--regid=1002", "--clear-groups", "drfgov", "explain", "alice"],
                               capture_output=True, text=True)
    print("\n$ drfgov explain alice   # as bob\n" + explained.stdout + explained.stderr)
    assert explained.returncode == 0 and "Dominant resource: cpu" in explained.stdout
    assert "cpu.weight = 200" in explained.stdout
    table = sh("drfgov", "shares")
    print("$ drfgov shares\n" + table)
    assert all(name in table for name in USERS)


def status_tick() -> int:
    """The daemon's latest tick, from its sd_notify STATUS ("tick N: ...")."""
    status = sh("systemctl", "show", "-p", "StatusText", "--value", "drfgov")
    return int(status.split(":", 1)[0].removeprefix("tick "))


def test_state_json_readers_are_watched_under_the_shipped_hardening(host):
    """Issue 16: the daemon writes state.json every tick only while someone reads it, watching
    its opens with inotify — which the unit's sandbox (SystemCallFilter=@system-service,
    ProtectSystem=strict) must allow, or it falls back to every tick with a warning. A read by
    an unprivileged user gets the latest tick."""
    log = journal()
    assert "cannot be watched" not in log and "watching its readers failed" not in log, log[-2000:]
    before = status_tick()  # the daemon's tick from systemd, not from the file (a read of it is a request)
    out = subprocess.run(["setpriv", "--reuid=1002", "--regid=1002", "--clear-groups", "drfgov", "shares", "--json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    after = status_tick()
    doc = json.loads(out.stdout)
    print(f"\nshares as bob: tick {doc['tick']}; the daemon's was {before} before the command, {after} after")
    assert before <= doc["tick"] <= after


def test_carol_is_never_oom_killed(host):
    events = Cgroup(slice_dir("carol")).memory_events()
    current = Cgroup(slice_dir("carol")).memory_current()
    print(f"\ncarol: memory.current {current / 2**20:.0f} MiB, memory.events {events}")
    assert events.oom_kill == 0 and events.oom == 0
    assert sh("systemctl", "is-active", "carol-mem", check=False).strip() == "active"
    assert current >= 550 * 2**20


def test_a_bad_reload_keeps_the_last_good_policy(host):
    POLICY_FILE.write_text(POLICY.replace("alice: 2", "alice: -2"))
    sh("systemctl", "reload", "drfgov")
    tick = state()["tick"]
    wait_for(lambda: state()["tick"] >= tick + 2, 30, "ticks after the reload")
    assert sh("systemctl", "is-active", "drfgov").strip() == "active"
    assert "reload failed, keeping the last good policy" in journal()
    assert {u["name"]: u["weight"]["cpu"] for u in state()["users"]}["alice"] == 2.0
    POLICY_FILE.write_text(POLICY)


METRICS_POLICY = POLICY + 'metrics: {listen: "127.0.0.1:9798"}\n'
DROP_IN = Path("/run/systemd/system/drfgov.service.d/metrics.conf")


def fleet_drop_in() -> str:
    """The ``[Service]`` drop-in docs/fleet.md gives for a metrics listener."""
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "fleet.md").read_text()
    (block,) = re.findall(r"```ini\n(.*?)```", page, re.S)
    return block


def test_the_shipped_unit_refuses_a_metrics_listener_with_one_line(host):
    POLICY_FILE.write_text(METRICS_POLICY)
    restarted = subprocess.run(["systemctl", "restart", "drfgov"], capture_output=True, text=True)
    assert restarted.returncode != 0
    sh("systemctl", "stop", "drfgov", check=False)
    sh("systemctl", "reset-failed", "drfgov", check=False)
    assert "metrics.listen: cannot listen on 127.0.0.1:9798: Address family not supported by protocol" in journal()
    assert "Traceback" not in journal()


def test_with_the_fleet_drop_in_the_metrics_are_served_on_the_loopback(host):
    import urllib.request

    DROP_IN.parent.mkdir(parents=True, exist_ok=True)
    DROP_IN.write_text(fleet_drop_in())
    sh("systemctl", "daemon-reload")
    try:
        sh("systemctl", "start", "drfgov")
        # her share series from her first measured tick, the second (at first sight she has no interval:
        # her weight is published, her share is not)
        wait_for(lambda: b'drfgov_user_allocation_ratio{resource="cpu",uid="1001",user="alice"}'
                 in urllib.request.urlopen("http://127.0.0.1:9798/metrics", timeout=5).read(), 30, "alice's series")
        body = urllib.request.urlopen("http://127.0.0.1:9798/metrics", timeout=5).read().decode()
        print("\n" + "\n".join(line for line in body.splitlines() if 'user="alice"' in line)[:2000])
        assert 'drfgov_user_weight{kind="cpu",uid="1001",user="alice"} 2.0' in body
        assert "process_resident_memory_bytes" in body
    finally:
        sh("systemctl", "stop", "drfgov", check=False)
        DROP_IN.unlink()
        sh("systemctl", "daemon-reload")
        POLICY_FILE.write_text(POLICY)
        sh("systemctl", "start", "drfgov")
        wait_for(lambda: any(limits(n) != host[n] for n in USERS), 60, "limits written again (the next test stops it)")


def test_stop_restores_every_original_limit(host):
    assert any(limits(n) != host[n] for n in USERS), "the governor never changed a limit"
    sh("systemctl", "stop", "drfgov")
    after = {name: limits(name) for name in USERS}
    assert after == host
    assert "stopped after" in journal()


def test_a_killed_daemon_is_restored_by_exec_stop_post(host):
    sh("systemctl", "start", "drfgov")
    wait_for(lambda: any(limits(n) != host[n] for n in USERS), 60, "limits written")
    restores = journal().count("restored the original limits of")
    sh("systemctl", "kill", "-s", "SIGKILL", "drfgov")
    wait_for(lambda: journal().count("restored the original limits of") > restores, 60, "ExecStopPost's restore")
    assert {name: limits(name) for name in USERS} == host  # before Restart= brings it back (RestartSec=5)
    sh("systemctl", "stop", "drfgov")
    assert {name: limits(name) for name in USERS} == host


def test_an_admins_set_property_while_it_governs_is_left_at_stop(host):
    """``systemctl set-property`` on a governed slice while the unit runs (through the systemd
    backend): taken as bob's own limit, never lifted, left at stop (and put back by hand)."""
    sh("systemctl", "start", "drfgov")
    wait_for(lambda: limits("bob")["cpu.max"] != host["bob"]["cpu.max"], 60, "bob's cpu.max written")
    sh("systemctl", "set-property", "--runtime", f"user-{USERS['bob']}.slice", "CPUQuota=30%")
    try:
        tick = state()["tick"]
        wait_for(lambda: state()["tick"] >= tick + 5, 60, "five more ticks")
        assert limits("bob")["cpu.max"] == "30000 100000"
        sh("systemctl", "stop", "drfgov")
        assert limits("bob")["cpu.max"] == "30000 100000"  # hers, not the "max" from before the start
        assert {n: limits(n) for n in ("alice", "carol")} == {n: host[n] for n in ("alice", "carol")}
        assert "user-1002.slice: cpu.max is 30000 100000" in journal()
    finally:
        sh("systemctl", "stop", "drfgov", check=False)
        sh("systemctl", "set-property", "--runtime", f"user-{USERS['bob']}.slice", "CPUQuota=")
    assert {name: limits(name) for name in USERS} == host


def test_an_admins_echo_into_a_governed_slices_file_holds_under_systemd(host):
    """``echo … > cpu.max`` under the systemd backend: systemd writes every knob of a controller
    from its unit properties whenever one of them is set (src/core/cgroup.c), so the governor's
    next cpu.weight write would have put its own old quota back over hers — unless the value
    taken is written back as her property (:meth:`Governor._take_changes_by_others`). A reload
    that changes alice's weight makes that cpu.weight write due."""
    sh("systemctl", "start", "drfgov")
    try:
        wait_for(lambda: limits("alice")["cpu.max"] != host["alice"]["cpu.max"], 60, "alice's cpu.max written")
        # after that tick's writes: one made while the governor writes to her slice is not seen
        # (her cpu.weight, set after her cpu.max, has systemd write the quota it holds)
        tick = state()["tick"]
        wait_for(lambda: state()["tick"] >= tick + 2, 60, "two more ticks")
        (slice_dir("alice") / "cpu.max").write_text("40000 100000")  # the admin, in the file
        POLICY_FILE.write_text(POLICY.replace("alice: 2", "alice: 3"))
        sh("systemctl", "reload", "drfgov")
        wait_for(lambda: limits("alice")["cpu.weight"] == 300, 60, "alice's new cpu.weight written")
        tick = state()["tick"]
        wait_for(lambda: state()["tick"] >= tick + 3, 60, "three more ticks")
        assert limits("alice")["cpu.max"] == "40000 100000"
        sh("systemctl", "stop", "drfgov")
        assert limits("alice")["cpu.max"] == "40000 100000"
        assert "user-1001.slice: cpu.max is 40000 100000" in journal()
    finally:
        sh("systemctl", "stop", "drfgov", check=False)
        POLICY_FILE.write_text(POLICY)
        sh("systemctl", "set-property", "--runtime", f"user-{USERS['alice']}.slice", "CPUQuota=")
    assert {name: limits(name) for name in USERS} == host


def test_the_cgroupfs_backend_writes_the_slices_under_the_shipped_hardening(host):
    """ProtectSystem=strict and ProtectKernelTunables=yes make /sys read-only; the unit's
    ReadWritePaths=/sys/fs/cgroup must still let the cgroupfs backend write (and restore)."""
    POLICY_FILE.write_text(POLICY + "backend: cgroupfs\n")
    try:
        sh("systemctl", "start", "drfgov")
        wait_for(lambda: state()["backend"] == "cgroupfs" and any(limits(n) != host[n] for n in USERS), 60,
                 "limits written through the cgroup files")
        assert "Read-only file system" not in journal()
    finally:
        sh("systemctl", "stop", "drfgov", check=False)
        POLICY_FILE.write_text(POLICY)
    assert {name: limits(name) for name in USERS} == host


def test_doctor_finds_this_host_governable():
    out = subprocess.run(["drfgov", "doctor", "--json"], capture_output=True, text=True)
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    print("\n" + "\n".join(f"{c['name']}: {c['status']}: {c['detail']}" for c in checks.values()))
    assert out.returncode == 0
    assert {checks[n]["status"] for n in ("cgroup v2", "user.slice", "PSI", "systemd")} == {"ok"}
    assert checks["disks"]["status"] == "warn" and "calibrate io" in checks["disks"]["fix"]
