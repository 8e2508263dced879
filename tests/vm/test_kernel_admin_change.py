"""An admin's limit written by hand into a governed slice while the installed ``drfgov run``
governs it, on the real kernel (cgroupfs backend): never lifted while it runs, left at
SIGTERM (:meth:`governor.control.loop.Governor._take_changes_by_others`).

alice and bob run two busy loops each on the guest's 2 CPUs, so both get the governor's
``cpu.max``. The admin then writes alice's ``cpu.max`` (0.3 core) and a ``memory.max`` that is
not a whole number of pages (the kernel reads it back rounded down), and bob stops: alice's
plan rises to what she wants, the write that would lift the admin's cap is due, and the
change is found before it. Before, the governor wrote its own cap over it, and SIGTERM put
back ``max``.
"""

import signal
import subprocess
import time
from pathlib import Path

from cgroups import Cgroup
from tests.cli.conftest import REPO, _installed_drfgov, cli_env
from tests.vm.conftest import daemon_policy, kill_all, remove_dir, spawn_in, wait_for_ticks

ROOT = Path("/sys/fs/cgroup")
ALICE, BOB = 59_000, 59_001  # no passwd entries; governed by default (uids 1000 … 60000)
ADMIN_CPU_MAX = "30000 100000"
ADMIN_MEMORY_MAX_BYTES = 512 * 2**20 + 1  # read back as 512 MiB: the kernel keeps whole pages


def quota_usec(path: Path) -> int | None:
    quota = (path / "cpu.max").read_text().split()[0]
    return None if quota == "max" else int(quota)


def test_an_admins_limit_written_while_governed_is_never_lifted_and_left_at_stop(tmp_path):
    Cgroup(ROOT).enable_controllers(["cpu", "memory", "io"])
    user_slice = ROOT / "user.slice"
    user_slice.mkdir(exist_ok=True)
    Cgroup(user_slice).enable_controllers(["cpu", "memory", "io"])
    alice, bob = (user_slice / f"user-{uid}.slice" for uid in (ALICE, BOB))
    for path in (alice, bob):
        path.mkdir(exist_ok=True)
    loops = {path: [spawn_in(Cgroup(path), "sh", "-c", "while :; do :; done") for _ in range(2)] for path in (alice, bob)}
    policy = tmp_path / "drfgov.yaml"
    policy.write_text(daemon_policy(2, tmp_path))
    log_path, prom = tmp_path / "drfgov.log", tmp_path / "drfgov.prom"
    log = open(log_path, "w")
    daemon = subprocess.Popen([_installed_drfgov(), "run", "--config", str(policy)], cwd=REPO,
                              env=cli_env(tmp_path / "runtime"), stdout=log, stderr=subprocess.STDOUT)
    seen_quota_usec = []
    try:
        deadline = time.monotonic() + 300
        while quota_usec(alice) is None or quota_usec(bob) is None:  # both capped by the governor
            assert daemon.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.5)
        (alice / "cpu.max").write_text(ADMIN_CPU_MAX)  # the admin, by hand
        (alice / "memory.max").write_text(str(ADMIN_MEMORY_MAX_BYTES))
        for p in loops.pop(bob):  # bob stops: alice's plan rises past the admin's cap
            p.kill()
        ticks, _ = wait_for_ticks(prom, 1, daemon, log_path, 300)
        deadline = time.monotonic() + 300
        while wait_for_ticks(prom, 0, daemon, log_path, 300)[0] < ticks + 5:
            seen_quota_usec.append(quota_usec(alice))
            assert time.monotonic() < deadline, log_path.read_text()[-3000:]
            time.sleep(0.3)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=300)
        log.close()
        for procs in loops.values():
            for p in procs:
                p.kill()
        for path in (alice, bob):
            kill_all(Cgroup(path))
    out = log_path.read_text()
    try:
        assert daemon.returncode == 0, out[-3000:]
        assert seen_quota_usec and all(q is not None and q <= 30_000 for q in seen_quota_usec), seen_quota_usec
        assert (alice / "cpu.max").read_text().strip() == ADMIN_CPU_MAX
        assert (alice / "memory.max").read_text().strip() == str(512 * 2**20)
        assert (bob / "cpu.max").read_text().split()[0] == "max"
        assert f"user-{ALICE}.slice: cpu.max is 30000 100000" in out and "someone else" in out, out[-3000:]
        assert f"user-{BOB}.slice" not in "".join(line for line in out.splitlines() if "someone else" in line)
    finally:
        for path in (alice, bob):
            remove_dir(path, tries=20)
