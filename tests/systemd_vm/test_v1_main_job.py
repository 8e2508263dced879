"""The main job on systemd 252 with the legacy hierarchy: systemd/drfgov.service as shipped
(``backend: auto``, so the systemd backend for v1) governing alice (weight 2) and bob (weight 1),
two CPU-bound workers each, on 2 CPUs. Their ``cpuacct.usage`` over 10 s, after five ticks, is
2:1 within ±10%; stopping the unit puts the slices back as systemd made them and leaves no
runtime drop-in behind.

The unit starts as at boot, before anyone logs in; the slices are made as a login makes them,
with systemd's defaults (``DefaultCPUAccounting=no`` on legacy: no user slice in the cpu
hierarchy until the governor turns accounting on).
"""

import json
import subprocess
from pathlib import Path

import pytest

from cgroups import CpuMax
from cgroups_v1.mounts import find_v1
from cgroups_v1.slice import V1Slice
from governor.enforce.cgroupfs_v1 import CgroupfsV1Backend
from governor.enforce.model import LimitSet, Target
from tests.systemd_vm.guest import cores_used_over, journal, sh, show_the_daemon_when_a_test_fails, state, wait_for  # noqa: F401 (autouse)

USERS = {"alice": 1011, "bob": 1012}
CPUACCT = Path("/sys/fs/cgroup/cpu,cpuacct/user.slice")
POLICY_FILE = Path("/etc/drfgov/drfgov.yaml")
POLICY = """\
interval_s: 1
reserve: {cpu_cores: 0, memory_bytes: 256MiB}
history: {every_s: 0}
weights:
  users: {alice: 2, bob: 1}
"""
BUSY = "while True: pass"
WORKLOADS = {f"{user}-cpu{i}": user for user in USERS for i in (1, 2)}
#: an unconfigured user slice on legacy, as systemd makes it once CPU accounting is on
SYSTEMD_DEFAULTS = LimitSet(CpuMax(None, 100000), 100, 0, None, None, {})


def limits(name: str) -> LimitSet:
    mounts = find_v1()
    return CgroupfsV1Backend(mounts).read(Target(USERS[name], V1Slice(mounts, f"user.slice/user-{USERS[name]}.slice")))


def usage_ns(name: str) -> int:
    return int((CPUACCT / f"user-{USERS[name]}.slice" / "cpuacct.usage").read_text())


@pytest.fixture(scope="module")
def host():
    for name, uid in USERS.items():
        subprocess.run(["useradd", "-u", str(uid), "-M", "-s", "/usr/sbin/nologin", name], check=False)
    POLICY_FILE.parent.mkdir(parents=True, exist_ok=True)
    POLICY_FILE.write_text(POLICY)
    yield
    sh("systemctl", "stop", "drfgov", *WORKLOADS, check=False)


def test_the_unit_governs_through_systemd_on_v1(host):
    """Started as at boot, with nobody logged in; then alice and bob log in (their services in
    their slices, as a login makes them): the governor finds them."""
    assert not list(Path("/sys/fs/cgroup/memory/user.slice").glob("user-*.slice")), "a user slice exists already"
    sh("systemctl", "start", "drfgov")
    assert sh("systemctl", "is-active", "drfgov").strip() == "active"
    for unit, user in WORKLOADS.items():
        sh("systemd-run", f"--unit={unit}", f"--uid={user}", f"--slice=user-{USERS[user]}.slice",
           "/usr/bin/python3", "-c", BUSY)
    print("\nright after login, user slices in cpu,cpuacct: "
          f"{sorted(p.name for p in CPUACCT.glob('user-*.slice')) if CPUACCT.is_dir() else 'none'}")
    wait_for(lambda: {u["name"] for u in state()["users"]} >= set(USERS), 60, "alice and bob in state.json")
    doc = state()
    print(f"\nbackend {doc['backend']}; " + "; ".join(l for l in journal().splitlines()[:6]))
    assert doc["backend"] == "systemd-v1" and doc["mode"] == "enforce"
    assert "Read-only file system" not in journal() and "Traceback" not in journal()


def test_alice_and_bob_get_cpu_in_their_weights_ratio(host):
    used = cores_used_over(USERS, lambda n: usage_ns(n) / 1e9)
    ratio = used["alice"] / used["bob"]
    shares = {n: (CPUACCT / f"user-{USERS[n]}.slice" / "cpu.shares").read_text().strip() for n in USERS}
    held = {n: sh("systemctl", "show", "-p", "CPUShares", "--value", f"user-{USERS[n]}.slice").strip() for n in USERS}
    print(f"\ncores used over 10 s (cpuacct.usage): {', '.join(f'{n} {c:.3f}' for n, c in used.items())}; "
          f"alice:bob = {ratio:.3f}; cpu.shares {shares}; systemd's CPUShares {held}")
    assert held == shares  # systemd holds what the file says: it wrote it
    assert 1.8 <= ratio <= 2.2


def test_stop_puts_the_slices_back_and_leaves_no_dropin(host):
    assert any(limits(n) != SYSTEMD_DEFAULTS for n in USERS), "the governor never changed a limit"
    sh("systemctl", "stop", "drfgov")
    after = {n: limits(n) for n in USERS}
    print(f"\nafter stop: {after}")
    assert after == {n: SYSTEMD_DEFAULTS for n in USERS}
    left = {n: sorted(p.name for p in Path(f"/run/systemd/system.control/user-{uid}.slice.d").glob("*"))
            for n, uid in USERS.items()}
    assert left == {n: [] for n in USERS}, left
    assert not list(Path("/run/systemd/system.control").glob("user-*.slice.d"))  # accounting's drop-ins too
    assert "runtime drop-ins kept" not in journal()


def test_doctor_finds_this_v1_host_governable_through_systemd():
    out = subprocess.run(["drfgov", "doctor", "--json"], capture_output=True, text=True, check=False)
    checks = {c["name"]: c for c in json.loads(out.stdout)["checks"]}
    print("\n" + "\n".join(f"{c['name']}: {c['status']}: {c['detail']}" for c in checks.values()))
    assert checks["cgroup interface"]["status"] == "ok" and checks["cgroup interface"]["detail"].startswith("v1:")
    assert checks["user.slice"]["status"] == "ok" and checks["systemd"]["status"] == "ok"
    assert checks["CPU accounting"]["status"] == "ok" and "DefaultCPUAccounting=no" in checks["CPU accounting"]["detail"]
