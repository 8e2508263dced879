"""Egress shaping in real network namespaces: two uids sending at once through a 20 Mbit/s
link get 15 and 5 Mbit/s of frames with weights 3:1
(measured as TCP payload, :func:`tests.netns.flows.payload`); one alone gets the whole link; removing the
shaping leaves `tc qdisc show` and `nft list ruleset` as they were."""

import time

import pytest

from governor.shaping.htb import HtbTree
from governor.shaping.model import ShapingError
from tests.netns.flows import classify, measure, nft_uid_classes, payload, sh

LINK = 20_000_000
PORTS = {50001: 5001, 50002: 5002}


def shape(netns, weights, allocation=None):
    tree = HtbTree("va", netns)
    tree.install(LINK)
    nft, minors = classify(tree, netns, LINK, weights, allocation)
    return tree, nft, minors


def test_two_uids_share_the_link_by_weight(pair):
    a, _ = pair
    tree, nft, _ = shape(a, {50001: 3.0, 50002: 1.0}, {50001: 15e6, 50002: 5e6})
    rates = measure(PORTS)
    print(f"\nmeasured egress: uid 50001 {rates[50001] / 1e6:.2f} Mbit/s, uid 50002 {rates[50002] / 1e6:.2f} Mbit/s")
    assert rates[50001] == pytest.approx(payload(15e6), rel=0.10) and rates[50002] == pytest.approx(payload(5e6), rel=0.10)
    sent = {minor: stats.bytes for minor, stats in tree.class_stats().items()}
    assert all(sent.get(m, 0) > 0 for m in (0x10, 0x11))  # counted by class, for demand
    ours, theirs = quiet_dumps(tree)
    assert ours == theirs  # the hand-parsed dump reads what pyroute2 reads
    tree.close()


def quiet_dumps(tree, attempts=50):
    """Our dump and pyroute2's of one moment: taken between two of ours that are equal, since a
    straggling ACK of a finished flow can move a class by a packet between any two dumps."""
    for _ in range(attempts):
        before = tree.class_stats()
        theirs = decoded_by_pyroute2(tree)
        if tree.class_stats() == before:
            return before, theirs
        time.sleep(0.1)
    pytest.fail(f"the classes' counters kept moving for {attempts} dumps after the flows ended")


def decoded_by_pyroute2(tree):
    from governor.shaping.model import HANDLE_MAJOR, ClassStats

    out = {}
    for c in tree.ipr.get_classes(tree.index):
        if c["handle"] >> 16 == HANDLE_MAJOR:
            stats = c.get_attr("TCA_STATS2")
            basic, queue = stats.get_attr("TCA_STATS_BASIC"), stats.get_attr("TCA_STATS_QUEUE")
            out[c["handle"] & 0xFFFF] = ClassStats(basic["bytes"], basic["packets"], queue["drops"], queue["overlimits"])
    return out


def test_one_uid_alone_gets_the_whole_link(pair):
    a, _ = pair
    tree, nft, _ = shape(a, {50001: 3.0, 50002: 1.0})
    rates = measure({50002: PORTS[50002]})
    print(f"\nmeasured egress alone: uid 50002 {rates[50002] / 1e6:.2f} Mbit/s of a 20 Mbit/s link")
    assert rates[50002] == pytest.approx(payload(LINK), rel=0.10)
    tree.close()


def test_removing_leaves_tc_and_nft_as_they_were(pair):
    a, _ = pair
    sh("ip", "netns", "exec", a, "nft", "add", "table", "ip", "admin")  # someone else's table stays
    before = (sh("ip", "netns", "exec", a, "tc", "qdisc", "show"), sh("ip", "netns", "exec", a, "nft", "list", "ruleset"))
    tree, nft, minors = shape(a, {50001: 1.0, 50002: 1.0})
    assert "d7f0:" in sh("ip", "netns", "exec", a, "tc", "qdisc", "show") and nft_uid_classes(a) == minors
    assert nft.apply({50001: minors[50001]}, minors) == 1 and nft_uid_classes(a) == {50001: minors[50001]}
    assert tree.remove() and nft.remove()
    after = (sh("ip", "netns", "exec", a, "tc", "qdisc", "show"), sh("ip", "netns", "exec", a, "nft", "list", "ruleset"))
    assert after == before
    assert not tree.remove() and not nft.remove()  # nothing of ours left
    tree.close()


def test_an_admins_root_qdisc_is_never_replaced(pair):
    a, _ = pair
    sh("ip", "netns", "exec", a, "tc", "qdisc", "add", "dev", "va", "root", "handle", "1:", "tbf",
       "rate", "1mbit", "burst", "32kbit", "latency", "400ms")
    tree = HtbTree("va", a)
    with pytest.raises(ShapingError, match="tbf root qdisc is configured already"):
        tree.install(LINK)
    assert "tbf" in sh("ip", "netns", "exec", a, "tc", "qdisc", "show", "dev", "va")
    tree.close()
