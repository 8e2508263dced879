"""The installed ``drfgov run`` shaping real traffic on the VM's kernel: two users in their own
``user-UID.slice`` send through a 20 Mbit/s link with net weights 3:1; the daemon measures them
through their HTB classes, finds the link contended, and its DRF ceilings hold them near 15 and
5 Mbit/s (a 3:1 split of what the link delivers in the run). Stopping it leaves tc, links and nftables as they were."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from pyroute2 import IPRoute  # imported now: under TCG a first import takes seconds

from cgroups import Cgroup
from tests.cli.conftest import REPO, _installed_drfgov, cli_env
from tests.netns.flows import Flows, drop_host_pair, make_host_pair, sh, traffic_command
from tests.netns.traffic import MAX_SEND_S

ROOT = Path("/sys/fs/cgroup")
USERS = {50001: 5001, 50002: 5002}
POLICY = """\
interval_s: 0.5
backend: cgroupfs
enforce: [cpu, memory, net]
weights: {{users: {{uid50001: {{net: 3}}, uid50002: {{net: 1}}}}}}
reserve: {{cpu_cores: 0, memory_bytes: 0}}
capacity: {{nics: {{va: {{bits_per_s: 20000000}}}}}}
state_path: {tmp}/state.json
history: {{path: {tmp}/history.db}}
"""


@pytest.fixture
def link():
    """va (10.77.0.1) in this namespace ↔ vb (10.77.0.2) in drfgov-b."""
    make_host_pair()
    yield
    drop_host_pair()


@pytest.fixture
def slices():
    Cgroup(ROOT).enable_controllers(["cpu", "memory", "io"])
    user_slice = ROOT / "user.slice"
    user_slice.mkdir(exist_ok=True)
    Cgroup(user_slice).enable_controllers(["cpu", "memory", "io"])
    paths = {uid: user_slice / f"user-{uid}.slice" for uid in USERS}
    for path in paths.values():
        path.mkdir(exist_ok=True)
    yield paths
    for path in paths.values():
        for pid in Cgroup(path).procs():
            os.kill(pid, signal.SIGKILL)
    time.sleep(0.5)
    for path in paths.values():
        path.rmdir()


def htb_ceilings(ifname: str) -> dict[int, int]:
    """Class handle → ceil in bits/s, as the kernel reports it."""
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        return {c["handle"]: 8 * c.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")["ceil"]
                for c in ipr.get_classes(index)}


def send_as(uid: int, cgroup: Path, seconds: float) -> subprocess.Popen:
    script = f'echo $$ > {cgroup}/cgroup.procs && exec setpriv --reuid={uid} --regid={uid} --clear-groups "$@"'
    return subprocess.Popen(["sh", "-c", script, "sh", *traffic_command("send", "10.77.0.2", str(USERS[uid]),
                                                                        "--seconds", str(seconds))], cwd="/")


def test_the_daemon_shares_a_contended_link_by_net_weight(link, slices, tmp_path):
    before = [sh(*cmd) for cmd in (("tc", "qdisc", "show"), ("nft", "list", "ruleset"))]
    config = tmp_path / "drfgov.yaml"
    config.write_text(POLICY.format(tmp=tmp_path))
    daemon = subprocess.Popen([_installed_drfgov(), "run", "--config", str(config)], cwd=REPO, env=cli_env(tmp_path),
                              stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(720):  # its first tick (TCG: Python starts slowly): shaping installed, state published
            if (tmp_path / "state.json").exists() or daemon.poll() is not None:
                break
            time.sleep(0.25)
        assert (tmp_path / "state.json").exists(), \
            f"drfgov run did not start: {daemon.stderr.read() if daemon.poll() is not None else 'no state after 180 s'}"
        first = json.loads((tmp_path / "state.json").read_text())
        with Flows(USERS, spawn_sender=lambda uid: send_as(uid, slices[uid], MAX_SEND_S)) as flows:
            # measured from when both flows run (a sender's Python start takes seconds under
            # TCG), after the daemon has had 10 s to find the link contended and shape it
            window = flows.window(flows.start(*USERS), seconds=10, skip=10)
            kernel_ceils = htb_ceilings("va")  # while both still send: what the kernel holds,
            state = json.loads((tmp_path / "state.json").read_text())  # and what the daemon decided
            rates = flows.rates(window)
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, log = daemon.communicate(timeout=60)
    ticks_per_s = (state["tick"] - first["tick"]) / (state["time_unix_s"] - first["time_unix_s"])
    print(f"\ndaemon-shaped egress: uid 50001 {rates[50001] / 1e6:.2f} Mbit/s, uid 50002 {rates[50002] / 1e6:.2f} "
          f"Mbit/s ({ticks_per_s:.2f} ticks/s under TCG)")
    users = {u["uid"]: u for u in state["users"]}
    print({uid: (u["demand"].get("net:va:tx"), u["allocation"].get("net:va:tx"), u["classes"]) for uid, u in users.items()})
    assert daemon.returncode == 0, log
    assert "net:va:tx" in state["saturated"] and "net:va:rx" in state["capacity"]
    assert users[50001]["dominant_resource"] == "net:va:tx"
    # under TCG the link's absolute rate follows the host's load: the split is the property
    assert rates[50001] / rates[50002] == pytest.approx(3.0, rel=0.15)
    ceil = users[50001]["classes"]["net:va:tx"]["ceil_bits_per_s"]
    assert ceil == pytest.approx(15e6, rel=0.05) and kernel_ceils[0xD7F00010] == ceil // 8 * 8  # as the kernel has it
    assert [sh(*cmd) for cmd in (("tc", "qdisc", "show"), ("nft", "list", "ruleset"))] == before
    assert "drfgov" not in sh("ip", "-br", "link")
