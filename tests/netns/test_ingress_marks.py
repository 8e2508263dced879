"""The connection marks ingress shaping classifies by, on this host's kernel (nftables and
conntrack; the tc half — act_connmark, cls_fw — only the VM's kernel has:
tests/vm/test_kernel_ingress.py).

A mark set once, at a connection's first packet, outlived the class ids it named: after a
restart or a reload that hands class ids out again, a long-lived download arrived in whichever
user's class now holds its old id. Each arriving packet is counted here by the mark its
connection carries, in a table of the test's own (an ``input`` chain, one counter per mark),
independent of the classifier under test."""

import json
import time

from governor.shaping.nft import NftClassifier, mark
from tests.netns.flows import Flows, conntrack_entries, sh, spawn_traffic

PORTS = {50001: 5001, 50002: 5002}
OLD, NEW = 0x10, 0x11  # her class id before and after the ids are handed out again
SETTLE_S, WINDOW_S = 1.0, 2.0  # her next ACK re-marks; a window long enough for many packets


def _install_counters(netns: str, *marks: int) -> None:
    """The test's own table: one counter of arriving packets for each of ``marks``."""
    rules = "\n".join(f"    ct mark {value:#x} counter comment \"{value:#x}\"" for value in marks)
    sh("ip", "netns", "exec", netns, "nft", "-f", "-", input=(
        "table inet marks {\n  chain arriving {\n    type filter hook input priority 10; policy accept;\n"
        f"{rules}\n  }}\n}}\n"))


def _arrived(netns: str) -> dict[int, int]:
    """mark → packets that arrived carrying it so far."""
    listed = json.loads(sh("ip", "netns", "exec", netns, "nft", "-j", "list", "table", "inet", "marks"))
    out = {}
    for entry in listed["nftables"]:
        rule = entry.get("rule")
        if rule:
            counter = next(e["counter"] for e in rule["expr"] if "counter" in e)
            out[int(rule["comment"], 16)] = counter["packets"]
    return out


def _window(netns: str) -> dict[int, int]:
    """Packets per mark that arrived over :data:`WINDOW_S`, once :data:`SETTLE_S` has passed."""
    time.sleep(SETTLE_S)
    before = _arrived(netns)
    time.sleep(WINDOW_S)
    after = _arrived(netns)
    return {value: after[value] - before[value] for value in after}


def test_a_connections_mark_follows_her_class_id_and_leaves_with_her(pair):
    a, _ = pair
    _install_counters(a, 0, mark(OLD), mark(NEW))
    nft = NftClassifier(a, ingress=True)
    nft.install()
    nft.apply({50002: OLD}, {})
    with Flows(PORTS, user_side="receiver") as flows:
        flows.start(50002)  # her download, one long-lived connection
        first = _window(a)
        # a restart (or a reload) hands class ids out again: hers goes to 50001
        nft.apply({50001: OLD, 50002: NEW}, {50002: OLD})
        moved = _window(a)
        # she is governed no more (an exemption): her connection must not bring her traffic to
        # the class that now holds an id of hers
        nft.apply({50001: OLD}, {50001: OLD, 50002: NEW})
        left = _window(a)
        flows.stop()
    print(f"\npackets arriving by mark (0 / old {mark(OLD):#x} / new {mark(NEW):#x}): first {first}, "
          f"ids handed out again {moved}, she left {left}")
    assert first[mark(OLD)] > 100 and first[mark(NEW)] == 0
    assert moved[mark(NEW)] > 100 and moved[mark(OLD)] == 0
    assert left[0] > 100 and left[mark(OLD)] == 0 and left[mark(NEW)] == 0
    assert nft.remove()


def test_a_mark_someone_else_set_is_left_alone(pair):
    """An admin's own mark (outside the governor's range) on a governed user's connection stays."""
    a, _ = pair
    admin_mark = 0x1234
    sh("ip", "netns", "exec", a, "nft", "-f", "-", input=(
        "table inet admin {\n  chain out {\n    type filter hook output priority -10; policy accept;\n"
        f"    ct mark 0 ct mark set {admin_mark:#x}\n  }}\n}}\n"))
    _install_counters(a, admin_mark, mark(OLD))
    nft = NftClassifier(a, ingress=True)
    nft.install()
    nft.apply({50002: OLD}, {})
    with Flows(PORTS, user_side="receiver") as flows:
        flows.start(50002)
        got = _window(a)
        flows.stop()
    print(f"\npackets arriving by mark: {got}")
    assert got[admin_mark] > 100 and got[mark(OLD)] == 0


def test_a_connection_between_two_local_users_is_not_marked(pair):
    """Both ends of a loopback connection send on it: re-marked at every packet, her mark and his
    would take turns (a conntrack mark event each) for nothing - loopback is never shaped."""
    import subprocess

    a, _ = pair
    sh("ip", "netns", "exec", a, "nft", "-f", "-", input=(
        "table inet marks {\n  chain leaving {\n    type filter hook output priority 10; policy accept;\n"
        '    meta oiftype loopback ct mark 0 counter comment "0x0"\n'
        '    meta oiftype loopback ct mark != 0 counter comment "0x1"\n  }\n}\n'))
    nft = NftClassifier(a, ingress=True)
    nft.install()
    nft.apply({50001: OLD, 50002: NEW}, {})
    sink = spawn_traffic(a, 50002, "sink", "5002", "--seconds", "3", "--skip", "0.5", stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    sender = spawn_traffic(a, 50001, "send", "127.0.0.1", "5002", "--seconds", "3")
    sink.communicate(timeout=60)
    sender.wait(timeout=60)
    got = _arrived(a)
    print(f"\npackets leaving through loopback: unmarked {got[0]}, marked {got[1]}")
    assert got[0] > 100 and got[1] == 0


def test_an_install_over_a_previous_runs_table_replaces_it_in_one_transaction(pair, monkeypatch):
    """A restart's install finds the crashed run's table: it is replaced, maps emptied, in the
    same nftables transaction as the new one is made — deleted in one call and made in the
    next, the moment between had no ``ct`` rule keeping connection tracking on, and on Linux
    6.1 a download running through it was INVALID for conntrack from then on, never re-marked
    (tier 2: tests/vm/test_kernel_ingress.py, the restart test, failed 5 times in 60)."""
    import subprocess

    from governor.shaping.nft import TABLE
    from tests.netns.flows import nft_uid_classes

    a, _ = pair
    crashed = NftClassifier(a, ingress=True)
    crashed.install()
    crashed.apply({50002: OLD}, {})
    batches, real_run = [], subprocess.run

    def recording_run(argv, *args, **kwargs):
        if kwargs.get("input"):
            batches.append(json.loads(kwargs["input"])["nftables"])
        return real_run(argv, *args, **kwargs)

    restarted = NftClassifier(a, ingress=True)
    monkeypatch.setattr(subprocess, "run", recording_run)
    restarted.install()
    monkeypatch.undo()
    assert nft_uid_classes(a) == {}  # the old run's elements went with its table
    assert len(batches) == 1 and batches[0][:3] == [{"add": {"table": TABLE}}, {"delete": {"table": TABLE}},
                                                    {"add": {"table": TABLE}}]
    assert restarted.apply({50001: OLD, 50002: NEW}, {}) == 2 and nft_uid_classes(a) == {50001: OLD, 50002: NEW}
    assert restarted.remove() and not restarted.installed()


def test_a_governed_users_packets_conntrack_holds_invalid_are_counted(pair):
    """Her connection began while nothing tracked, and conntrack picks up no connection in
    mid-stream here (``nf_conntrack_tcp_loose = 0``): every packet she sends on it is INVALID,
    has no connection, and cannot be marked — the state a download was left in, on Linux 6.1,
    by a restart's moment without a ``ct`` rule. The table counts them; a download begun with
    the table in place counts none."""
    a, _ = pair
    sh("ip", "netns", "exec", a, "sysctl", "-q", "-w", "net.netfilter.nf_conntrack_tcp_loose=0")
    nft = NftClassifier(a, ingress=True)
    nft.install()
    nft.apply({50001: OLD, 50002: NEW}, {})
    with Flows(PORTS, user_side="receiver") as flows:
        flows.start(50001)  # his, begun with the table in place: tracked from its first packet
        time.sleep(WINDOW_S)
        his = nft.invalid_packets()
        flows.stop()
    assert nft.remove() and nft.invalid_packets() is None
    with Flows(PORTS, user_side="receiver") as flows:
        flows.start(50002)  # hers, before any ct rule: nothing tracks it
        nft.install()
        nft.apply({50001: OLD, 50002: NEW}, {})
        time.sleep(WINDOW_S)
        hers = nft.invalid_packets()
        flows.stop()
    print(f"\nINVALID packets of governed users over {WINDOW_S:.0f} s: his tracked download {his}, "
          f"her untracked one {hers}")
    assert his == 0 and hers > 100
    assert nft.remove()


def _as_her(netns: str, uid: int, code: str) -> None:
    """Python ``code`` run as ``uid`` in ``netns`` (a packet or two of hers, marked by the table)."""
    import subprocess

    from tests.netns.flows import PYTHON, as_user

    subprocess.run(["ip", "netns", "exec", netns, *as_user(uid), PYTHON, "-c", code], check=True, cwd="/", timeout=60)


def test_the_governors_marked_connections_alone_are_told_to_be_tracked_liberally(pair):
    """A stop's restore deletes the table: until the next start's install nothing keeps
    connection tracking on, and a download sending on meanwhile came back beyond conntrack's
    TCP window (Linux 6.1: INVALID for good; tier 2 shows it, and that the shaper's install
    mends it). Her download, marked by the governor, is set to be tracked liberally in both
    directions; his, which someone else marked, is not touched, nor are her connections with
    no window to lose: a UDP exchange and a SYN to nowhere (a user can make those by the
    hundred thousand, and a pass has a budget of time). Read back through ctnetlink."""
    from governor.shaping.conntrack import Liberal, track_liberally
    from governor.shaping.nft import OURS_MARK, OURS_MASK

    a, _ = pair
    admin_mark = 0x1234
    sh("ip", "netns", "exec", a, "nft", "-f", "-", input=(
        "table inet admin {\n  chain out {\n    type filter hook output priority -10; policy accept;\n"
        f"    meta skuid 50001 ct mark 0 ct mark set {admin_mark:#x}\n  }}\n}}\n"))
    nft = NftClassifier(a, ingress=True)
    nft.install()
    nft.apply({50002: OLD}, {})
    _as_her(a, 50002, "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('10.77.0.2', 9))")
    _as_her(a, 50002, "import socket; s = socket.socket(); s.setblocking(False); s.connect_ex(('10.77.0.99', 9))")
    with Flows(PORTS, user_side="receiver") as flows:
        flows.start(50001, 50002)  # his carries the admin's mark, hers the governor's
        time.sleep(SETTLE_S)
        before = conntrack_entries(a)
        out_of_time = track_liberally(OURS_MARK, OURS_MASK, a, budget_s=0.0)  # nothing done: no time
        first = track_liberally(OURS_MARK, OURS_MASK, a)
        after = conntrack_entries(a)
        again = track_liberally(OURS_MARK, OURS_MASK, a)  # already liberal: nothing to change
        flows.stop()
    print(f"\nconnections (protocol, mark, liberal): before {before}, after {after}")
    ours = mark(OLD)
    assert before == sorted([("tcp", admin_mark, False), ("tcp", ours, False), ("tcp", ours, False),
                             ("udp", ours, False)])  # her download, her SYN, her datagram; his download
    assert out_of_time == Liberal(0, 0, True)
    assert first == Liberal(1, 0, False) and again == Liberal(0, 0, False)
    assert after == sorted([("tcp", admin_mark, False), ("tcp", ours, False), ("tcp", ours, True),
                            ("udp", ours, False)])
    assert nft.remove()


def test_a_table_that_marks_connections_is_told_from_none_and_from_one_of_egress_alone(pair):
    """What the shaper's install asks before replacing the table: only a table with ingress
    marks has the ``ct`` rules that kept connection tracking on."""
    a, _ = pair
    ingress, egress = NftClassifier(a, ingress=True), NftClassifier(a)
    assert not ingress.marks_connections()
    sh("ip", "netns", "exec", a, "nft", "add", "table", "inet", "drfgov")  # by hand: the name, not the chain
    assert not ingress.marks_connections() and ingress.invalid_packets() is None  # replaced, not refused
    egress.install()
    assert not ingress.marks_connections()
    ingress.install()
    assert ingress.marks_connections() and egress.marks_connections()  # the table is asked, not the object
    assert ingress.remove() and not ingress.marks_connections()
