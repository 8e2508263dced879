"""The shaping probe and doctor's check, on this host's kernel."""

import json
import subprocess

from governor.shaping.probe import probe
from tests.cli.conftest import REPO, _installed_drfgov


def test_probe_tries_every_piece_and_names_the_module_of_what_fails(pair):
    pieces = probe()
    by_module = {p.module: p for p in pieces}
    assert set(by_module) == {"sch_htb", "nf_tables", "nft_ct", "ifb", "sch_ingress", "act_mirred",
                              "act_connmark", "cls_fw"}
    assert by_module["sch_htb"].ok and by_module["nf_tables"].ok  # tests/netns shapes with them
    assert all(p.detail for p in pieces if not p.ok)
    print("\n" + "\n".join(f"{p.module}: {'ok' if p.ok else 'missing: ' + p.detail}" for p in pieces))
    assert not [ns for ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if ns.startswith("drfgov-probe")]  # its scratch namespace is gone


def test_doctor_reports_the_shaping_pieces(pair):
    out = subprocess.run([_installed_drfgov(), "doctor", "--json"], capture_output=True, text=True, cwd=REPO)
    check = next(c for c in json.loads(out.stdout)["checks"] if c["name"] == "network shaping")
    missing = [p.module for p in probe() if not p.ok]
    assert (check["status"] == "ok") == (not missing)
    assert all(m in check["fix"] for m in missing)


def test_doctor_asks_ctnetlink_where_ingress_is_shaped_and_it_counts_a_namespaces_connections(pair):
    """This kernel has ctnetlink (tier 1 tells connections through it): with net enforced and
    ingress on, the check says ok; its count is conntrack's own for the namespace asked (one UDP
    flow tracked by a ct rule, as the governor's table would track it)."""
    import sys

    from governor.config.policy import Policy
    from governor.service.doctor import _ctnetlink
    from governor.shaping.conntrack import ctnetlink_entries
    from tests.netns.flows import conntrack_entries, sh

    check = _ctnetlink(Policy(enforce=("cpu", "memory", "io", "net")))
    assert check.status == "ok" and "connections tracked" in check.detail, check
    a, _ = pair
    assert ctnetlink_entries(a) == 0  # nothing tracks there yet
    sh("ip", "netns", "exec", a, "nft", "-f", "-",
       input="table inet drfgovtest { chain out { type filter hook output priority 0; ct state new counter; }; }\n")
    sh("ip", "netns", "exec", a, sys.executable, "-c",
       "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('10.77.0.2', 9))")
    assert ctnetlink_entries(a) == len(conntrack_entries(a)) == 1
