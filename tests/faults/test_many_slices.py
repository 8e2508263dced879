"""1,000 and 10,000 user slices with the soft and hard descriptor limit at 1,024 (so the daemon
cannot raise it): no tick fails, every user is limited, and the first contended tick — every
user new to the snapshot — takes about as long as any other (a snapshot per user made it
quadratic: 30 s at 1,000 users, hours at 10,000).

Counts (not a clock) bound the work: the snapshot may be saved at most a few times a
tick, whatever the number of users."""

import json
import resource
import time

import pytest

from governor.service import snapshot
from tests.faults.harness import close_inherited_descriptors, daemon_body, failed_ticks_in, limits_lost, make_world, record_figures, run_child


@pytest.mark.timeout(960)  # above its child's own limit (900 s), which kills the child and says so
@pytest.mark.parametrize("users,ticks", [(1_000, 4), (10_000, 2)])
def test_many_slices_at_1024_descriptors(base, users, ticks):
    world = make_world(base, users, disks={"254:0": (200e6, 200e6)})  # io.stat and io.pressure read too
    saves = base / "saves.json"

    def body():
        close_inherited_descriptors()
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        count = []
        real = snapshot.save_snapshot

        def counted(*args, **kwargs):
            count.append(1)
            return real(*args, **kwargs)
        snapshot.save_snapshot = counted
        import governor.service.daemon as daemon
        daemon.save_snapshot = counted
        durations, tick = [], daemon.Daemon.tick

        def timed(self):  # a figure for the table, not an assertion
            start = time.monotonic()
            try:
                return tick(self)
            finally:
                durations.append(time.monotonic() - start)
        daemon.Daemon.tick = timed
        status = daemon_body(world, ticks)()
        saves.write_text(json.dumps({"saves": len(count), "soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                                     "tick_s": durations}))
        return status
    status = run_child(base, body, "many", timeout_s=900)
    log = (base / "many.log").read_text()
    state = json.loads(world.state_path.read_text())
    found = json.loads(saves.read_text())
    lost, missed = limits_lost(world.host), failed_ticks_in(base, "many")
    errors = [u["uid"] for u in state["users"] if u["error"]]
    unlimited = [u["uid"] for u in state["users"] if (u["limits"] or {}).get("cpu.max", "max 100000") == "max 100000"]
    record_figures(f"many_slices_{users}", f"{users:,} slices at RLIMIT_NOFILE 1,024/1,024 ({ticks + 1} ticks)", 1,
                   len(lost), missed, 0, f"snapshot saved {found['saves']} time(s); ticks took "
                   + ", ".join(f"{t:.1f}" for t in found["tick_s"]) + " s (this loaded 2-core host)")
    assert status == 0 and missed == 0 and not lost, log[-3000:]
    assert found["soft"] == 1024 and len(state["users"]) == users and not errors and not unlimited
    assert found["saves"] <= ticks + 1, f"{found['saves']} snapshot saves for {users} users"
