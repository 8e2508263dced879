"""Load generators, started inside a cgroup as a given uid, and stopped with the whole cgroup.

* cpu loop: ``sh -c 'while :; do :; done'`` — one always-runnable thread;
* O_DIRECT reader: ``dd iflag=direct bs=64k`` over the scratch disk, restarted at its end
  (64 KiB requests: under TCG each costs guest CPU, which the alone measurement captures);
* TCP sender: ``traffic.py send`` (tests/netns) to her port over the scenario link
  (:func:`tests.scenarios.link.sender_argv`), until the recorder closes the connection;
* grower: the system Python (``-S``: no site) maps anonymous memory (one private mapping, as
  a big array would be), says ``ready`` and waits for SIGUSR1; then it writes one byte in
  every page at the asked rate and sleeps holding it. Under TCG zeroing pages costs about one
  core per 100 MiB/s — the alone measurement sees it. Growers are started *armed*
  (:func:`wait_ready`) and released (:func:`release`) at the phase's event: Python starts
  from the host's files over 9p, which takes seconds — tens of them when memory is short and
  its pages are evicted — and that start must not be mistaken for the governor's delay;
* spiker: the system Python again, armed the same way — and before it says ``ready`` it
  populates its spike once and frees it: under TCG the guest's first touch of memory qemu has
  not yet backed runs at half speed (200 MiB took two intervals, seen growing in two readings);
  the guest then gives the spikes the pages it freed. Released, right after each tick of the
  daemon (its state.json replaced: stat only, a reader's open would ask the daemon for a
  write), one private anonymous mapping populated at once (``MAP_POPULATE``), held until the
  next tick and unmapped, then ``pause_ticks`` ticks without it (see
  :class:`~tests.scenarios.spec.Workload`). A mapping a tick caught half made is unmapped at once.

A process moves itself into the cgroup before it execs (``echo $$ > cgroup.procs``), then drops
to the uid with setpriv; its stderr goes to ``log``. It also sets its ``oom_score_adj`` back to 0:
the harness protects itself from the OOM killer (-1000), and children would inherit that.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from typing import IO

from cgroups import Cgroup, CgroupGone, ControllerMissing
from tests.scenarios.link import sender_argv
from tests.scenarios.spec import Workload

__all__ = ["GROWER_SOURCE", "SPIKER_SOURCE", "release", "spawn", "stop_all", "wait_ready", "workload_argv"]

PYTHON = "/usr/bin/python3"

GROWER_SOURCE = r"""
import mmap, signal, sys, time
size, rate = int(sys.argv[1]), float(sys.argv[2])
PAGE, STEP = 4096, 1 << 20
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
start, done = time.monotonic(), 0
while done < size:
    n = min(STEP, size - done)
    m[done:done + n:PAGE] = b"\1" * ((n + PAGE - 1) // PAGE)
    done += n
    ahead = start + done / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
while True:
    signal.pause()
"""

SPIKER_SOURCE = r"""
import mmap, os, signal, sys, time
size, pause, state = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE

def stamp():
    try:
        return os.stat(state).st_mtime_ns
    except FileNotFoundError:
        return None

def tick(seen):  # wait for the daemon's next tick: state.json replaced after the stamp seen
    now = stamp()
    while now is None or now == seen:
        time.sleep(0.01)
        now = stamp()
    return now

mmap.mmap(-1, size, flags=FLAGS).close()  # warm: a first population runs at half speed
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
seen = tick(stamp())
while True:
    m = mmap.mmap(-1, size, flags=FLAGS)
    if stamp() == seen:  # made within the interval: the next reading sees it whole
        seen = tick(seen)
    m.close()  # gone by the next reading (at once, when a reading caught it half made)
    seen = stamp()
    for _ in range(pause):
        seen = tick(seen)
"""


def workload_argv(workload: Workload, scratch_device: str, state_path: str | os.PathLike | None = None,
                  uid: int | None = None) -> list[str]:
    """The command line of ``workload`` (``scratch_device``: ``/dev/vdX`` for readers;
    ``state_path``: the daemon's state.json, by which a spiker keeps time; ``uid``: a sender's
    owner, whose port she sends to)."""
    if workload.kind == "sender":
        if uid is None:
            raise ValueError("a sender sends to her uid's port: uid is needed")
        return sender_argv(uid)
    if workload.kind == "cpu":
        return ["sh", "-c", "while :; do :; done"]
    if workload.kind == "reader":
        loop = f"while :; do dd if={scratch_device} of=/dev/null bs=64k iflag=direct status=none || exit 1; done"
        return ["sh", "-c", loop]
    if workload.kind == "spiker":
        if state_path is None:
            raise ValueError("a spiker keeps time by the daemon's state.json: state_path is needed")
        return [PYTHON, "-S", "-c", SPIKER_SOURCE, str(workload.size_bytes), str(workload.pause_ticks), str(state_path)]
    return [PYTHON, "-S", "-c", GROWER_SOURCE, str(workload.size_bytes), repr(float(workload.rate_bytes_per_s))]


def spawn(workload: Workload, uid: int, cg: Cgroup, scratch_device: str, log: IO[bytes] | None = None,
          state_path: str | os.PathLike | None = None) -> subprocess.Popen:
    """Start ``workload`` in ``cg`` as ``uid`` (and gid ``uid``, no supplementary groups);
    ``state_path`` as for :func:`workload_argv`."""
    script = (f'echo 0 > /proc/$$/oom_score_adj && echo $$ > {cg.path}/cgroup.procs && '
              f'exec setpriv --reuid={uid} --regid={uid} --clear-groups "$@"')
    argv = workload_argv(workload, scratch_device, state_path, uid)
    return subprocess.Popen(["sh", "-c", script, "sh", *argv], cwd="/",
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if workload.armed else subprocess.DEVNULL,
                            stderr=log if log is not None else subprocess.DEVNULL)


def wait_ready(proc: subprocess.Popen, timeout_s: float = 120.0) -> bool:
    """Wait for an armed workload (a grower, a spiker) to say ``ready``; True at once for the others,
    False when it did not in ``timeout_s`` (or died)."""
    if proc.stdout is None:
        return True
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    return bool(ready) and proc.stdout.readline().strip() == b"ready"


def release(proc: subprocess.Popen) -> None:
    """Let an armed workload go (SIGUSR1; the pid is Python's: sh and setpriv exec it)."""
    if proc.stdout is not None and proc.poll() is None:
        proc.send_signal(signal.SIGUSR1)


def stop_all(cg: Cgroup, procs: list[subprocess.Popen] = (), timeout_s: float = 20.0) -> None:
    """Kill every process in ``cg`` (``cgroup.kill``, Linux 5.14) and reap ``procs``."""
    try:
        try:
            cg.write_text("cgroup.kill", "1")
        except ControllerMissing:  # before Linux 5.14: one by one
            for pid in cg.procs():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout_s
        while cg.procs() and time.monotonic() < deadline:
            time.sleep(0.05)
    except CgroupGone:
        pass
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
