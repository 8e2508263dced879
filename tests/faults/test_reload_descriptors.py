"""A reload that ends half the users' governance at RLIMIT_NOFILE 1,024 (issue 16's audit of the
descriptor budget): the old monitor is closed, but the restore of the users no longer governed
still reads their memory.current through its cgroups. A closed cgroup keeps nothing open: no
descriptor is held outside the budget, no tick fails, the final restore succeeds. (Before, each
of those reads kept a file open for good: 1,024 descriptors after one reload, every later tick
EMFILE, and the restore at stop too.)"""

import json
import os
import resource

import pytest

from tests.faults.harness import FIRST_UID, close_inherited_descriptors, make_world, run_child

USERS = 600


@pytest.mark.timeout(660)  # above its child's own limit (600 s), which kills the child and says so
def test_a_reload_ending_half_the_users_governance_keeps_every_descriptor_in_the_budget(base):
    world = make_world(base, USERS)
    for uid in world.host.uids:  # an admin's memory.max: her restore reads memory.current
        (world.host.slice(uid) / "memory.max").write_text(f"{8 * 2**30}\n")
        world.host.original[uid]["memory.max"] = f"{8 * 2**30}\n"
    out = base / "figures.json"

    def body():
        close_inherited_descriptors()
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        daemon = world.daemon()
        errors, descriptors = [], []
        for tick in range(6):
            if tick == 3:
                world.write_policy(f"governed: {{min_uid: {FIRST_UID + USERS // 2}}}\n")
                daemon.reload()
            world.host.step(1.0)
            report = daemon.tick()
            errors += [f"tick {tick}: {u.error}" for u in report.users.values() if u.error]
            descriptors.append(len(os.listdir("/proc/self/fd")))
        errors += [f"restore: {e}" for e in daemon.governor.restore()]
        out.write_text(json.dumps({"errors": errors[:5], "count": len(errors), "descriptors": descriptors,
                                   "governed": len(report.users)}))
        return 0

    assert run_child(base, body, "reload-descriptors", timeout_s=600) == 0, (base / "reload-descriptors.log").read_text()[-3000:]
    found = json.loads(out.read_text())
    assert found["count"] == 0, found["errors"]
    assert found["governed"] == USERS // 2 and max(found["descriptors"]) < 1024 - 100, found["descriptors"]
