"""A scenario that does not end within its budget is dumped, unstuck and failed, not waited on.

The tier's only other limit is the host's 30-minute VM timeout, which kills qemu and leaves
nothing to read (CI once saw that: ``disk-idle-starts`` went silent after its alone part, the
daemon's log stopped the same minute, and the VM was killed 27 minutes later). When a scenario
runs past :data:`SCENARIO_WATCHDOG_S` (the longest takes ~90 s), a timer thread prints to the
console — which is not the 9p root both the harness and the daemon read, so it still works when
they are blocked there:

* every Python thread's stack (the harness's main thread says where it waits);
* each process not sleeping interruptibly: ``ps`` state, ``wchan``, ``/proc/PID/stack`` and
  ``/proc/PID/syscall`` (a task in D state names the kernel path it is stuck in);
* the daemon's pid, state and kernel stack, and each user slice's ``cgroup.procs``,
  ``cpu.max``, ``io.max`` and ``io.stat``;
* the blocked-task report of ``sysrq w`` (into the kernel log, which the console shows);

then kills every process in the user slices and the harness's ``alone`` cgroup
(``cgroup.kill``): a harness waiting on a workload goes on, and the scenario fails with
"the watchdog fired" and whatever the dump showed. Nothing here reads a file over 9p.

Should the harness be frozen whole — a thread holding the GIL while it waits in the kernel —
the timer thread cannot run; faulthandler's own timer, a C thread that needs no GIL, then
prints every Python thread's stack :data:`FROZEN_GRACE_S` later (the frame that holds it).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
from pathlib import Path

__all__ = ["SCENARIO_WATCHDOG_S", "Watchdog"]

SCENARIO_WATCHDOG_S = 300.0
FROZEN_GRACE_S = 60.0
SLICE_FILES = ("cgroup.procs", "cpu.max", "io.max", "io.stat")


def _read(path: Path, limit: int = 2000) -> str:
    try:
        return path.read_text()[:limit].strip()
    except OSError as exc:
        return f"({type(exc).__name__}: {exc})"


def _stuck_processes() -> list[str]:
    """Processes in any state but S (sleeping) and I (idle kernel thread), with where they wait."""
    lines = []
    for proc in sorted(Path("/proc").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else 0):
        if not proc.name.isdigit():
            continue
        stat = _read(proc / "stat")
        try:
            comm_end = stat.rindex(")")
            state = stat[comm_end + 2]
        except (ValueError, IndexError):
            continue
        if state in "SI" or int(proc.name) == os.getpid():
            continue
        # comm, never cmdline: reading a process's memory takes its mmap lock, which a task stuck
        # in a page fault over 9p holds — the very case this is for
        lines.append(f"pid {proc.name} state {state} wchan {_read(proc / 'wchan')} comm {_read(proc / 'comm')}\n"
                     f"  syscall {_read(proc / 'syscall')}\n  stack:\n    "
                     + _read(proc / "stack").replace("\n", "\n    "))
    return lines


class Watchdog:
    """``with Watchdog(name, rig):`` — after ``budget_s`` the dump above, then the workloads
    killed; :attr:`fired` says whether it did."""

    def __init__(self, name: str, rig, budget_s: float = SCENARIO_WATCHDOG_S):
        self.name, self.rig, self.budget_s = name, rig, budget_s
        self.fired = False
        self._timer = threading.Timer(budget_s, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        self._timer.start()
        faulthandler.dump_traceback_later(self.budget_s + FROZEN_GRACE_S, file=sys.stdout)
        return self

    def __exit__(self, *exc) -> None:
        faulthandler.cancel_dump_traceback_later()
        self._timer.cancel()
        self._timer.join()  # a dump under way ends before the next scenario's users exist

    def _say(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def _fire(self) -> None:
        self.fired = True
        self._say(f"\n=== watchdog: scenario {self.name} still running after {self.budget_s:g} s: dump follows")
        faulthandler.dump_traceback(file=sys.stdout, all_threads=True)
        self._say("--- processes not sleeping (state, wchan, kernel stack)")
        for line in _stuck_processes():
            self._say(line)
        daemon = self.rig.daemon
        proc = getattr(daemon, "proc", None)
        if proc is not None:
            self._say(f"--- drfgov run: pid {proc.pid}, exit {proc.poll()}")
            for name in ("stat", "wchan", "syscall", "stack"):
                self._say(f"  {name}: {_read(Path(f'/proc/{proc.pid}/{name}'))}")
        self._say("--- user slices")
        for slice_dir in sorted(Path(self.rig.user_slice).glob("user-*.slice")):
            for name in SLICE_FILES:
                self._say(f"  {slice_dir.name}/{name}: {_read(slice_dir / name)!r}")
        try:
            Path("/proc/sysrq-trigger").write_text("w")
        except OSError as exc:
            self._say(f"(sysrq w: {exc})")
        self._say("--- killing the scenario's workloads (cgroup.kill)")
        for cg in [*Path(self.rig.user_slice).glob("user-*.slice"), Path(self.rig.harness.path) / "alone"]:
            try:
                (cg / "cgroup.kill").write_text("1")
            except OSError:
                pass
        self._say("=== watchdog: end of dump")
