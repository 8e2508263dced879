"""What the systemd tier's main jobs (test_main_job.py on v2, test_v1_main_job.py on v1) do in
the guest: run a command, wait for a condition, read the daemon's state.json and journal,
measure the cores users' slices used, and show the unit when a test fails."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

__all__ = ["STATE", "cores_used_over", "journal", "sh", "show_the_daemon_when_a_test_fails", "state", "wait_for"]

STATE = Path("/run/drfgov/state.json")


def sh(*args: str, check: bool = True) -> str:
    """``args``' standard output; with ``check``, an AssertionError naming its stderr if it failed."""
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    if check and out.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {out.returncode}: {out.stderr}")
    return out.stdout


def wait_for(condition, timeout_s: float, what: str) -> None:
    """Poll ``condition()`` every 0.25 s (an OSError, ValueError or KeyError counts as not yet);
    AssertionError naming ``what`` after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while True:
        try:
            if condition():
                return
        except (OSError, ValueError, KeyError):
            pass
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.25)


def state() -> dict:
    """The daemon's state.json now."""
    return json.loads(STATE.read_text())


def cores_used_over(names, cpu_seconds, seconds: float = 10.0) -> dict[str, float]:
    """Cores each of ``names`` used over ``seconds`` of wall time, measured once the daemon has
    ticked five more times; ``cpu_seconds(name)`` is her slice's cumulative CPU time (s)."""
    start = state()["tick"]
    wait_for(lambda: state()["tick"] >= start + 5, 60, "five ticks")
    before, t0 = {n: cpu_seconds(n) for n in names}, time.monotonic()
    time.sleep(seconds)
    return {n: (cpu_seconds(n) - before[n]) / (time.monotonic() - t0) for n in names}


def journal() -> str:
    """The drfgov unit's journal, messages only."""
    return sh("journalctl", "-u", "drfgov", "--no-pager", "-o", "cat", check=False)


@pytest.fixture(autouse=True)
def show_the_daemon_when_a_test_fails(request):
    """On failure, the unit's status and journal and any seccomp kills go to the console."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        print(sh("systemctl", "status", "--no-pager", "-l", "drfgov", check=False))
        print("\n".join(journal().splitlines()[-40:]))
        print("\n".join(l for l in sh("dmesg", check=False).splitlines() if "audit" in l or "SIGSYS" in l)[-2000:])
