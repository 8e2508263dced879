"""The fault suite's world: a fake cgroupfs host and the real daemon over it.

* :class:`FakeHost` — ``user.slice/user-UID.slice`` directories of real kernel file text
  (``tests/fixtures/linux-6.1``) with unlimited originals, and counters that each
  :meth:`FakeHost.step` advances by one second of plausible use: every user wants
  ``busy_cores`` of CPU, gets what her ``cpu.max`` allows, and the rest shows in
  ``throttled_usec`` as the kernel would report it; memory grows slowly.
* :class:`World` — the policy file, the runtime directory, a fake clock and the
  ``host_setup=`` of the **real** :class:`governor.service.daemon.Daemon`, with the real
  :class:`monitors.cgroupmonitor.CgroupMonitor` (a subclass that steps the host and the clock
  before each discovery, as a second of wall time would) and the real cgroupfs backend.
* Child processes (:func:`run_child`): the daemon, or ``drfgov restore``, forked for real, with
  :func:`arm_steps` counting each step that changes something the daemon owns (a cgroup file
  write, an fsync, a rename, an unlink, a history record) and SIGKILLing itself at step k.
* :func:`limits_lost` — knob files that differ from their values before the governor ran.
* :func:`record_figures` — ``out/faults/<test>.json`` for ``scripts/fault_table.py``.
"""

from __future__ import annotations

import gc
import json
import os
import pathlib
import resource
import shutil
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from cgroups import Cgroup
from governor.config.identity import exempt_names
from governor.control.model import Capacity
from governor.enforce.cgroupfs import CgroupfsBackend
from governor.service.hostsetup import HostSetup
from monitors.cgroupmonitor import CgroupMonitor
from tests.fakecgroup import KERNEL_FILES

# imported here, once: forked children then start at once
import governor.cli  # noqa: E402,F401
import governor.service.daemon  # noqa: E402,F401
import typer.testing  # noqa: E402,F401

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "out" / "faults"
KNOBS = ("cpu.max", "cpu.weight", "memory.low", "memory.high", "memory.max", "io.max")
#: no passwd entries: names are uid40001, ...; 10,000 users end at 50000
FIRST_UID = 40001
GiB = 2**30
#: each user's original (pre-governor) limits: unlimited, one with an admin's own weight and memory.low
ORIGINALS = {"cpu.max": "max 100000\n", "cpu.weight": "100\n", "memory.low": "0\n", "memory.high": "max\n",
             "memory.max": "max\n", "io.max": ""}
POLICY = """\
interval_s: 1
backend: cgroupfs
state_path: {state_dir}/state.json
history: {{path: {history_dir}/history.db, every_s: 0}}
weights:
  users: {{uid{first}: 2}}
{extra}"""


class FakeHost:
    """``root/user.slice/user-UID.slice`` for ``count`` users (uids from :data:`FIRST_UID`)."""

    def __init__(self, root: Path, count: int, busy_cores: float = 1.5, memory_bytes: int = 200 * 2**20):
        self.root, self.busy_cores, self.memory_bytes = Path(root), busy_cores, memory_bytes
        self.user_slice = self.root / "user.slice"
        self.user_slice.mkdir(parents=True, exist_ok=True)
        self.time_s = 0.0
        self.uids = list(range(FIRST_UID, FIRST_UID + count))
        self.counters = {uid: [0, 0] for uid in self.uids}  # usage_usec, throttled_usec
        self._texts = {src.name: src.read_text() for src in KERNEL_FILES.iterdir()}
        self._texts.update(ORIGINALS)
        self.original: dict[int, dict[str, str]] = {}
        for uid in self.uids:
            self.log_in(uid)
        (self.root / "proc").mkdir(exist_ok=True)  # no stat/meminfo: the loop keeps the static capacity

    def log_in(self, uid: int) -> None:
        """Create her slice (every third user has an admin's own cpu.weight and memory.low,
        which restore must bring back exactly)."""
        mine = dict(self._texts)
        if (uid - FIRST_UID) % 3 == 2:
            mine.update({"cpu.weight": "50\n", "memory.low": "67108864\n"})
        path = self.slice(uid)
        path.mkdir()
        for name, text in mine.items():
            (path / name).write_text(text)
        self.original[uid] = {k: mine[k] for k in KNOBS}
        if uid not in self.uids:
            self.uids.append(uid)
            self.counters[uid] = [0, 0]

    def slice(self, uid: int) -> Path:
        return self.user_slice / f"user-{uid}.slice"

    def step(self, dt_s: float = 1.0) -> None:
        """One interval of use: each live slice runs ``busy_cores`` as far as its cpu.max lets it."""
        self.time_s += dt_s
        for uid in self.uids:
            path = self.slice(uid)
            try:
                quota, period = (path / "cpu.max").read_text().split()
            except (FileNotFoundError, NotADirectoryError):
                continue  # removed
            allowed = self.busy_cores if quota == "max" else min(self.busy_cores, int(quota) / int(period))
            usage, throttled = self.counters[uid]
            usage += int(allowed * dt_s * 1e6)
            throttled += int((self.busy_cores - allowed) * dt_s * 1e6)
            self.counters[uid] = [usage, throttled]
            try:
                (path / "cpu.stat").write_text(
                    f"usage_usec {usage}\nuser_usec {usage}\nsystem_usec 0\nnr_periods {int(self.time_s * 10)}\n"
                    f"nr_throttled {int(self.time_s * 10) if throttled else 0}\nthrottled_usec {throttled}\n"
                    "nr_bursts 0\nburst_usec 0\n")
                (path / "memory.current").write_text(f"{self.memory_bytes + int(self.time_s) * 4096}\n")
            except FileNotFoundError:
                continue

    def knobs_now(self, uid: int) -> dict[str, str]:
        return {k: (self.slice(uid) / k).read_text() for k in KNOBS}


def limits_lost(host: FakeHost) -> list[str]:
    """Knob files of live slices that differ from their values before the governor ran."""
    lost = []
    for uid in host.uids:
        if not host.slice(uid).exists():
            continue
        for knob, was in host.original[uid].items():
            now = (host.slice(uid) / knob).read_text()
            if now.strip() != was.strip():  # a kernel file reads back without the writer's spacing
                lost.append(f"user-{uid}.slice/{knob}: {now.strip()!r}, was {was.strip()!r}")
    return lost


def unlimited_users(host: FakeHost) -> list[int]:
    """Governed users whose cpu.max the daemon has not written (every user here is contended)."""
    return [uid for uid in host.uids if host.slice(uid).exists()
            and (host.slice(uid) / "cpu.max").read_text().strip() == ORIGINALS["cpu.max"].strip()]


class FakeClock:
    """Seconds that pass only when a tick's discovery steps them; with ``real_time`` the real
    seconds in between count too (a test that measures how long a tick blocks)."""

    def __init__(self, real_time: bool = False):
        self.now_s, self.real_time, self._t0 = 1000.0, real_time, time.monotonic()

    def __call__(self) -> float:
        return self.now_s + (time.monotonic() - self._t0 if self.real_time else 0.0)


class SteppingMonitor(CgroupMonitor):
    """The real monitor; each discovery first lets a second pass on the host and the clock.
    After ``stop_after`` discoveries it sends itself SIGTERM (as systemctl stop would)."""

    world: "World"

    def users(self):
        world = self.world
        before = world.clock()
        world.clock.now_s += 1.0
        world.host.step(world.clock() - before)  # the counters grow with the clock
        world.discoveries += 1
        if world.pace_s:
            time.sleep(world.pace_s)
        if world.before_discovery is not None:
            world.before_discovery(world)
        if world.stop_after is not None and world.discoveries > world.stop_after:
            os.kill(os.getpid(), signal.SIGTERM)
        return super().users()


@dataclass
class World:
    """A fake host, its policy and runtime directory, and a factory for the real daemon."""

    base: Path
    host: FakeHost
    policy_extra: str = ""
    backend_factory: object = CgroupfsBackend
    clock: FakeClock = field(default_factory=FakeClock)
    stop_after: int | None = None
    before_discovery: object = None
    discoveries: int = 0
    pace_s: float = 0.0  # real seconds each tick waits (children that run while a test acts)
    disks: dict = field(default_factory=dict)  # governed disks, "MAJ:MIN" → (read, write) bytes/s

    def __post_init__(self):
        self.runtime_dir = self.base / "run"
        self.state_dir = self.base / "state"
        self.history_dir = self.base / "lib"
        self.config = self.base / "drfgov.yaml"
        self.write_policy()

    def write_policy(self, extra: str | None = None) -> None:
        self.config.write_text(POLICY.format(state_dir=self.state_dir, history_dir=self.history_dir, first=FIRST_UID,
                                             extra=self.policy_extra if extra is None else extra))

    @property
    def snapshot(self) -> Path:
        return self.runtime_dir / "originals.json"

    @property
    def state_path(self) -> Path:
        return self.state_dir / "state.json"

    def save_image(self, name: str) -> None:
        """Copy what the daemon and the host hold now (slices, runtime, state, history)."""
        image = self.base / "images" / name
        shutil.rmtree(image, ignore_errors=True)
        for part in ("cgroup", "run", "state", "lib"):
            if (self.base / part).exists():
                shutil.copytree(self.base / part, image / part, symlinks=True)

    def load_image(self, name: str) -> None:
        """Put back what :meth:`save_image` copied (the world as a killed run left it)."""
        image = self.base / "images" / name
        for part in ("cgroup", "run", "state", "lib"):
            shutil.rmtree(self.base / part, ignore_errors=True)
            if (image / part).exists():
                shutil.copytree(image / part, self.base / part, symlinks=True)

    def host_setup(self, policy, dry_run, clock) -> HostSetup:
        monitor = SteppingMonitor(Cgroup(self.host.user_slice), clock, policy.governed.min_uid, exempt_names(policy),
                                  procfs=str(self.host.root / "proc"), max_uid=policy.governed.max_uid)
        monitor.world = self
        backend = self.backend_factory()
        return HostSetup(monitor, backend, "fault suite", Capacity(2.0, 8.0 * GiB, self.disks), "fake cgroupfs")

    def daemon(self, **kw):
        from governor.service.daemon import Daemon

        return Daemon(self.config, host_setup=self.host_setup, runtime_dir=self.runtime_dir, clock=self.clock,
                      wall_clock=lambda: 1.8e9 + self.clock(), **kw)


def make_world(base: Path, users: int = 3, **kw) -> World:
    base.mkdir(parents=True, exist_ok=True)
    return World(base, FakeHost(base / "cgroup", users), **kw)


# -- child processes ------------------------------------------------------------------------------

STEP_KINDS = ("cgroup write", "fsync", "rename", "unlink", "history record")


def arm_steps(kill_at: int | None, seen: list[str]) -> None:
    """In a child: count every step that changes the daemon's world (cgroup file writes,
    fsyncs, renames, unlinks, history records; names appended to ``seen``) and SIGKILL this
    process just before step ``kill_at`` (1-based)."""
    from governor.service.history import History

    def guard(kind, fn):
        def step(*args, **kwargs):
            seen.append(kind)
            if len(seen) == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return fn(*args, **kwargs)
        return step

    Cgroup.write_text = guard("cgroup write", Cgroup.write_text)
    os.fsync = guard("fsync", os.fsync)
    os.replace = guard("rename", os.replace)
    pathlib.Path.unlink = guard("unlink", pathlib.Path.unlink)
    History.record = guard("history record", History.record)


def start_child(base: Path, body, name: str = "child") -> int:
    """Fork; the child runs ``body()`` (its int is the exit status), its output to
    ``base/NAME.log``. Returns the child's pid (see :func:`wait_child`)."""
    log_path = base / f"{name}.log"
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()  # the child's collections then skip the parent's objects (no copy-on-write storm)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 70
        try:
            fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(fd, 2)
            os.dup2(fd, 1)
            os.close(fd)
            sys.stdout = sys.stderr = open(2, "w", buffering=1, closefd=False)  # not pytest's capture
            status = int(body() or 0)
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            sys.stderr.flush()
            sys.stdout.flush()
            os._exit(status)
    gc.unfreeze()
    return pid


def close_inherited_descriptors() -> None:
    """In a child: close every descriptor but 0–2, as a freshly started daemon has (the test
    process may hold hundreds: other tests' monitors keep their files open)."""
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])


def wait_child(pid: int, timeout_s: float = 120.0) -> int:
    """The child's exit code (negative: the signal that killed it); SIGKILLed after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() > end:
                raise TimeoutError(f"child {pid} still running after {timeout_s:g} s: killed")
            time.sleep(0.005)
    except BaseException:  # out of time, or the test ended under it (pytest-timeout, ^C): no daemon left behind
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise


def run_child(base: Path, body, name: str = "child", timeout_s: float = 120.0) -> int:
    """:func:`start_child` and :func:`wait_child`."""
    return wait_child(start_child(base, body, name), timeout_s)


def daemon_body(world: World, ticks: int | None, kill_at: int | None = None, steps_out: Path | None = None, **kw):
    """The body of a child that runs ``drfgov run`` for ``ticks`` ticks (then SIGTERM), killed
    at step ``kill_at``; the steps it took are written to ``steps_out``."""
    def body():
        from governor.service.daemon import configure_logging

        configure_logging()
        seen: list[str] = []
        world.stop_after = ticks
        arm_steps(kill_at, seen)
        status = world.daemon(**kw).run()
        if steps_out is not None:
            steps_out.write_text(json.dumps(seen))
        return status
    return body


def restore_body(world: World, kill_at: int | None = None, steps_out: Path | None = None):
    """The body of a child that runs ``drfgov restore`` as the unit's ExecStopPost does. Its
    traffic-shaping cleanup is left out (these worlds shape nothing, and it would look at this
    host's interfaces; tests/netns covers it)."""
    def body():
        from typer.testing import CliRunner

        from governor.cli import app, service

        service._remove_shaping = lambda: []
        seen: list[str] = []
        arm_steps(kill_at, seen)
        # as the unit's ExecStopPost: no --snapshot, the default path in $RUNTIME_DIRECTORY (an
        # absent one is nothing to restore; a --snapshot given and absent is an error)
        result = CliRunner().invoke(app, ["restore"], env={"RUNTIME_DIRECTORY": str(world.runtime_dir)})
        sys.stderr.write(result.output)
        if steps_out is not None:
            steps_out.write_text(json.dumps(seen))
        return result.exit_code
    return body


def failed_ticks_in(base: Path, name: str) -> int:
    """``tick failed`` lines in a child's log."""
    path = base / f"{name}.log"
    return path.read_text().count("tick failed") if path.exists() else 0


# -- figures --------------------------------------------------------------------------------------

def record_figures(test: str, fault: str, injected: int, limits_lost: int, ticks_missed: int, restarts: int,
                   note: str = "") -> dict:
    """Write ``out/faults/TEST.json`` (the row ``scripts/fault_table.py`` prints)."""
    OUT.mkdir(parents=True, exist_ok=True)
    figures = {"test": test, "fault": fault, "injected": injected, "limits_lost": limits_lost,
               "ticks_missed": ticks_missed, "restarts": restarts, "note": note}
    (OUT / f"{test}.json").write_text(json.dumps(figures, indent=1) + "\n")
    return figures
