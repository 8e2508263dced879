"""The scenario tier: runs only inside the VM that ``python -m tests.scenarios.boot`` starts.

One session: the guest is prepared once (controllers, ``user.slice``, the scratch disk, the
harness's cgroups) and ``drfgov run`` is launched once, as pytest configures itself (its 20–150 s
start under TCG overlaps collection), with a policy that weighs every scenario's users; it is
stopped at the end (it restores every limit).
Results go to ``$DRFGOV_VM_OUT``: ``results.json`` (every scenario, with its tick timeline),
``tables.txt``, ``daemon.log``, ``workloads.log`` — boot.py copies them out to the host.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from cgroups import Cgroup

IN_VM = os.environ.get("DRFGOV_VM") == "1"
if not IN_VM:
    collect_ignore_glob = ["test_*.py"]
else:
    # The harness starts its workloads with fork, not vfork: CPython 3.11's vfork path (the
    # guest's Python) holds the GIL until the child has exec'd, and an exec that waits on the 9p root freezes every thread
    # of the harness, the scenario watchdog's timer among them (twice a run went silent after
    # a workload's start and was killed by the host 27 minutes later, nothing printed).
    subprocess._USE_VFORK = False

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ["cpu", "memory", "io"]
SCRATCH_SERIAL = "drfgov-scratch"  # the extra disk of tests/scenarios/boot.py
STATE_DIR = Path("/run/drfgov-scenarios")
HARNESS_MEMORY_MIN_BYTES = 256 * 2**20  # not the daemon's: how it fares under pressure is under test


def scratch_disk() -> tuple[str, str]:
    """``(name, "MAJ:MIN")`` of the disk whose serial is :data:`SCRATCH_SERIAL`."""
    for node in sorted(Path("/sys/block").iterdir()):
        serial = node / "serial"
        if serial.exists() and serial.read_text().strip() == SCRATCH_SERIAL:
            return node.name, (node / "dev").read_text().strip()
    pytest.fail(f"no disk with serial {SCRATCH_SERIAL} in the guest: boot with python -m tests.scenarios.boot",
                pytrace=False)


def _cgroup(path: Path, controllers: list[str] | None = None) -> Cgroup:
    path.mkdir(exist_ok=True)
    cg = Cgroup(path)
    if controllers:
        cg.enable_controllers(controllers)
    return cg


def _out_dir() -> Path:
    path = Path(os.environ.get("DRFGOV_VM_OUT", "/tmp/drfgov-scenarios-out"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def _prepare_guest() -> dict:
    """Cgroups, the harness's own protection, the scratch disk, the network link (shaped only
    in the scenarios that send), the policy; then ``drfgov run`` is launched — before
    collection, so its 20–150 s start under TCG overlaps pytest's own."""
    from tests.cli.conftest import _installed_drfgov
    from tests.scenarios.basepolicy import base_policy
    from tests.scenarios.boot import SCRATCH_BYTES_PER_S
    from tests.scenarios.catalog import SCENARIOS
    from tests.scenarios.daemon import GovernorDaemon
    from tests.scenarios.link import make_link

    t0 = time.monotonic()
    Path("/proc/self/oom_score_adj").write_text("-1000")  # a global OOM kill takes a workload, not the harness
    _cgroup(ROOT, CONTROLLERS)
    harness = _cgroup(ROOT / "drfgov-scenarios", CONTROLLERS)
    # The harness is the instrument: when users exhaust memory its Python (read over 9p) must not be
    # reclaimed, or it stalls and its windows stretch. memory.min protects what it uses, up to this.
    harness.write_text("memory.min", str(HARNESS_MEMORY_MIN_BYTES))
    me = _cgroup(harness.path / "pytest")
    me.write_text("memory.min", str(HARNESS_MEMORY_MIN_BYTES))
    me.write_text("cgroup.procs", str(os.getpid()))
    system = _cgroup(ROOT / "system.slice", CONTROLLERS)
    daemon_cg = _cgroup(system.path / "drfgov.service")
    daemon_cg.set_cpu_weight(200)  # systemd/drfgov.service: CPUWeight=200
    user_slice = _cgroup(ROOT / "user.slice", CONTROLLERS)
    name, dev = scratch_disk()
    os.chmod(f"/dev/{name}", 0o666)  # the readers run as their uids
    make_link()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    policy = base_policy(SCENARIOS, name, SCRATCH_BYTES_PER_S, STATE_DIR)
    daemon = GovernorDaemon(_installed_drfgov(), STATE_DIR / "drfgov.yaml", _out_dir() / "daemon.log", daemon_cg)
    daemon.launch(policy)
    return {"t0": t0, "harness": harness, "user_slice": user_slice, "scratch": (name, dev), "policy": policy,
            "daemon": daemon, "bytes_per_s": SCRATCH_BYTES_PER_S}


_GUEST: dict = {}


def pytest_configure(config):
    if IN_VM and not _GUEST:
        try:
            _GUEST.update(_prepare_guest())
        except BaseException as exc:  # noqa: BLE001 - reported by the rig fixture, as a failed test
            _GUEST["error"] = exc


@pytest.fixture(scope="session")
def out_dir() -> Path:
    return _out_dir()


@pytest.fixture(scope="session")
def rig(out_dir):
    """The prepared guest and the running daemon (launched by pytest_configure); at the end the
    daemon is stopped."""
    from tests.scenarios.runner import Rig

    guest = _GUEST
    if "error" in guest:
        pytest.fail(f"the guest could not be prepared: {guest['error']!r}", pytrace=False)
    daemon = guest["daemon"]
    started_s = daemon.wait_first_tick()
    print(f"\ndrfgov run: first tick {started_s:.0f} s after its launch", flush=True)
    mem_total = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                     if line.startswith("MemTotal:"))
    name, dev = guest["scratch"]
    bps = float(guest["bytes_per_s"])
    rig = Rig(f"/dev/{name}", {dev: (bps, bps)}, guest["user_slice"].path, guest["harness"], daemon, guest["policy"],
              out_dir, len(os.sched_getaffinity(0)), mem_total,
              {"daemon_first_tick_s": started_s, "session_start_s": guest["t0"]})
    yield rig
    status = daemon.stop()
    print(f"drfgov run stopped: exit {status}", flush=True)


@pytest.fixture(scope="session")
def stocks() -> dict:
    """Growers' alone measurements, shared by the scenarios of a run (a size, not a rate)."""
    return {}


@pytest.fixture(scope="session")
def workload_log(out_dir):
    with open(out_dir / "workloads.log", "ab") as f:
        yield f


@pytest.fixture(scope="session")
def results(rig, out_dir):
    """Every scenario's result; written to results.json and tables.txt as the session ends."""
    from tests.scenarios.report import result_json, table

    collected = []
    yield collected
    document = {
        "daemon_first_tick_s": rig.session["daemon_first_tick_s"],
        "tier_wall_s": time.monotonic() - rig.session["session_start_s"],
        "guest": {"cpus": rig.cpu_count, "mem_total_bytes": rig.mem_total_bytes, "scratch": rig.scratch_device,
                  "disks": {d: list(c) for d, c in rig.disks.items()}},
        "scenarios": [result_json(r) for r in collected],
    }
    (out_dir / "results.json").write_text(json.dumps(document, indent=1, default=float))
    (out_dir / "tables.txt").write_text("\n\n".join(table(r) for r in collected) + "\n")
