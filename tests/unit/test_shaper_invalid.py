"""The shaper's word on packets conntrack holds INVALID (governor/shaping/shaper.py): read with
the table's check every NFT_CHECK_S, said when the count rises, at most once an hour. The
kernel side — a real download whose packets are INVALID, counted by the table's rule — is
tests/netns/test_ingress_marks.py."""

import logging

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
