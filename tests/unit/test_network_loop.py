"""Network in the control loop, on a simulated host and link: per-user rates from class
counters, weighted DRF over a contended link, work conservation, hysteresis, users leaving —
plus the pure pieces of governor.control.netplan. (Real shaping is proven in tests/netns and tests/vm.)"""

import pytest

from governor.control.loop import Governor
from governor.control.model import Capacity
from governor.control.netplan import net_at_ceil, net_over, net_rates, plan_net, settle
from governor.config.policy import Policy
from governor.shaping.model import ClassRate, Link, NetSample, link_resources
from tests.simhost import SimBackend, SimHost, SimMonitor

from governor.control.resources import CPU, Resource
from tests.simnet import LINK, LINKS, MBIT, SimNetwork


def setup(wants, weights, **policy):
    host = SimHost(cores=4.0)
    for i, name in enumerate(wants):
        host.add(1000 + i, name, 0.1)
    net = SimNetwork(host)
    net.want = {1000 + i: w for i, w in enumerate(wants.values())}
    gov = Governor(Policy(enforce=("cpu", "memory", "io", "net"), **policy).loop_settings(),
                   Capacity(host.cores, host.memory_bytes, links={LINK: 100 * MBIT}),
                   SimMonitor(host), SimBackend(host), host.clock,
                   lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0, "net": weights[u.name]}, network=net)
    return host, net, gov


def on_two_cores(users):
    """2 CPUs and the 100 Mbit/s link; ``users``: (name, cores wanted, bits/s wanted) each, uids
    from 1000, every weight 1."""
    host = SimHost(cores=2.0)
    net = SimNetwork(host)
    for i, (name, cores, bits_per_s) in enumerate(users):
        host.add(1000 + i, name, cores)
        if bits_per_s:
            net.want[1000 + i] = bits_per_s
    gov = Governor(Policy(enforce=("cpu", "memory", "io", "net")).loop_settings(),
                   Capacity(host.cores, host.memory_bytes, links={LINK: 100 * MBIT}),
                   SimMonitor(host), SimBackend(host), host.clock, lambda u: {}, network=net)
    return host, net, gov


def run(host, net, gov, ticks):
    reports = []
    for _ in range(ticks):
        reports.append(gov.tick())
        net.step(1.0)
        host.step(1.0)
    return reports


def test_a_contended_link_is_shared_by_net_weight():
    host, net, gov = setup({"alice": 100 * MBIT, "bob": 100 * MBIT}, {"alice": 3.0, "bob": 1.0})
    reports = run(host, net, gov, 15)
    classes = net.in_force[LINK]
    assert classes[1000].rate_bits_per_s == pytest.approx(75 * MBIT) and classes[1001].rate_bits_per_s == pytest.approx(25 * MBIT)
    assert classes[1000].ceil_bits_per_s == pytest.approx(75 * MBIT, rel=0.02)
    assert classes[1001].ceil_bits_per_s == pytest.approx(25 * MBIT, rel=0.02)
    assert net.got[1000] == pytest.approx(75 * MBIT, rel=0.02) and net.got[1001] == pytest.approx(25 * MBIT, rel=0.02)
    last = reports[-1]
    assert LINK in last.saturated and last.users[1000].dominant_resource == LINK
    assert last.users[1000].usage[LINK] == pytest.approx(75 * MBIT, rel=0.02)
    assert last.users[1000].classes[LINK] == classes[1000]


def test_a_class_over_its_rate_once_a_tick_does_not_ratchet_her_demand_to_the_link():
    """The gaming audit of 2026-11-27: a 10 Mbit/s sender whose class went over its rate once
    a tick (a short burst) had her demand probed from her last demand, up to the whole link;
    DRF then held the other user's ceil at half the link while 40 Mbit/s lay idle."""
    host, net, gov = setup({"burster": 10 * MBIT, "bulk": 100 * MBIT}, {"burster": 1.0, "bulk": 1.0})
    for _ in range(30):
        report = gov.tick()
        net.step(1.0)
        host.step(1.0)
        net.over[1000] = net.over.get(1000, 0) + 1  # her burst
    assert report.users[1000].demand[LINK] <= 1.25 * 10 * MBIT + 1
    assert net.got[1001] >= 85 * MBIT  # DRF on true demands: 90


def test_a_sender_held_at_her_ceil_on_a_contended_link_reads_as_wanting_the_link():
    """The scenario cpu-net-mixed (tier 4), simulated: a CPU user, a bulk sender and one who both
    computes (a core) and sends, equal weights. DRF on the true vectors splits the link between the
    senders and gives the mixed user the CPU of her network share (half her core); a probe from
    what she sent alone read each sender as wanting 1.25 times her half of the link, and gave the
    mixed user 0.8 of her core."""
    host, net, gov = on_two_cores([("cpu", 2.0, 0.0), ("net", 0.05, 100 * MBIT), ("mixed", 1.0, 100 * MBIT)])
    reports = run(host, net, gov, 25)
    last = reports[-1].users
    assert last[1001].demand[LINK] == pytest.approx(100 * MBIT) and last[1002].demand[LINK] == pytest.approx(100 * MBIT)
    assert net.got[1001] == pytest.approx(50 * MBIT, rel=0.05) and net.got[1002] == pytest.approx(50 * MBIT, rel=0.05)
    mixed = host.users[1002].limits.cpu_max.cores
    assert mixed == pytest.approx(0.5 * last[1002].demand[CPU], rel=0.1)  # her network share of her core
    assert host.users[1000].limits.cpu_max.cores > 2.5 * mixed
    # and one who leaves a raise unused reads as her rate again at once
    net.want[1002] = 20 * MBIT
    reports = run(host, net, gov, 3)
    assert 20 * MBIT <= reports[-1].users[1002].demand[LINK] <= 21 * MBIT  # her rate (her CPU held: a little more)


def test_a_lone_sender_beside_cpu_users_keeps_the_whole_link():
    """The audit of 2026-11-28: a sender (a twentieth of a core, wanting the link) beside two CPU
    users on 2 CPUs. DRF holds her units where the CPU fills (her allocation of the link, half
    of it), and a link whose demands alone reached its capacity counted as contended: her ceil
    followed that allocation with the other half idle — every other tick, and for good once a
    sender at her ceil was probed from her demand before. Ceils follow the allocations only
    where these fill the link."""
    host, net, gov = on_two_cores([("cpu0", 2.0, 0.0), ("cpu1", 2.0, 0.0), ("sender", 0.05, 100 * MBIT)])
    for report in run(host, net, gov, 20)[5:]:
        assert report.users[1002].allocation[LINK] < 60 * MBIT  # DRF's units, bound by the CPU
    got = []
    for _ in range(10):
        run(host, net, gov, 1)
        got.append(net.got[1002])
    assert min(got) == pytest.approx(100 * MBIT)
    assert net.in_force[LINK][1002].ceil_bits_per_s == 100 * MBIT


def test_a_sender_at_her_rate_floor_whom_htb_does_not_hold_back_is_not_pressed():
    """From the review of 2026-11-28: a sender of 47 Mbit/s beside a bulk sender, equal weights,
    runs at 94% of her ceil (her guaranteed rate, 50, above her allocation) and HTB never holds
    her back (overlimits stand). At her ceil alone she read as pressed and was probed up to the
    link; pressed needs overlimits rising too, so her demand stays a probe over her rate."""
    host, net, gov = setup({"modest": 47 * MBIT, "bulk": 100 * MBIT}, {"modest": 1.0, "bulk": 1.0})
    last = run(host, net, gov, 30)[-1].users
    assert net.in_force[LINK][1000].ceil_bits_per_s == 50 * MBIT and net.got[1000] == pytest.approx(47 * MBIT)
    assert 47 * MBIT <= last[1000].demand[LINK] <= 1.25 * 47 * MBIT + 1
    assert net.got[1001] >= 50 * MBIT


def test_a_lone_sender_beside_cpu_users_is_not_contended():
    """A lone sender beside CPU users (the test above), as the reports say it: her link is not contended while
    DRF's allocations do not fill it (her ceil is the link), whatever the demands add up to."""
    host, net, gov = on_two_cores([("cpu0", 2.0, 0.0), ("sender", 0.05, 100 * MBIT)])
    for report in run(host, net, gov, 12)[4:]:
        assert LINK not in report.saturated and CPU in report.saturated
        assert report.users[1001].classes[LINK].ceil_bits_per_s == 100 * MBIT


def test_one_user_alone_may_use_the_whole_link():
    host, net, gov = setup({"alice": 0.0, "bob": 100 * MBIT}, {"alice": 3.0, "bob": 1.0})
    run(host, net, gov, 12)
    assert net.got[1001] == pytest.approx(100 * MBIT, rel=0.02)
    assert net.in_force[LINK][1001].ceil_bits_per_s == pytest.approx(100 * MBIT, rel=0.02)


def test_an_uncontended_link_caps_nobody_and_settled_classes_are_not_rewritten():
    host, net, gov = setup({"alice": 20 * MBIT, "bob": 30 * MBIT}, {"alice": 1.0, "bob": 1.0})
    run(host, net, gov, 6)
    assert all(c.ceil_bits_per_s == 100 * MBIT for c in net.in_force[LINK].values())
    assert net.got == {1000: pytest.approx(20 * MBIT), 1001: pytest.approx(30 * MBIT)}
    before = dict(net.in_force[LINK])
    run(host, net, gov, 3)
    assert net.in_force[LINK] == before


def test_a_user_who_leaves_loses_her_class():
    host, net, gov = setup({"alice": 50 * MBIT, "bob": 50 * MBIT}, {"alice": 1.0, "bob": 1.0})
    run(host, net, gov, 3)
    assert set(net.in_force[LINK]) == {1000, 1001}
    host.users.pop(1001)  # she logged out: her slice is gone
    net.want.pop(1001)
    run(host, net, gov, 1)
    assert set(net.in_force[LINK]) == {1000}


# -- the pure pieces --------------------------------------------------------------------------------

def sample(t, sent, over=None):
    return NetSample(t, {LINK: sent}, {LINK: over or {}})


def test_rates_are_bits_per_second_and_a_counter_going_backwards_gives_none():
    assert net_rates(sample(0, {1: 0}), sample(2, {1: 250_000}), 1) == {LINK: 1_000_000}
    assert net_rates(sample(0, {1: 900}), sample(1, {1: 100}), 1) == {LINK: 0.0}  # class recreated
    assert net_rates(None, sample(1, {1: 100}), 1) == {LINK: 0.0}
    assert net_rates(sample(0, {}), sample(1, {1: 100}), 1) == {LINK: 0.0}  # she was not classified before


def test_overlimits_rising_and_running_at_a_ceil_below_the_link():
    prev, now = sample(0, {1: 0}, {1: 5}), sample(1, {1: 0}, {1: 9})
    assert net_at_ceil({LINK: 0.0}, {LINK: None}, LINKS) == frozenset()
    assert net_over(prev, now, 1) == {LINK}
    quiet = sample(1, {1: 0}, {1: 5})
    assert net_over(prev, quiet, 1) == frozenset() and net_over(None, now, 1) == frozenset()
    capped = ClassRate(10_000_000, 20_000_000)
    assert net_at_ceil({LINK: 19e6}, {LINK: capped}, LINKS) == {LINK}
    assert net_at_ceil({LINK: 10e6}, {LINK: capped}, LINKS) == frozenset()
    at_link = ClassRate(10_000_000, 100_000_000)
    assert net_at_ceil({LINK: 99e6}, {LINK: at_link}, LINKS) == frozenset()  # the link, not a cap


def test_plan_ceil_follows_the_allocation_only_when_contended():
    weights, alloc = {1: 3.0, 2: 1.0}, {1: {LINK: 70e6}, 2: {LINK: 30e6}}
    free = plan_net(LINKS, weights, alloc, set())[LINK]
    assert free[1] == ClassRate(75_000_000, 100_000_000) and free[2] == ClassRate(25_000_000, 100_000_000)
    tight = plan_net(LINKS, weights, alloc, {LINK})[LINK]
    assert tight[1] == ClassRate(75_000_000, 75_000_000)  # never below her guaranteed rate
    assert tight[2] == ClassRate(25_000_000, 30_000_000)


def test_settle_keeps_a_class_inside_the_hysteresis_band():
    now = {1: ClassRate(100, 1000), 2: ClassRate(100, 1000)}
    planned = {1: ClassRate(100, 1040), 2: ClassRate(100, 1100), 3: ClassRate(50, 60)}
    assert settle(now, planned, 0.05) == {1: now[1], 2: planned[2], 3: planned[3]}


def test_links_name_each_direction():
    links = link_resources({"eth0": 1e9, "eth1": 1e8}, {"eth0": True})
    assert [str(r) for r in links] == ["net:eth0:tx", "net:eth0:rx", "net:eth1:tx"]
    assert links[Resource.parse("net:eth0:rx")] == Link(Resource.link("eth0", "rx"), 1e9)


@pytest.mark.parametrize("exc", [OverflowError("more governed users than HTB class ids"), RuntimeError("a bug")])
@pytest.mark.parametrize("where", ["sample", "apply"])
def test_a_shaping_failure_of_any_kind_costs_that_ticks_shaping_not_the_tick(exc, where):
    """Only a ShapingError was caught: any other failure of the network (65,520 users' class
    ids, a timeout, a bug) failed the whole tick — no cgroup limit written — and five in a row
    stopped the daemon (the shaping audit of 2026-11-26)."""
    host, net, gov = setup({"alice": 100e6, "bob": 100e6}, {"alice": 3.0, "bob": 1.0})
    gov.tick(), host.step(1.0), net.step(1.0)

    class Failing:
        def __getattr__(self, name):
            return getattr(net, name)

        def sample(self, uids):
            if where == "sample":
                raise exc
            return net.sample(uids)

        def apply(self, wanted):
            raise exc

    gov.network = Failing()
    report = gov.tick()
    assert report.network_error.endswith(f"internal error: {type(exc).__name__}: {exc}")
    assert all(r.error is None and r.limits is not None for r in report.users.values())  # the cgroups governed


def test_a_ceil_left_within_the_band_below_an_idle_link_is_raised_to_it():
    """Bob dropped to 4 Mbit/s of 100, then went idle: alice's ceil of 96 Mbit/s was within the
    5% band of the link and stayed, for good, with nobody else on it (the shaping audit)."""
    host, net, gov = setup({"alice": 100 * MBIT, "bob": 100 * MBIT}, {"alice": 1.0, "bob": 1.0})
    run(host, net, gov, 15)
    net.want[1001] = 4.0 * MBIT
    run(host, net, gov, 30)
    net.want[1001] = 0.0
    run(host, net, gov, 30)
    assert net.in_force[LINK][1000].ceil_bits_per_s == 100 * MBIT
