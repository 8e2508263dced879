"""SIGKILL at each step of a tick, of start (the leftover restore) and of ``drfgov restore``:
after the recovery the product offers, every original limit is back.

A step is anything that changes what the daemon owns: a cgroup file write, an fsync, a rename,
an unlink, a history record (:func:`tests.faults.harness.arm_steps`). A clean run is counted
first; then, for every k, a forked daemon kills itself with a real SIGKILL just before step k.
"""

import json

from tests.faults.harness import (
    daemon_body, failed_ticks_in, limits_lost, make_world, record_figures, restore_body, run_child, unlimited_users,
)

TICKS = 3


def count_steps(world, base, body_of, name):
    steps_file = base / f"{name}.steps.json"
    assert run_child(base, body_of(steps_file), name) == 0, (base / f"{name}.log").read_text()
    return json.loads(steps_file.read_text())


def stale_temporaries(world):
    return [p for d in (world.state_dir, world.runtime_dir) if d.exists() for p in d.iterdir() if p.name.startswith(".")]


def recover_by_start(world, base, name):
    """systemd's restart: the next ``drfgov run`` restores what was left, then governs; a clean
    stop restores again. Returns (exit status, failed ticks)."""
    status = run_child(base, daemon_body(world, 2), name)
    return status, failed_ticks_in(base, name)


def test_sigkill_at_each_step_of_a_tick(base):
    world = make_world(base, 3)
    steps = count_steps(world, base, lambda out: daemon_body(world, TICKS, steps_out=out), "clean")
    assert steps.count("cgroup write") >= 20 and not limits_lost(world.host)
    problems, missed, lost = [], 0, 0
    for k in range(1, len(steps) + 1):
        status = run_child(base, daemon_body(world, TICKS, kill_at=k), f"kill{k}")
        assert status == -9, (base / f"kill{k}.log").read_text()
        restored = run_child(base, restore_body(world), f"restore{k}")  # the unit's ExecStopPost
        lost += len(limits_lost(world.host))
        if restored != 0 or limits_lost(world.host):
            problems.append(f"step {k} ({steps[k - 1]}): ExecStopPost restore exit {restored}, "
                            f"lost {limits_lost(world.host)}")
        status, failed = recover_by_start(world, base, f"start{k}")
        missed += failed + (status != 0)
        lost += len(limits_lost(world.host))
        if status != 0 or limits_lost(world.host) or stale_temporaries(world):
            problems.append(f"step {k} ({steps[k - 1]}): restart exit {status}, lost {limits_lost(world.host)}, "
                            f"left {stale_temporaries(world)}")
    record_figures("sigkill_tick", f"SIGKILL at each step of a run ({TICKS} ticks, 3 users)", len(steps), lost,
                   missed, len(steps), "each kill: ExecStopPost's drfgov restore, then a restart")
    assert not problems and missed == 0


def test_sigkill_at_each_step_of_start_and_of_drfgov_restore(base):
    """Start: a killed run left its limits and snapshot; the next start is killed at each step
    of its own (lock, stale files, the leftover restore, ticks, stop) and the one after that
    recovers alone (no ExecStopPost). Restore: ``drfgov restore`` is killed at each of its
    steps, and the next start recovers."""
    world = make_world(base, 3)
    full = count_steps(world, base, lambda out: daemon_body(world, TICKS, steps_out=out), "clean")
    leave_at = len(full) - full[::-1].index("history record")  # the last tick's record: every limit written

    assert run_child(base, daemon_body(world, TICKS, kill_at=leave_at), "leave") == -9
    assert world.snapshot.exists() and limits_lost(world.host) and not unlimited_users(world.host)
    world.save_image("left")

    def leave_leftovers(_name):
        world.load_image("left")


    start_steps = count_steps(world, base, lambda out: daemon_body(world, 1, steps_out=out), "start-clean")
    leave_leftovers("leave")
    restore_steps = count_steps(world, base, lambda out: restore_body(world, steps_out=out), "restore-clean")
    assert not limits_lost(world.host) and restore_steps.count("cgroup write") >= 15
    problems, missed, injected, lost = [], 0, 0, 0
    for phase, steps, body_of in (("start", start_steps, lambda k: daemon_body(world, 1, kill_at=k)),
                                  ("restore", restore_steps, lambda k: restore_body(world, kill_at=k))):
        for k in range(1, len(steps) + 1):
            leave_leftovers(f"leave-{phase}{k}")
            assert run_child(base, body_of(k), f"{phase}-kill{k}") == -9
            injected += 1
            status, failed = recover_by_start(world, base, f"{phase}-recover{k}")
            missed += failed + (status != 0)
            lost += len(limits_lost(world.host))
            if status != 0 or limits_lost(world.host) or world.snapshot.exists() or unlimited_users(world.host) != world.host.uids:
                problems.append(f"{phase} step {k} ({steps[k - 1]}): recovery exit {status}, lost {limits_lost(world.host)}")
    record_figures("sigkill_start_restore", "SIGKILL at each step of start (leftover restore) and of drfgov restore",
                   injected, lost, missed, injected, "each kill: a restart alone recovers")
    assert not problems and missed == 0


def test_a_textfile_temporary_left_by_sigkill_goes_at_the_next_start(base):
    """Killed while writing the metrics textfile, the daemon left its temporary (the whole body
    written so far) in node_exporter's directory; the next start removed state.json's and
    originals.json's, not this one: one more a kill, for good (the service audit of 2026-11-27).
    node_exporter reads only ``*.prom``, so nothing wrong was exported: they just piled up."""
    import os
    import signal

    textfile_dir = base / "prom"
    world = make_world(base, 2, policy_extra=f"metrics: {{textfile: {textfile_dir}/drfgov.prom}}\n")

    def killed_in_the_textfile():
        fsync = os.fsync

        def killing_fsync(fd):
            if "/.drfgov.prom." in os.readlink(f"/proc/self/fd/{fd}"):
                os.kill(os.getpid(), signal.SIGKILL)
            return fsync(fd)
        os.fsync = killing_fsync
        return daemon_body(world, 5)()

    assert run_child(base, killed_in_the_textfile, "killed") == -signal.SIGKILL, (base / "killed.log").read_text()
    assert [p.name for p in textfile_dir.iterdir() if p.name.startswith(".drfgov.prom.")]
    assert run_child(base, daemon_body(world, 2), "again") == 0, (base / "again.log").read_text()
    assert "left by a run killed while writing" in (base / "again.log").read_text()
    assert list(textfile_dir.iterdir()) == []  # and the textfile itself removed at the clean stop
    assert limits_lost(world.host) == []
