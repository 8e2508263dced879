"""The shaper's word on packets conntrack holds INVALID (governor/shaping/shaper.py): read with
the table's check every NFT_CHECK_S, said when the count rises, at most once an hour. The
kernel side — a real download whose packets are INVALID, counted by the table's rule — is
tests/netns/test_ingress_marks.py. And at an install that finds no table of the governor's
marking connections (nothing kept tracking on since its rules went), its marked connections
are told to be tracked liberally (governor/shaping/conntrack.py; the kernel side: the same netns file and tier 2)."""

import logging

import pytest

from governor.shaping import shaper as shaper_module
from governor.shaping.conntrack import Liberal
from governor.shaping.model import ShapingError, link_resources
from governor.shaping.nft import OURS_MARK, OURS_MASK
from governor.shaping.shaper import INVALID_WARN_S, NFT_CHECK_S, Shaper


class CountingTable:
    """The table as the shaper reads it: its INVALID count, None once it is gone."""

    def __init__(self):
        self.count: int | None = 0

    def invalid_packets(self):
        return self.count


def test_a_rising_count_is_said_once_an_hour_and_a_table_gone_is_said_as_before(caplog):
    now = [1000.0]
    shaper = Shaper({}, lambda: now[0])
    shaper.nft = table = CountingTable()

    def check(count, after_s=NFT_CHECK_S):
        table.count, now[0] = count, now[0] + after_s
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="drfgov"):
            stats, lost = shaper._stats()
        return [r.getMessage() for r in caplog.records], lost

    assert check(0) == ([], None)
    said, lost = check(250)
    assert lost is None and len(said) == 1 and said[0].startswith("shaping: 250 packets of governed users'")
    assert "nf_conntrack_tcp_be_liberal=1" in said[0]
    assert check(900) == ([], None)  # still rising, but said less than an hour ago
    assert check(900) == ([], None)  # not rising
    said, _ = check(1000, after_s=INVALID_WARN_S)
    assert len(said) == 1 and said[0].startswith("shaping: 100 packets")  # what rose since the last check
    assert check(5, after_s=NFT_CHECK_S / 2) == ([], None)  # between checks the table is not read
    table.count = None
    assert check(None) == ([], "the nftables table was removed (a firewall reload?)")


class InstallRecord:
    """The kernel as Shaper.install sees it: whether a table of the governor's that marks
    connections is there, and what was done (install, liberal tracking)."""

    def __init__(self, table_there: bool, liberal: Liberal | Exception = Liberal(0, 0, False)):
        self.table_there, self.liberal, self.done = table_there, liberal, []

    def classifier(self, netns=None, ingress=False):
        record = self

        class Table:
            def marks_connections(self):
                return record.table_there

            def install(self):
                record.done.append(("install", ingress))
                record.table_there = True

        return Table()

    def track_liberally(self, mark, mask, netns=None):
        self.done.append(("liberal", mark, mask, netns))
        if isinstance(self.liberal, Exception):
            raise self.liberal
        return self.liberal


def _install(monkeypatch, record: InstallRecord, ingress: bool) -> Shaper:
    """Shaper.install of one link (eth0; its rx too with ``ingress``), in netns ns1, on ``record``."""
    monkeypatch.setattr(shaper_module, "remove_all", lambda netns=None, keep_table=False: [])
    monkeypatch.setattr(shaper_module, "NftClassifier", record.classifier)
    monkeypatch.setattr(shaper_module, "track_liberally", record.track_liberally)
    monkeypatch.setattr(Shaper, "_install_link", lambda self, resource: True)
    shaper = Shaper(link_resources({"eth0": 1e9}, {"eth0": ingress}), lambda: 0.0, netns="ns1")
    shaper.install()
    return shaper


@pytest.mark.parametrize("ingress, table_there, liberal_asked", [
    (True, False, True),  # a start after a stop's restore (or a firewall reload removed it)
    (True, True, False),  # replaced in one transaction: tracking never lapsed (else: none, or egress alone)
    (False, False, False),  # no marks: nothing to keep
])
def test_an_install_that_finds_no_table_has_the_marked_connections_tracked_liberally_first(
        monkeypatch, caplog, ingress, table_there, liberal_asked):
    record = InstallRecord(table_there, liberal=Liberal(3, 0, False))
    with caplog.at_level(logging.INFO, logger="drfgov"):
        _install(monkeypatch, record, ingress)
    # before the install: its ct rules turn tracking on, and a stale connection is INVALID from then on
    assert record.done == [*([("liberal", OURS_MARK, OURS_MASK, "ns1")] if liberal_asked else []), ("install", ingress)]
    said = [r.getMessage() for r in caplog.records]
    assert said == (["shaping: 3 connections marked before this install are tracked liberally (their TCP window "
                     "may have moved while nothing tracked them)"] if liberal_asked else [])


@pytest.mark.parametrize("liberal, said", [
    (Liberal(0, 0, False), None),  # nobody's connection: nothing to say
    (Liberal(5, 2, True), "shaping: 5 connections marked before this install are tracked liberally (their TCP "
                          "window may have moved while nothing tracked them); 2 could not be told (gone, or "
                          "refused); the rest were left as they are after 5 s"),
    (ShapingError("conntrack: cannot open ctnetlink: EPERM (Operation not permitted)"),
     "shaping: connections marked before this install keep conntrack's strict TCP window: conntrack: cannot open "
     "ctnetlink: EPERM (Operation not permitted)"),
])
def test_what_a_pass_could_not_do_is_said_and_the_install_goes_on(monkeypatch, caplog, liberal, said):
    record = InstallRecord(False, liberal=liberal)
    with caplog.at_level(logging.INFO, logger="drfgov"):
        shaper = _install(monkeypatch, record, ingress=True)
    assert shaper.nft is not None and record.done[-1] == ("install", True)
    assert [r.getMessage() for r in caplog.records] == ([said] if said else [])
