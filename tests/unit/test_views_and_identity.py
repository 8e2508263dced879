"""Weights from users and groups, exemptions, host setup, and the shares/explain views."""

import pytest

from governor.service.hostsetup import SetupError, is_dry_run, set_up
from governor.config.identity import PolicyWeights, exempt_names, groups_of, kind_weights
from governor.control.loop import Governor
from governor.control.model import Capacity
from governor.config.policy import Policy, policy_from_text
from governor.cli.views import amount, explain_lines, find_user, shares_table, summary_line
from governor.service.state import state_document
from monitors.procmonitor import ProcMonitor
from monitors.model import GovernedUser
from tests.fakecgroup import FIXTURES
from tests.simhost import SimBackend, SimHost, SimMonitor


def test_kind_weights_fill_missing_kinds_from_the_default():
    assert kind_weights(2.0, 1.0) == {"cpu": 2.0, "memory": 2.0, "io": 2.0, "net": 2.0}
    assert kind_weights({"cpu": 3.0}, 0.5) == {"cpu": 3.0, "memory": 0.5, "io": 0.5, "net": 0.5}
    assert kind_weights({"cpu": 3.0}, {"memory": 2.0}) == {"cpu": 3.0, "memory": 2.0, "io": 1.0, "net": 1.0}
    default = {"io": 4.0}
    assert kind_weights(default, default) == {"cpu": 1.0, "memory": 1.0, "io": 4.0, "net": 1.0}


def test_group_weights_and_exemptions_use_the_real_group_database():
    assert "root" in groups_of("root") and groups_of("no-such-user-xyz") == []
    policy, _ = policy_from_text("weights: {groups: {root: 5}}\ngoverned: {exempt_groups: [root], exempt_users: [x]}\n")
    weights = PolicyWeights(policy)
    assert weights(GovernedUser(0, "root", None))["cpu"] == 5.0
    assert weights(GovernedUser(12345, "no-such-user-xyz", None))["cpu"] == 1.0
    assert {"root", "x"} <= exempt_names(policy)  # root: primary group member


HYBRID = (FIXTURES / "mountinfo" / "hybrid.txt")


def test_without_any_cgroup_interface_only_a_dry_run_can_be_set_up():
    """Neither cgroup v2 with its controllers nor the v1 hierarchies (issue 18: a hybrid host
    is governed through v1 now; tests/v1host proves it on the real kernel)."""
    mountinfo = "".join(line + "\n" for line in HYBRID.read_text().splitlines() if " - cgroup" not in line)
    with pytest.raises(SetupError, match="cannot enforce.*--dry-run --once"):
        set_up(Policy(), dry_run=False, clock=lambda: 0.0, mountinfo=mountinfo)
    host = set_up(Policy(), dry_run=True, clock=lambda: 0.0, mountinfo=mountinfo)
    assert isinstance(host.monitor, ProcMonitor) and host.backend.name == "dry-run"
    assert host.capacity.cpu_cores > 0 and host.capacity.disks == {}
    assert is_dry_run(Policy(mode="dry-run"), False) and not is_dry_run(Policy(), False)


def test_on_the_proc_path_nobody_is_never_governed_and_max_uid_leaves_out_dynamic_users(monkeypatch):
    """On a host measured from /proc (no per-user slices), a daemon running as nobody (65534)
    or as a systemd DynamicUser= (61184–65519) owns processes as a user does: only the uid
    tells them apart. nobody is never a person; above 60000 (systemd's UIDS-GIDS.md: local
    regular users end there) may be LDAP users, so the rest is max_uid's to say."""
    import monitors.procfs
    from tests.unit.test_monitors import _proc

    table = [_proc(1, 1000, 1.0), _proc(2, 60000, 1.0), _proc(3, 61184, 1.0), _proc(4, 65534, 1.0),
             _proc(5, 524288, 1.0)]
    monkeypatch.setattr(monitors.procfs, "_psutil_processes", lambda: table)
    mountinfo = "".join(line + "\n" for line in HYBRID.read_text().splitlines() if " - cgroup" not in line)
    host = set_up(Policy(), dry_run=True, clock=lambda: 0.0, mountinfo=mountinfo)
    assert isinstance(host.monitor, ProcMonitor)
    assert [u.uid for u in host.monitor.users()] == [1000, 60000, 61184, 524288]  # not nobody
    policy, _ = policy_from_text("governed: {max_uid: 60000}\n")
    host = set_up(policy, dry_run=True, clock=lambda: 0.0, mountinfo=mountinfo)
    assert [u.uid for u in host.monitor.users()] == [1000, 60000]


def test_a_reserve_that_leaves_no_cpu_is_refused():
    with pytest.raises(SetupError, match="leaves no CPU"):
        set_up(Policy(reserve=type(Policy().reserve)(cpu_cores=4096)), True, lambda: 0.0, mountinfo=HYBRID.read_text())


def contended_document():
    host = SimHost(cores=2.0)
    host.add(1000, "alice", 2.0)
    host.add(1001, "bob", 2.0)
    weights = {"alice": 2.0, "bob": 1.0}
    gov = Governor(Policy().loop_settings(), Capacity(2.0, host.memory_bytes), SimMonitor(host), SimBackend(host), host.clock,
                   lambda u: {"cpu": weights[u.name], "memory": 1.0, "io": 1.0})
    for _ in range(6):
        report = gov.tick()
        host.step(1.0)
    return state_document(report, tick=6, time_unix_s=1e9, interval_s=1.0, mode="enforce", backend="sim",
                          policy_file="p.yaml")


def test_a_document_whose_users_are_built_as_read_holds_the_same_users():
    host = SimHost(cores=2.0)
    for uid in range(1000, 1005):
        host.add(uid, f"u{uid}", 1.0)
    gov = Governor(Policy().loop_settings(), Capacity(2.0, host.memory_bytes), SimMonitor(host), SimBackend(host), host.clock,
                   lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0})
    for _ in range(4):
        report = gov.tick()
        host.step(1.0)
    header = dict(tick=4, time_unix_s=1e9, interval_s=1.0, mode="enforce", backend="sim", policy_file="p.yaml")
    whole, once = state_document(report, **header), state_document(report, **header, users_once=True)
    assert not isinstance(once["users"], list)
    assert {**once, "users": list(once["users"])} == whole and len(whole["users"]) == 5
    assert list(once["users"]) == []  # read once


def test_explain_gives_the_reasoning_with_her_numbers():
    doc = contended_document()
    alice = find_user(doc, "alice")
    text = "\n".join(explain_lines(doc, alice))
    assert "alice (uid 1000), weight cpu 2 memory 1 io 1" in text
    assert "Dominant resource: cpu" in text and "÷ weight 2" in text
    assert "until cpu ran out" in text and "bob 0.333" in text
    assert "cpu.max = 133333 100000: CPU contended" in text
    assert find_user(doc, "1001")["name"] == "bob"
    with pytest.raises(KeyError, match="carol.*governed: alice, bob"):
        find_user(doc, "carol")


def test_explain_says_why_a_user_is_held_on_memory_that_is_not_contended():
    """A jump in one reading holds only her (governor.control.loop._growth_guards): explain
    says so, with her guard, her demand and her part of the free memory — not "no cap
    applies" beside a memory.high — and the document passes the readers' check."""
    from governor.service.state import check_document

    GiB = 2**30
    host = SimHost(cores=4.0, memory_bytes=16 * GiB)
    host.add(1000, "alice", 0.1, 1 * GiB)
    jumper = host.add(1001, "jumper", 0.1, GiB // 2)
    gov = Governor(Policy().loop_settings(), Capacity(4.0, host.memory_bytes), SimMonitor(host), SimBackend(host),
                   host.clock, lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0})
    for _ in range(4):
        host.step(1.0)
        gov.tick()
    jumper.want_memory_bytes = 14 * GiB
    host.step(1.0)
    report = gov.tick()
    doc = check_document(state_document(report, tick=5, time_unix_s=1e9, interval_s=1.0, mode="enforce",
                                        backend="sim", policy_file="p.yaml"), "state.json")
    user = find_user(doc, "jumper")
    assert doc["saturated"] == [] and user["memory_guard_bytes"] == pytest.approx(jumper.limits.memory_high, abs=4096)
    text = "\n".join(explain_lines(doc, user))
    assert "no reading has confirmed yet: her memory.high holds her to" in text and "no cap applies" not in text
    assert "memory.high = " in text and "not yet confirmed" in text
    assert find_user(doc, "alice")["memory_guard_bytes"] is None


def test_shares_table_and_summary():
    doc = contended_document()
    table = shares_table(doc)
    assert table.row_count == 2 and "demand / alloc / limit" in str(table.columns[6].header)
    assert "contended: cpu" in summary_line(doc, now_unix_s=1e9 + 1)
    assert "STALE" in summary_line(doc, now_unix_s=1e9 + 60)
    assert amount("memory", 3 * 2**30) == "3.00 GiB" and amount("disk:8:0", 0.25) == "25.0% of disk time"


def test_doctor_user_slice_check_knows_systemd_enables_controllers_lazily(tmp_path):
    from cgroups.mount import Hierarchy
    from governor.service.doctor import _user_slice

    (tmp_path / "user.slice").mkdir()
    (tmp_path / "user.slice" / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "user.slice" / "cgroup.subtree_control").write_text("\n")
    hierarchy = Hierarchy(tmp_path, frozenset({"cpu", "memory", "io"}), frozenset())
    assert _user_slice(hierarchy, systemd_manages=True).status == "ok"
    failing = _user_slice(hierarchy, systemd_manages=False)
    assert failing.status == "fail" and "io" in failing.detail and "+io" in failing.fix
    (tmp_path / "user.slice" / "cgroup.controllers").write_text("cpu memory io\n")
    assert "not yet enabled" in _user_slice(hierarchy, systemd_manages=True).detail


def test_shares_and_explain_show_each_links_demand_allocation_and_class():
    from tests.simnet import LINK, MBIT, SimNetwork

    host = SimHost(cores=4.0)
    host.add(1000, "alice", 0.1)
    host.add(1001, "bob", 0.1)
    net = SimNetwork(host)
    net.want = {1000: 100 * MBIT, 1001: 100 * MBIT}
    weights = {"alice": 3.0, "bob": 1.0}
    gov = Governor(Policy(enforce=("cpu", "memory", "net")).loop_settings(), Capacity(4.0, host.memory_bytes, links={LINK: 100 * MBIT}),
                   SimMonitor(host), SimBackend(host), host.clock,
                   lambda u: {"cpu": 1.0, "memory": 1.0, "io": 1.0, "net": weights[u.name]}, network=net)
    for _ in range(15):
        report = gov.tick()
        net.step(1.0)
        host.step(1.0)
    doc = state_document(report, tick=15, time_unix_s=1e9, interval_s=1.0, mode="enforce", backend="sim",
                         policy_file="p.yaml")
    assert amount(LINK, 75e6) == "75.0 Mbit/s"
    table = shares_table(doc)
    header = [str(c.header) for c in table.columns]
    assert f"{LINK}\ndemand / alloc / limit" in header
    cell = list(table.columns[header.index(f"{LINK}\ndemand / alloc / limit")].cells)[0]
    assert cell.endswith("/ 75.0 / 75.0")  # alice: allocation 75 Mbit/s, ceil 75 Mbit/s
    text = "\n".join(explain_lines(doc, find_user(doc, "alice")))
    assert f"Dominant resource: {LINK}" in text and "÷ weight 3" in text
    assert ("tc class on eth0 egress = rate 75.0 Mbit/s (her weighted share of the link), ceil 75.0 Mbit/s: "
            "the link is contended") in text


def test_network_setup_shapes_configured_interfaces_of_any_kind_else_nics_with_a_speed(tmp_path):
    from governor.service.hostsetup import _network
    from monitors.capacity import host_capacity

    net = tmp_path / "class" / "net"
    (net / "eth0" / "device").mkdir(parents=True)
    (net / "eth0" / "speed").write_text("1000\n")
    (net / "br0").mkdir()  # a bridge: no device, no speed
    (tmp_path / "block").mkdir()
    host = host_capacity(None, 0, str(tmp_path), "/proc")
    notes = []
    auto = _network(Policy(enforce=("net",)), host, lambda: 0.0, notes, str(tmp_path))
    assert {str(r): link.capacity_bits_per_s for r, link in auto.links.items()} == {"net:eth0:tx": 1e9, "net:eth0:rx": 1e9}
    policy, _ = policy_from_text("enforce: [net]\ncapacity:\n  nics:\n    br0: {bits_per_s: 1e8, ingress: false}\n"
                                 "    wlan9: {bits_per_s: 1e8}\n")
    configured = _network(policy, host, lambda: 0.0, notes, str(tmp_path))
    assert [str(r) for r in configured.links] == ["net:br0:tx"]
    assert notes == ["<string>: capacity.nics.wlan9: no such interface here (NICs: eth0); it is not shaped"]


def test_control_characters_in_a_name_or_an_error_never_reach_the_terminal():
    """A name from the account databases with an escape sequence in it (a retitled terminal, a
    cleared screen) is shown as \\xNN in shares, top and explain (the hostile-input audit)."""
    from io import StringIO

    from rich.console import Console

    from governor.cli.views import top_table

    doc = contended_document()
    doc["users"][0]["name"] = "ev\x1b]0;pwned\x07il\x1b[2J"
    doc["users"][1]["error"] = "sample: \x9b6n"
    for view in (shares_table, top_table):
        out = StringIO()
        Console(file=out, width=300, force_terminal=False, color_system=None).print(view(doc))
        assert "\x1b" not in out.getvalue() and "\x9b" not in out.getvalue() and "\\x1b]0;pwned" in out.getvalue()
    text = "\n".join(explain_lines(doc, doc["users"][0]) + explain_lines(doc, doc["users"][1]))
    assert not any(c in text for c in "\x1b\x07\x9b") and "ev\\x1b]0;pwned\\x07il\\x1b[2J (uid 1000)" in text
