"""The installed ``drfgov run`` governing two users through this machine's real cgroup v1 files.

* Weights 2:1, each user running 2 CPU-bound processes (4 on this 2-core machine, with other
  load on it too): the ratio of their ``cpuacct.usage`` over a window after the governor has
  settled is 2 ± 10%. Ratios, not rates: the machine is shared.
* An admin's own limits (a cfs quota, a memory limit) are never lifted, and at SIGTERM every
  file the governor may write (cfs quota/period, shares, memory limit and soft limit, blkio
  throttle rules) reads exactly as before it started — an odd ``cpu.shares`` 1000 included.
* A memory grower, with memory contended by the policy's reserve, is never OOM-killed by a
  limit we wrote: memory.limit_in_bytes stays above memory.usage_in_bytes, memory.failcnt and
  oom_control ``oom_kill`` stay 0, the process lives and reaches its size.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from cgroups_v1.values import MEMORY_UNLIMITED_BYTES
from tests.v1host.daemon import Daemon, write_policy
from tests.v1host.workers import BUSY, GROWER, start_as

OUT = Path(__file__).resolve().parents[2] / "out" / "v1host"
#: no passwd entries: the governor names them uid59001, uid59002. min_uid 59000 leaves out this
#: machine's own users.
HEAVY, LIGHT = 59001, 59002
MIN_UID = 59000
SETTLE_S, WINDOW_S = 12.0, 15.0


def _usage_ns(tree, uid: int) -> int:
    return int((tree.slice_dirs(uid)["cpuacct"] / "cpuacct.usage").read_text())


def _stop_all(procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


def test_two_users_weighted_2_to_1_get_cpu_2_to_1_and_every_file_comes_back(tree, tmp_path):
    heavy, light = tree.add_user(HEAVY), tree.add_user(LIGHT)
    # the admin's own limits: a 1.5-core quota and an 8 GiB limit for HEAVY, odd shares for LIGHT
    (heavy["cpu"] / "cpu.cfs_quota_us").write_text("150000")
    (heavy["memory"] / "memory.limit_in_bytes").write_text(str(8 << 30))
    (light["cpu"] / "cpu.shares").write_text("1000")
    before = {uid: tree.governed_files(uid) for uid in (HEAVY, LIGHT)}
    workers = [start_as(uid, dirs, BUSY) for uid, dirs in ((HEAVY, heavy), (LIGHT, light)) for _ in range(2)]
    policy = write_policy(tmp_path, tree.parent, "interval_s: 1.0\nenforce: [cpu, memory]\n"
                          f"weights: {{users: {{uid{HEAVY}: 2, uid{LIGHT}: 1}}}}\ngoverned: {{min_uid: {MIN_UID}}}\n"
                          "reserve: {cpu_cores: 0, memory_bytes: 0}\n")
    daemon = Daemon(tmp_path, policy)
    during: list[dict] = []
    try:
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            time.sleep(0.5)
            assert daemon.alive(), daemon.output()
            during.append({uid: tree.governed_files(uid) for uid in (HEAVY, LIGHT)})
        start = {uid: _usage_ns(tree, uid) for uid in (HEAVY, LIGHT)}
        t0 = time.monotonic()
        deadline = t0 + WINDOW_S
        while time.monotonic() < deadline:
            time.sleep(0.5)
            during.append({uid: tree.governed_files(uid) for uid in (HEAVY, LIGHT)})
        end = {uid: _usage_ns(tree, uid) for uid in (HEAVY, LIGHT)}
        elapsed_s = time.monotonic() - t0
        assert all(w.poll() is None for w in workers)
    finally:
        code = daemon.stop()
        _stop_all(workers)
    log = daemon.output()
    assert code == 0, log
    assert "cgroup v1 slices under" in log and "cgroupfs-v1" in log, log
    cores = {uid: (end[uid] - start[uid]) / 1e9 / elapsed_s for uid in (HEAVY, LIGHT)}
    ratio = cores[HEAVY] / cores[LIGHT]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "cpu_ratio.json").write_text(json.dumps(
        {"window_s": round(elapsed_s, 2), "settle_s": SETTLE_S, "cores": {str(k): round(v, 4) for k, v in cores.items()},
         "ratio": round(ratio, 4), "weights": {f"uid{HEAVY}": 2, f"uid{LIGHT}": 1}}, indent=1) + "\n")
    print(f"\ncpuacct.usage over {elapsed_s:.1f} s after {SETTLE_S:g} s settling: uid{HEAVY} {cores[HEAVY]:.3f} cores, "
          f"uid{LIGHT} {cores[LIGHT]:.3f} cores, ratio {ratio:.3f} (weights 2:1)")
    assert 1.8 <= ratio <= 2.2, (cores, ratio)
    # the governor did write (so the restore below is not vacuous) ...
    shares_seen = {d[HEAVY]["cpu/cpu.shares"].strip() for d in during}
    assert "2048" in shares_seen, shares_seen
    assert any(d[LIGHT]["cpu/cpu.shares"].strip() != "1000" for d in during)
    # ... never lifted the admin's own limits ...
    for d in during:
        quota = int(d[HEAVY]["cpu/cpu.cfs_quota_us"])
        assert 0 < quota <= 150000, d[HEAVY]
        limit = int(d[HEAVY]["memory/memory.limit_in_bytes"])
        assert limit <= 8 << 30, d[HEAVY]
    # ... and put every file back exactly at SIGTERM
    after = {uid: tree.governed_files(uid) for uid in (HEAVY, LIGHT)}
    assert after == before
    assert not (tmp_path / "run" / "originals.json").exists()


def test_a_memory_grower_is_never_oom_killed_by_a_limit_we_wrote(tree, tmp_path):
    grower_uid, holder_uid = MIN_UID + 3, MIN_UID + 4
    grower, holder = tree.add_user(grower_uid), tree.add_user(holder_uid)
    before = {uid: tree.governed_files(uid) for uid in (grower_uid, holder_uid)}
    total = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    # memory is contended: the reserve leaves the users 1 GiB, and they will hold ~900 MiB
    policy = write_policy(tmp_path, tree.parent, f"interval_s: 1.0\nenforce: [memory]\ngoverned: {{min_uid: {MIN_UID}}}\n"
                          f"reserve: {{cpu_cores: 0, memory_bytes: {total - (1 << 30)}}}\n"
                          "memory: {margin_bytes: 256MiB}\n")
    holding = start_as(holder_uid, holder, GROWER, "100", "300", "0.1")
    daemon = Daemon(tmp_path, policy)
    growing = None
    closest = None  # smallest limit − usage seen for the grower while a limit was in force
    limited = 0
    try:
        time.sleep(3)  # the governor has seen both before the grower starts
        growing = start_as(grower_uid, grower, GROWER, "16", "640", "0.4")  # 40 MiB/s to 640 MiB
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            assert daemon.alive(), daemon.output()
            mem = grower["memory"]
            usage = int((mem / "memory.usage_in_bytes").read_text())
            limit = int((mem / "memory.limit_in_bytes").read_text())
            if limit < MEMORY_UNLIMITED_BYTES:
                limited += 1
                closest = limit - usage if closest is None else min(closest, limit - usage)
            assert growing.poll() is None, "the grower died"
            time.sleep(0.1)
        oom = dict(line.split() for line in (grower["memory"] / "memory.oom_control").read_text().splitlines())
        failcnt = int((grower["memory"] / "memory.failcnt").read_text())
        alive = growing.poll() is None
    finally:
        code = daemon.stop()
        procs = [p for p in (growing, holding) if p is not None]
        for p in procs:
            p.kill()
        reached = [p.communicate()[0] for p in procs]
    log = daemon.output()
    assert code == 0, log
    print(f"\ngrower: memory.limit_in_bytes in force at {limited} of the samples, closest limit − usage "
          f"{(closest or 0) / 2**20:.0f} MiB; failcnt {failcnt}, oom_kill {oom.get('oom_kill')}")
    assert limited > 0, "memory was never limited: the test proved nothing (" + log[-2000:] + ")"
    assert closest is not None and closest > 0
    assert failcnt == 0 and oom.get("oom_kill") == "0" and oom.get("under_oom") == "0"
    assert alive and "reached 640" in reached[0]
    after = {uid: tree.governed_files(uid) for uid in (grower_uid, holder_uid)}
    assert after == before
