"""A real mixed host: the guest's cpu controller moved from cgroup v2 to a v1 hierarchy
(``cpu,cpuacct``), memory and io left in cgroup v2, and the installed ``drfgov run`` (backend
cgroupfs) governing two users across both.

How the host is mixed (Documentation/admin-guide/cgroup-v2.rst "Mounting"; the kernel's
rebind_subsystems): a controller can be bound to a v1 hierarchy only while no v2 cgroup below
the root uses it, so ``cpu`` is disabled in every ``cgroup.subtree_control`` that has it,
deepest first, then ``mount -t cgroup -o cpu,cpuacct``. Afterwards everything is put back
(v1 cgroups removed, the hierarchy unmounted, cpu re-enabled where it was): the file is named
to run last in tier 2, and leaves the guest as it found it for any test after it.

* Weights 2:1, two CPU-bound processes each: the ratio of their ``cpuacct.usage`` (v1) over a
  window after settling is 2 ± 10%; the governor's ``cpu.cfs_quota_us`` and ``cpu.shares``
  land in the v1 files.
* With memory made contended (the policy's reserve leaves the users ~250 MiB; a grower in the
  light user's slices), ``memory.high``/``memory.max`` land in her v2 files, and memory.max
  never below memory.current.
* At SIGTERM every file it may write, on both sides, reads as before it started.
"""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest

from cgroups import Cgroup
from cgroups_v1.mounts import V1Mounts
from governor.service.cgroupkind import choose
from tests.v1host.daemon import Daemon, write_policy
from tests.vm.conftest import remove_dir
from tests.v1host.hierarchy import SliceTree
from tests.v1host.workers import BUSY, GROWER, start_as

ROOT = Path("/sys/fs/cgroup")
V1_CPU = Path("/tmp/drfgov-mixed-cpu")
#: min_uid 59000 leaves out the guest's own users; the default max_uid (60000) keeps these in
HEAVY, LIGHT, MIN_UID = 59001, 59002, 59000
SETTLE_S, WINDOW_S = 12.0, 15.0
V2_FILES = ("memory.low", "memory.high", "memory.max")
ROOM_BYTES = 250 << 20


def _cgroups_with(controller: str) -> list[Path]:
    """v2 cgroups whose cgroup.subtree_control enables ``controller``, deepest first."""
    found = []
    for dirpath, _, _ in os.walk(ROOT):
        try:
            if controller in (Path(dirpath) / "cgroup.subtree_control").read_text().split():
                found.append(Path(dirpath))
        except OSError:
            pass
    return sorted(found, key=lambda p: -len(p.parts))


def _retry(action, what: str, timeout_s: float = 30.0, also: tuple[int, ...] = ()) -> None:
    """``action()`` until it stops failing with EBUSY (or an errno of ``also``): a controller's
    cgroups, and an unmounted v1 hierarchy's root, die asynchronously."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            action()
            return
        except (OSError, subprocess.CalledProcessError) as exc:
            busy = getattr(exc, "errno", None) in (errno.EBUSY, *also) or \
                "busy" in str(getattr(exc, "stderr", "")).lower()
            if not busy or time.monotonic() > deadline:
                raise AssertionError(f"{what}: {exc} {getattr(exc, 'stderr', '')}") from None
            time.sleep(0.2)


@pytest.fixture(scope="module")
def mixed():
    """cpu (with cpuacct) on a v1 hierarchy at :data:`V1_CPU`, memory and io in cgroup v2."""
    enabled = _cgroups_with("cpu")
    for cg in enabled:  # deepest first: a parent's cpu cannot go while a child enables it
        (cg / "cgroup.subtree_control").write_text("-cpu")
    V1_CPU.mkdir(exist_ok=True)
    _retry(lambda: subprocess.run(["mount", "-t", "cgroup", "-o", "cpu,cpuacct", "drfgov-mixed", str(V1_CPU)],
                                  check=True, capture_output=True, text=True), "mount -o cpu,cpuacct")
    for cg in (ROOT, ROOT / "user.slice"):
        cg.mkdir(exist_ok=True)
        Cgroup(cg).enable_controllers(["memory", "io"])
    try:
        yield V1Mounts({"cpu": V1_CPU, "cpuacct": V1_CPU})
    finally:
        _retry(lambda: subprocess.run(["umount", str(V1_CPU)], check=True, capture_output=True, text=True),
               "umount the v1 cpu hierarchy")
        for cg in reversed(enabled):  # shallowest first
            if cg.exists():
                # ENOENT: cpu is not back in v2 until the unmounted v1 root has been destroyed
                _retry(lambda cg=cg: (cg / "cgroup.subtree_control").write_text("+cpu"), f"re-enable cpu in {cg}",
                       also=(errno.ENOENT,))
        assert "cpu" in (ROOT / "cgroup.controllers").read_text().split(), "cpu did not come back to cgroup v2"


@pytest.fixture
def users(mixed):
    """Both users' slices: in the v1 cpu hierarchy (a SliceTree) and in cgroup v2."""
    tree = SliceTree(mixed)
    v2 = {uid: ROOT / "user.slice" / f"user-{uid}.slice" for uid in (HEAVY, LIGHT)}
    try:
        v1 = {uid: tree.add_user(uid)["cpu"] for uid in (HEAVY, LIGHT)}
        for path in v2.values():
            path.mkdir()
        yield tree, v1, v2
    finally:
        tree.cleanup()  # kills every process in the v1 tree: they are the same as in the v2 slices
        for path in v2.values():
            remove_dir(path)


def _files(v1: Path, v2: Path) -> dict[str, str]:
    out = {f"v1/{n}": (v1 / n).read_text() for n in ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares")}
    out.update({f"v2/{n}": (v2 / n).read_text() for n in V2_FILES})
    return out


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/meminfo")


def test_the_installed_governor_splits_cpu_on_v1_and_memory_on_v2(users, tmp_path, out_dir):
    tree, v1, v2 = users
    kind = choose()
    assert kind.kind == "mixed", kind.reason
    assert kind.homes == {"cpu": "v1", "memory": "v2", "io": "v2"}
    before = {uid: _files(v1[uid], v2[uid]) for uid in (HEAVY, LIGHT)}
    workers = [start_as(uid, {"cpu": v1[uid], "memory": v2[uid]}, BUSY) for uid in (HEAVY, LIGHT) for _ in range(2)]
    reserve = max(0, _meminfo("MemAvailable") - ROOM_BYTES)
    policy = write_policy(tmp_path, tree.parent, "interval_s: 1.0\nbackend: cgroupfs\nenforce: [cpu, memory]\n"
                          f"weights: {{users: {{uid{HEAVY}: 2, uid{LIGHT}: 1}}}}\ngoverned: {{min_uid: {MIN_UID}}}\n"
                          f"reserve: {{cpu_cores: 0, memory_bytes: {reserve}}}\nmemory: {{margin_bytes: 64MiB}}\n")
    daemon = Daemon(tmp_path, policy)
    t_start = time.monotonic()
    during: list[dict] = []
    memory_seen: list[tuple[int, int | None, int | None]] = []  # (current, high, max) of LIGHT's v2 slice
    grower = None
    try:
        for _ in range(720):  # its first tick (TCG: Python starts slowly)
            if daemon.state_doc() is not None or not daemon.alive():
                break
            time.sleep(0.25)
        assert daemon.alive() and daemon.state_doc() is not None, daemon.output()
        started_s = time.monotonic() - t_start
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            time.sleep(0.5)
            during.append({uid: _files(v1[uid], v2[uid]) for uid in (HEAVY, LIGHT)})
        start = {uid: int((v1[uid] / "cpuacct.usage").read_text()) for uid in (HEAVY, LIGHT)}
        t0 = time.monotonic()
        while time.monotonic() < t0 + WINDOW_S:
            time.sleep(0.5)
            during.append({uid: _files(v1[uid], v2[uid]) for uid in (HEAVY, LIGHT)})
        end = {uid: int((v1[uid] / "cpuacct.usage").read_text()) for uid in (HEAVY, LIGHT)}
        elapsed_s = time.monotonic() - t0
        assert all(w.poll() is None for w in workers)
        # memory contended: LIGHT grows past the room the reserve leaves the users
        grower = start_as(LIGHT, {"cpu": v1[LIGHT], "memory": v2[LIGHT]}, GROWER, "16", str(320), "0.25")
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            if (any(h is not None for _, h, _ in memory_seen) and any(m is not None for _, _, m in memory_seen)
                    and deadline > time.monotonic() + 4):
                deadline = time.monotonic() + 4  # both limits seen: a few more samples, then stop
            assert daemon.alive(), daemon.output()
            light = Cgroup(v2[LIGHT])
            memory_seen.append((light.memory_current(), light.memory_high(), light.memory_max()))
            assert grower.poll() is None, "the grower died"
            time.sleep(0.25)
        during.append({uid: _files(v1[uid], v2[uid]) for uid in (HEAVY, LIGHT)})
        oom_kills = Cgroup(v2[LIGHT]).memory_events().oom_kill
    finally:
        code = daemon.stop(timeout_s=120)
        for p in workers + ([grower] if grower else []):
            p.kill()
            p.wait()
    log = daemon.output()
    assert code == 0, log
    cores = {uid: (end[uid] - start[uid]) / 1e9 / elapsed_s for uid in (HEAVY, LIGHT)}
    ratio = cores[HEAVY] / cores[LIGHT]
    limited = [(c, h, m) for c, h, m in memory_seen if h is not None or m is not None]
    with_max = [(c, h, m) for c, h, m in limited if m is not None]
    summary = (f"mixed host (cpu on v1, memory and io on v2): cpuacct.usage over {elapsed_s:.1f} s after "
               f"{SETTLE_S:g} s settling: uid{HEAVY} {cores[HEAVY]:.3f} cores, uid{LIGHT} {cores[LIGHT]:.3f} cores, "
               f"ratio {ratio:.3f} (weights 2:1); her v2 memory.high or memory.max set at {len(limited)} of "
               f"{len(memory_seen)} samples, memory.max at {len(with_max)}, closest memory.max − memory.current "
               f"{min((m - c for c, _, m in with_max), default=-1) / 2**20:.0f} MiB; daemon's first state after "
               f"{started_s:.0f} s")
    print("\n" + summary)
    (out_dir / "mixed_host.txt").write_text(summary + "\n")
    first_line = next(line for line in log.splitlines() if "measuring" in line)
    assert "cpu on cgroup v1 (/tmp/drfgov-mixed-cpu)" in first_line and "memory and io on cgroup v2" in first_line, log
    assert "cgroupfs-mixed" in first_line, first_line
    assert 1.8 <= ratio <= 2.2, (cores, ratio)
    # cpu knobs went to the v1 files ...
    assert any(d[HEAVY]["v1/cpu.shares"].strip() == "2048" for d in during), during[-1]
    assert any(int(d[uid]["v1/cpu.cfs_quota_us"]) > 0 for d in during for uid in (HEAVY, LIGHT)), during[-1]
    # ... memory's to the v2 files, never below what the kernel holds
    assert any(h is not None for _, h, _ in limited) and with_max, \
        "memory.high and memory.max were not both set: the memory half proved nothing (" + log[-3000:] + ")"
    assert all(m > c for c, _, m in with_max), with_max
    assert oom_kills == 0
    # every file back exactly at SIGTERM
    assert {uid: _files(v1[uid], v2[uid]) for uid in (HEAVY, LIGHT)} == before
    assert not (tmp_path / "run" / "originals.json").exists()
