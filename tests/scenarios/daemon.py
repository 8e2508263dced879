"""The governor under test: the installed ``drfgov run``, one process for the whole tier.

Under TCG ``drfgov run`` takes 20–60 s to its first tick, so the tier starts it once (in its
own cgroup with ``cpu.weight`` 200, as systemd/drfgov.service's ``CPUWeight=200`` puts it)
and gives every scenario fresh uids: a user the daemon has never seen starts from nothing,
and a user whose slice is removed is forgotten with it (governor/loop.py). A scenario whose
policy differs from the running one (its overrides) gets it by SIGHUP, the admin's reload;
the harness waits for the daemon's ``reloaded`` log line.

:class:`TickRecorder` watches state.json: at every new tick it reads the tick counter and
each user's slice counters, so use can be cut into the daemon's own tick intervals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from cgroups import Cgroup, CgroupError
from tests.scenarios.meter import Reading, Threads, read, read_threads

__all__ = ["DaemonError", "GovernorDaemon", "TickRecord", "TickRecorder", "mem_available_bytes", "merged",
           "render_policy"]


class DaemonError(Exception):
    """The daemon did not start, tick or reload; the message has the tail of its log."""


def merged(base: Mapping, overrides: Mapping) -> dict:
    """``base`` with ``overrides`` merged in, mapping by mapping (other values are replaced)."""
    out = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


def render_policy(policy: Mapping) -> str:
    return yaml.safe_dump(policy, sort_keys=False, default_flow_style=False)


class GovernorDaemon:
    """``drfgov run --config CONFIG`` with its stderr in ``log_path``.

    ``exe`` is the installed command; ``cgroup`` the cgroup it runs in (outside user.slice).
    """

    def __init__(self, exe: str, config_path: Path, log_path: Path, cgroup: Cgroup):
        self.exe, self.config_path, self.log_path, self.cgroup = exe, config_path, log_path, cgroup
        self.proc: subprocess.Popen | None = None
        self.policy_text: str | None = None
        self.state_path: Path | None = None
        self.starts = 0
        self.launched_at = 0.0

    def start(self, policy: Mapping, timeout_s: float = 300) -> float:
        """Start it with ``policy`` and wait for its first state.json; returns the seconds taken.

        Raises:
            DaemonError: it exited or did not tick within ``timeout_s``.
        """
        self.launch(policy)
        return self.wait_first_tick(timeout_s)

    def launch(self, policy: Mapping) -> None:
        """Start it with ``policy``, without waiting (:meth:`wait_first_tick`)."""
        self.state_path = Path(policy["state_path"])
        self.state_path.unlink(missing_ok=True)
        self._write(policy)
        self.launched_at = time.monotonic()
        log = open(self.log_path, "ab")
        log.write(f"--- drfgov run (start {self.starts + 1}) ---\n".encode())
        log.flush()
        script = f'echo 0 > /proc/$$/oom_score_adj && echo $$ > {self.cgroup.path}/cgroup.procs && exec "$@"'
        self.proc = subprocess.Popen(["sh", "-c", script, "sh", self.exe, "run", "--config", str(self.config_path)],
                                     cwd="/", stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()
        self.starts += 1

    def wait_first_tick(self, timeout_s: float = 300) -> float:
        """Wait for the first state.json of the last launch; the seconds since the launch.

        Raises:
            DaemonError: it exited or did not tick within ``timeout_s`` of its launch.
        """
        while not self.state_path.exists():
            if self.proc.poll() is not None:
                raise DaemonError(f"drfgov run exited with {self.proc.returncode} before its first tick:\n{self.log_tail()}")
            if time.monotonic() - self.launched_at > timeout_s:
                raise DaemonError(f"drfgov run did not tick within {timeout_s:g} s:\n{self.log_tail()}")
            time.sleep(0.25)
        return time.monotonic() - self.launched_at

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def use_policy(self, policy: Mapping, timeout_s: float = 120) -> bool:
        """Make ``policy`` the running one (SIGHUP reload); False when it already was.

        Raises:
            DaemonError: the daemon is not running, refused the policy, or did not reload in time.
        """
        if render_policy(policy) == self.policy_text:
            return False
        if not self.alive():
            raise DaemonError("drfgov run is not running")
        reloads = self._log_count("reloaded ")
        failures = self._log_count("reload failed")
        self._write(policy)
        self.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout_s
        while self._log_count("reloaded ") == reloads:
            if self._log_count("reload failed") > failures or not self.alive() or time.monotonic() > deadline:
                raise DaemonError(f"drfgov run did not reload the scenario's policy:\n{self.log_tail()}")
            time.sleep(0.2)
        return True

    def state(self) -> dict | None:
        """The latest state.json, or None (none yet, or caught mid-replacement: it is atomic, so
        only a missing file)."""
        try:
            return json.loads(self.state_path.read_text())
        except (FileNotFoundError, ValueError):
            return None

    def stop(self, timeout_s: float = 120) -> int | None:
        """SIGTERM (it restores every original limit) and wait; its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"

    def _write(self, policy: Mapping) -> None:
        text = render_policy(policy)
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, self.config_path)
        self.policy_text = text

    def _log_count(self, needle: str) -> int:
        try:
            return self.log_path.read_text(errors="replace").count(needle)
        except FileNotFoundError:
            return 0


@dataclass(frozen=True)
class TickRecord:
    """What the harness saw at one daemon tick: the tick counter, when it saw it (monotonic s),
    the state document, each user's slice counters and the guest's ``MemAvailable`` read right then,
    and each user's threads (a diagnostic of the daemon's CPU demand:
    :func:`~tests.scenarios.meter.threads_between`)."""

    tick: int
    time_s: float
    state: dict
    readings: Mapping[str, Reading]
    mem_available_bytes: int | None = None
    threads: Mapping[str, Threads] = field(default_factory=dict)


def mem_available_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """``MemAvailable`` (bytes): the kernel's estimate of what can be had without swapping."""
    with open(meminfo) as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


class TickRecorder:
    """A thread that polls state.json (every ``poll_s``) and keeps a :class:`TickRecord` per tick;
    the threads of the users named in ``uids`` are read while state.json has a CPU quota of hers."""

    def __init__(self, daemon: GovernorDaemon, cgroups: Mapping[str, Cgroup], poll_s: float = 0.05,
                 uids: Mapping[str, int] | None = None):
        self.daemon, self.cgroups, self.poll_s = daemon, dict(cgroups), poll_s
        self.uids = dict(uids or {})  # name → uid: whose threads to read (under a CPU quota in state.json)
        self._names: dict[int, str] = {}  # tid → comm, read once
        self.records: list[TickRecord] = []
        self._seen = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tick-recorder", daemon=True)

    def __enter__(self) -> TickRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def wait_for_tick(self, after: int | None = None, timeout_s: float = 15.0) -> TickRecord | None:
        """The first record with a tick above ``after`` (None: the next one to come); None when
        none came within ``timeout_s`` (the daemon stalled or died)."""
        with self._seen:
            if after is None:
                after = self.records[-1].tick if self.records else -1
            found = self._seen.wait_for(lambda: self.records and self.records[-1].tick > after, timeout_s)
            if not found:
                return None
            return next(r for r in self.records if r.tick > after)

    def _run(self) -> None:
        path = self.daemon.state_path
        last_mtime, last_tick = None, None
        while not self._stop.is_set():
            try:
                mtime = path.stat().st_mtime_ns
            except FileNotFoundError:
                mtime = None
            if mtime is not None and mtime != last_mtime:
                last_mtime = mtime
                state = self.daemon.state()
                if state is not None and state.get("tick") != last_tick:
                    readings, threads = {}, {}
                    for name, cg in self.cgroups.items():
                        try:
                            readings[name] = read(cg)
                        except (CgroupError, OSError):
                            pass  # her slice is being removed
                    quota = {u.get("uid"): not str((u.get("limits") or {}).get("cpu.max", "max")).startswith("max")
                             for u in state.get("users", [])}  # her cpu.max in force: "QUOTA PERIOD" or "max …"
                    for name, cg in self.cgroups.items():  # after every slice's counters: they come first
                        if quota.get(self.uids.get(name)):  # as the daemon: only under a CPU quota
                            threads[name] = read_threads(cg, self._names)
                    last_tick = state["tick"]
                    record = TickRecord(state["tick"], time.monotonic(), state, readings, mem_available_bytes(),
                                        threads)
                    with self._seen:
                        self.records.append(record)
                        self._seen.notify_all()
            self._stop.wait(self.poll_s)
