"""The Shaper the daemon uses, on this host's kernel in a network namespace (egress; ingress
needs act_connmark, which only the VM's kernel has: tests/vm/test_kernel_ingress.py)."""

import subprocess
import time

import pytest

from governor.control.netplan import net_rates, plan_net
from governor.control.resources import Resource
from governor.shaping.model import link_resources
from governor.shaping.shaper import NFT_CHECK_S, Shaper, remove_all
from tests.netns.flows import measure, payload, sh

VA_TX = Resource.link("va", "tx")

LINK = 20_000_000
PORTS = {50001: 5001, 50002: 5002}


def test_the_shaper_counts_and_shapes_each_user(pair):
    a, _ = pair
    links = link_resources({"va": LINK}, {})
    shaper = Shaper(links, time.monotonic, netns=a)
    shaper.install()
    shaper.sample(list(PORTS))  # gives them class ids; their classes come with the first apply
    shaper.apply(plan_net(links, {50001: 3.0, 50002: 1.0}, {50001: {VA_TX: 15e6}, 50002: {VA_TX: 5e6}}, {VA_TX}))
    first = shaper.sample(list(PORTS))
    rates = measure(PORTS)
    second = shaper.sample(list(PORTS))
    counted = {uid: net_rates(first, second, uid)[VA_TX] for uid in PORTS}
    print(f"\nshaper: measured {rates[50001] / 1e6:.2f}/{rates[50002] / 1e6:.2f} Mbit/s payload; "
          f"class counters {counted[50001] / 1e6:.2f}/{counted[50002] / 1e6:.2f} Mbit/s over the whole sample")
    assert rates[50001] == pytest.approx(payload(15e6), rel=0.10) and rates[50002] == pytest.approx(payload(5e6), rel=0.10)
    assert counted[50001] / counted[50002] == pytest.approx(3.0, rel=0.15)  # her bytes, by her class
    assert shaper.in_force[VA_TX][50001].ceil_bits_per_s == 15_000_000
    shaper.close()


def test_install_clears_a_crashed_runs_leftovers_and_remove_all_restores_exactly(pair):
    a, _ = pair
    before = (sh("ip", "netns", "exec", a, "tc", "qdisc", "show"), sh("ip", "netns", "exec", a, "nft", "list", "ruleset"))
    links = link_resources({"va": LINK}, {})
    crashed = Shaper(links, time.monotonic, netns=a)
    crashed.install()
    crashed.sample([50001, 50002])
    crashed.apply(plan_net(links, {50001: 1.0, 50002: 1.0}, {}, set()))
    crashed.close()  # the process died: its tree and table are still there
    fresh = Shaper(links, time.monotonic, netns=a)
    fresh.install()
    classes = sh("ip", "netns", "exec", a, "tc", "class", "show", "dev", "va")
    assert "d7f0:10" not in classes and "d7f0:1 " in classes  # the old users' classes are gone
    fresh.close()
    assert remove_all(a) == []
    after = (sh("ip", "netns", "exec", a, "tc", "qdisc", "show"), sh("ip", "netns", "exec", a, "nft", "list", "ruleset"))
    assert after == before


def test_a_user_who_leaves_has_her_class_deleted(pair):
    """She was no longer mapped when the classes were applied, so her class was not among those
    in force and was never deleted: it kept its guaranteed rate, and the next owner of its minor
    inherited it (the shaping audit of 2026-11-26)."""
    a, _ = pair
    links = link_resources({"va": LINK}, {})
    shaper = Shaper(links, time.monotonic, netns=a)
    shaper.install()

    def classes():
        return sorted(line.split()[2] for line in sh("ip", "netns", "exec", a, "tc", "class", "show", "dev", "va")
                      .splitlines())

    def tick(uids):
        shaper.sample(uids)
        assert shaper.apply(plan_net(links, dict.fromkeys(uids, 1.0), {u: {} for u in uids}, set())) == []

    try:
        tick([4001, 4002, 4003])
        assert classes() == ["d7f0:1", "d7f0:10", "d7f0:11", "d7f0:12", "d7f0:ffff"]
        tick([4001])
        assert classes() == ["d7f0:1", "d7f0:10", "d7f0:ffff"]
        tick([4001, 4004])  # a new user: a class of her own, nothing of theirs
        assert classes() == ["d7f0:1", "d7f0:10", "d7f0:11", "d7f0:ffff"] and sorted(shaper.in_force[VA_TX]) == [4001, 4004]
    finally:
        shaper.close()


def test_shaping_removed_under_it_is_installed_again(pair):
    """A firewall reload (``nft flush ruleset``) or a deleted and re-made interface took the
    table or the tree away without a word: nothing was shaped or counted for the daemon's
    lifetime (the shaping audit of 2026-11-26). Both are put back, and every class rewritten."""
    a, b = pair
    links = link_resources({"va": LINK}, {})
    now = [0.0]
    shaper = Shaper(links, lambda: now[0], netns=a)
    shaper.install()
    plan = plan_net(links, {4001: 1.0}, {4001: {}}, set())

    def table():
        return "drfgov" in sh("ip", "netns", "exec", a, "nft", "list", "tables")

    def classes():
        return sorted(line.split()[2] for line in sh("ip", "netns", "exec", a, "tc", "class", "show", "dev", "va")
                      .splitlines())

    try:
        shaper.sample([4001])
        assert shaper.apply(plan) == [] and "d7f0:10" in classes()
        sh("ip", "netns", "exec", a, "nft", "flush", "ruleset")
        now[0] += NFT_CHECK_S
        shaper.sample([4001])
        assert table() and shaper.apply(plan) == [] and "d7f0:10" in classes()
        sh("ip", "netns", "exec", a, "tc", "qdisc", "del", "dev", "va", "root")
        now[0] += 1.0
        shaper.sample([4001])  # the tree is checked every tick
        assert shaper.apply(plan) == [] and "d7f0:10" in classes()
        sh("ip", "netns", "exec", a, "nft", "flush", "ruleset")
        shaper.sample([4001, 4002])  # a login within the check's period: the map write finds no table
        assert table() and shaper.mapped.keys() == {4001, 4002}
    finally:
        shaper.close()


def test_an_ifb_device_whose_interface_is_gone_is_removed_and_nothing_else(pair):
    """An IFB device drfgovN went only with its interface N's redirect: a VLAN or VPN deleted, or
    a start that failed half-way, left it for good (the shaping audit of 2026-11-26). Ours go,
    whether their interface is there or not; an IFB of the admin's stays."""
    a, _ = pair

    def links():
        return {line.split(":")[1].strip().split("@")[0] for line in sh("ip", "-n", a, "-o", "link").splitlines()}

    sh("ip", "-n", a, "link", "add", "vx", "type", "veth", "peer", "name", "vy")
    gone = int(sh("ip", "-n", a, "-o", "link", "show", "vx").split(":")[0])
    va = int(sh("ip", "-n", a, "-o", "link", "show", "va").split(":")[0])
    for name in (f"drfgov{gone}", f"drfgov{va}", "ifb7"):
        sh("ip", "-n", a, "link", "add", name, "type", "ifb")
    sh("ip", "-n", a, "link", "del", "vx")
    assert remove_all(a) == []
    assert links() == {"lo", "va", "ifb7"}
    sh("ip", "-n", a, "link", "del", "ifb7")


def test_an_interface_gone_at_runtime_is_said_every_tick_and_the_others_stay_shaped(pair):
    """One shaped interface gone (a VPN down, an adapter out) used to leave every link unshaped
    until it came back: the install was all or nothing. Now that link alone is dropped, said
    in every apply's errors and tried again each tick; the others are counted and shaped; once
    the interface is back its classes are written again. With every link gone the sample
    fails, and says why."""
    from governor.shaping.model import ShapingError

    a, _ = pair
    sh("ip", "-n", a, "link", "add", "vx", "type", "veth", "peer", "name", "vy")
    links = link_resources({"va": LINK, "vx": LINK}, {})
    vx_tx = Resource.link("vx", "tx")
    shaper = Shaper(links, time.monotonic, netns=a)
    plan = plan_net(links, {4001: 1.0}, {4001: {}}, set())

    def classes(ifname):
        return sorted(line.split()[2] for line in sh("ip", "netns", "exec", a, "tc", "class", "show", "dev", ifname)
                      .splitlines())

    try:
        shaper.install()
        shaper.sample([4001])
        assert shaper.apply(plan) == [] and "d7f0:10" in classes("va")
        sh("ip", "-n", a, "link", "del", "vx")
        for _ in range(3):
            sample = shaper.sample([4001])
            assert VA_TX in sample.bytes and vx_tx not in sample.bytes
            errors = shaper.apply(plan)
            assert len(errors) == 1 and errors[0].startswith(f"{vx_tx}: not shaped: ") and "vx" in errors[0][20:]
            assert "d7f0:10" in classes("va")
        sh("ip", "-n", a, "link", "del", "va")
        with pytest.raises(ShapingError, match="va.*vx|vx.*va"):
            shaper.sample([4001])
        sh("ip", "-n", a, "link", "add", "vx", "type", "veth", "peer", "name", "vy")
        shaper.sample([4001])
        assert shaper.apply(plan) == [f"{VA_TX}: not shaped: va: no such interface"] and "d7f0:10" in classes("vx")
        assert shaper.mapped == {4001: 0x10}
    finally:
        shaper.close()
        subprocess.run(["ip", "-n", a, "link", "del", "vx"], capture_output=True)


def test_a_start_shapes_around_an_interface_away_and_fails_on_a_refused_link(pair):
    """At a start or a reload (``every_link``) the policy is being checked: a link the kernel or
    an admin refuses (here an admin's root qdisc) fails the install, which leaves neither the
    other trees nor the table. An interface merely away (a VPN down at boot) does not: it
    stopped the whole start, so nothing was governed (the review of the per-link install);
    the others are shaped and it is said and tried each tick."""
    from governor.shaping.model import ShapingError

    a, _ = pair
    shaper = Shaper(link_resources({"va": LINK, "vz": LINK}, {}), time.monotonic, netns=a)
    try:
        shaper.install(every_link=True)
        assert shaper.missing == {Resource.link("vz", "tx"): "vz: no such interface"}
        assert "d7f0" in sh("ip", "netns", "exec", a, "tc", "qdisc", "show", "dev", "va")
    finally:
        shaper.remove()
    sh("ip", "-n", a, "link", "add", "vz", "type", "veth", "peer", "name", "vw")
    sh("ip", "netns", "exec", a, "tc", "qdisc", "add", "dev", "vz", "root", "handle", "1:", "bfifo")
    try:
        with pytest.raises(ShapingError, match="vz: a bfifo root qdisc is configured already"):
            shaper.install(every_link=True)
        assert "d7f0" not in sh("ip", "netns", "exec", a, "tc", "qdisc", "show", "dev", "va")
        assert "drfgov" not in sh("ip", "netns", "exec", a, "nft", "list", "tables")
        assert shaper.nft is None and shaper.trees == {}
    finally:
        subprocess.run(["ip", "-n", a, "link", "del", "vz"], capture_output=True)
