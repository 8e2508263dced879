"""A reload storm: 100 SIGHUPs, every other one after an invalid policy, at a running daemon.
It never dies nor fails a tick, each invalid file keeps the last good policy, and the last
valid one is in force at the end; the stop restores every original."""

import json
import os
import signal
import time

from tests.faults.harness import (
    FIRST_UID, daemon_body, failed_ticks_in, limits_lost, make_world, record_figures, start_child, wait_child,
)

SIGHUPS = 100


def wait_for(condition, timeout_s=60.0):
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.01)


def state(world):
    try:
        return json.loads(world.state_path.read_text())
    except (OSError, ValueError):
        return {}


def weight_of_first(world):
    users = {u["uid"]: u for u in state(world).get("users", [])}
    limits = users.get(FIRST_UID, {}).get("limits") or {}
    return limits.get("cpu.weight")


def test_a_storm_of_valid_and_invalid_reloads(base):
    world = make_world(base, 3, pace_s=0.005)
    pid = start_child(base, daemon_body(world, None), "storm")
    try:
        wait_for(lambda: weight_of_first(world) == 200)
        for i in range(SIGHUPS):
            if i % 2:
                world.config.write_text(f"interval_s: 1\nweights: {{users: {{uid{FIRST_UID}: [}}\n")  # a YAML error
            else:
                world.write_policy()
                world.config.write_text(world.config.read_text().replace(f"uid{FIRST_UID}: 2", f"uid{FIRST_UID}: {2 + i % 4}"))
            os.kill(pid, signal.SIGHUP)
            time.sleep(0.01)
        world.write_policy()
        world.config.write_text(world.config.read_text().replace(f"uid{FIRST_UID}: 2", f"uid{FIRST_UID}: 5"))
        os.kill(pid, signal.SIGHUP)
        wait_for(lambda: weight_of_first(world) == 500)  # the last valid policy is in force
        ticks = state(world)["tick"]
        wait_for(lambda: state(world).get("tick", 0) >= ticks + 3)  # and it still ticks
    finally:
        os.kill(pid, signal.SIGTERM)
        status = wait_child(pid)
    log = (base / "storm.log").read_text()
    lost = limits_lost(world.host)
    missed = failed_ticks_in(base, "storm")
    reloads, refused = log.count("reloaded "), log.count("reload failed")
    record_figures("reload_storm", f"{SIGHUPS + 1} SIGHUPs, every other policy invalid", SIGHUPS + 1, len(lost), missed,
                   0, f"{reloads} reloads, {refused} refused")
    assert status == 0 and missed == 0 and not lost, log
    assert reloads >= 1 and refused >= 1 and "Traceback" not in log


def test_a_flood_of_signals_neither_deadlocks_nor_kills_the_loop(base):
    """SIGHUPs sent back to back for 3 s, then SIGTERM. The handlers called Event.set(), which
    takes a lock the main thread may hold inside wait() or clear(): the handler blocked on it
    or nested until RecursionError, the loop died, and the governor's limits stayed on every
    slice (the lifecycle audit of 2026-11-26: "limits still in force after exit: 8"). Now a
    handler sets a flag and writes to a pipe; the daemon goes on ticking and restores all."""
    world = make_world(base, 3, pace_s=0.2)
    pid = start_child(base, daemon_body(world, None), "flood")
    sent = 0
    try:
        wait_for(lambda: world.snapshot.exists())
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            os.kill(pid, signal.SIGHUP)
            sent += 1
        ticks = state(world).get("tick", 0)
        wait_for(lambda: state(world).get("tick", 0) >= ticks + 2, 30)  # still ticking
    finally:
        os.kill(pid, signal.SIGTERM)
        status = wait_child(pid)
    log = (base / "flood.log").read_text()
    assert sent > 1000 and status == 0, log[-2000:]
    assert limits_lost(world.host) == [] and not world.snapshot.exists()
    assert "RecursionError" not in log and "Traceback" not in log
