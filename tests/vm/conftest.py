"""The real-kernel tier: these tests run only inside the VM that tests/vm/boot.py starts.

On the host they are not collected (the host's cgroup v2 has no controllers); the test
script runs them through ``python -m tests.vm.boot``, which fails when the VM cannot boot.
"""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cgroups import Cgroup

IN_VM = os.environ.get("DRFGOV_VM") == "1"
if not IN_VM:
    collect_ignore_glob = ["test_*.py"]

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ["cpu", "memory", "io"]


def _disk(name: str) -> str:
    return Path(f"/sys/class/block/{name}/dev").read_text().strip()


@pytest.fixture(scope="session")
def test_root():
    """``/sys/fs/cgroup/drfgov-test`` with cpu, memory and io enabled for its children."""
    root = Cgroup(ROOT)
    root.enable_controllers(CONTROLLERS)
    top = ROOT / "drfgov-test"
    top.mkdir(exist_ok=True)
    Cgroup(top).enable_controllers(CONTROLLERS)
    return Cgroup(top)


@pytest.fixture
def cgroup(test_root, request):
    """A fresh child cgroup for one test; its processes are killed and it is removed after."""
    path = test_root.path / request.node.name.replace("[", "-").replace("]", "")[:60]
    path.mkdir()
    cg = Cgroup(path)
    yield cg
    kill_all(cg)
    remove_dir(path)


def remove_dir(path: Path, tries: int = 50) -> None:
    """rmdir a cgroup directory, again every 0.1 s while the kernel still counts a process
    that is exiting in it (EBUSY); gone already is fine."""
    for _ in range(tries):
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)


def kill_all(cg: Cgroup) -> None:
    if not cg.exists():
        return
    for pid in cg.procs():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(50):
        if not cg.exists() or not cg.procs():
            return
        time.sleep(0.1)


def spawn_in(cg: Cgroup, *argv: str, **popen) -> subprocess.Popen:
    """Start ``argv`` already inside ``cg`` (it moves itself before exec); ``popen``: more
    arguments of :class:`subprocess.Popen` (``stdout=subprocess.PIPE``)."""
    script = f'echo $$ > {cg.path}/cgroup.procs && exec "$@"'
    return subprocess.Popen(["sh", "-c", script, "sh", *argv], **popen)


def cores_used(cg: Cgroup, seconds: float) -> float:
    """Cores ``cg`` used over the next ``seconds`` (cpu.stat usage_usec)."""
    before, t0 = cg.cpu_stat().usage_usec, time.monotonic()
    time.sleep(seconds)
    return (cg.cpu_stat().usage_usec - before) / 1e6 / (time.monotonic() - t0)


def direct_read(cg: Cgroup, device_path: str, mib: int = 20) -> float:
    """Read ``mib`` MiB of ``device_path`` with O_DIRECT from inside ``cg``; bytes/s."""
    t0 = time.monotonic()
    proc = spawn_in(cg, "dd", f"if={device_path}", "of=/dev/null", "bs=64k", f"count={16 * mib}", "iflag=direct")
    assert proc.wait(timeout=300) == 0
    return mib * 2**20 / (time.monotonic() - t0)


@pytest.fixture(scope="session")
def disk():
    """The VM's virtual disk: ``(whole-disk MAJ:MIN, first-partition MAJ:MIN)``."""
    return _disk("vda"), _disk("vda1")


@pytest.fixture(scope="session")
def out_dir():
    return Path(os.environ.get("DRFGOV_VM_OUT", "/tmp"))


def tick_durations(prom_text: str) -> tuple[int, float]:
    """(ticks, their total wall seconds) from the textfile's histogram."""
    count = float(re.search(r"^drfgov_tick_duration_seconds_count (\S+)$", prom_text, re.M).group(1))
    total = float(re.search(r"^drfgov_tick_duration_seconds_sum (\S+)$", prom_text, re.M).group(1))
    return int(count), total


def wait_for_ticks(prom: Path, ticks: int, daemon: subprocess.Popen, log: Path, timeout_s: float) -> tuple[int, float]:
    """Wait until the textfile counts at least ``ticks``; its (ticks, total seconds) then."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = tick_durations(prom.read_text()) if prom.exists() else (0, 0.0)
        if found[0] >= ticks:
            return found
        assert daemon.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{found[0]} of {ticks} ticks in {timeout_s} s: {log.read_text()[-3000:]}"
        time.sleep(1)


def daemon_policy(interval_s: float, tmp: Path) -> str:
    """The policy of an installed ``drfgov run`` on this guest's own slices: the cgroupfs
    backend, CPU and memory governed, half a core kept for the rest of the guest (the daemon
    included), its state, history and textfile metrics in ``tmp``."""
    return (f"interval_s: {interval_s}\nbackend: cgroupfs\nenforce: [cpu, memory]\n"
            f"reserve: {{cpu_cores: 0.5, memory_bytes: 0}}\nstate_path: {tmp}/state.json\n"
            f"history: {{path: {tmp}/history.db}}\nmetrics: {{textfile: {tmp}/drfgov.prom}}\n")
