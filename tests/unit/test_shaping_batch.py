"""The hand-packed HTB class messages, read back by pyroute2's own rtnetlink parser (the oracle)."""

import pytest
from pyroute2.netlink.rtnl.tcmsg import tcmsg

from governor.shaping.classbatch import (
    MAX_QUANTUM_BYTES, MIN_QUANTUM_BYTES, RTM_DELTCLASS, RTM_NEWTCLASS, ClassChange, pack_change, quantum_bytes,
    xmit_ticks,
)


def parsed(data: bytes) -> tcmsg:
    msg = tcmsg(data)
    msg.decode()
    return msg


def test_a_class_change_decodes_to_what_was_asked():
    change = ClassChange(7, 0xD7F00010, 0xD7F00001, 15_000_000, 20_000_000, 3000, 5000)
    msg = parsed(pack_change(change, 42))
    assert msg["header"]["type"] == RTM_NEWTCLASS and msg["header"]["sequence_number"] == 42
    assert msg["header"]["length"] == len(pack_change(change, 42))
    assert (msg["index"], msg["handle"], msg["parent"]) == (7, 0xD7F00010, 0xD7F00001)
    assert msg.get_attr("TCA_KIND") == "htb"
    parms = msg.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_PARMS")
    assert parms["rate"] == 15_000_000 // 8 and parms["ceil"] == 20_000_000 // 8
    assert parms["rate___reserved"] == 1 and parms["ceil___reserved"] == 1  # linklayer ethernet: no rate table
    assert parms["buffer"] == xmit_ticks(15_000_000 // 8, 3000) and parms["cbuffer"] == xmit_ticks(20_000_000 // 8, 5000)
    assert parms["quantum"] == quantum_bytes(15_000_000 // 8)
    assert msg.get_attr("TCA_OPTIONS").get_attr("TCA_HTB_RTAB") is None


def test_rates_past_32_bits_of_bytes_per_second_go_in_the_64_bit_attributes():
    change = ClassChange(1, 0xD7F00001, 0xD7F00000, 40_000_000_000, 100_000_000_000, 10**6, 10**6)
    options = parsed(pack_change(change, 1)).get_attr("TCA_OPTIONS")
    assert options.get_attr("TCA_HTB_RATE64") == 5_000_000_000
    assert options.get_attr("TCA_HTB_CEIL64") == 12_500_000_000
    assert options.get_attr("TCA_HTB_PARMS")["rate"] == 2**32 - 1


def test_a_deletion_names_only_the_class():
    msg = parsed(pack_change(ClassChange(3, 0xD7F00011, 0xD7F00001), 5))
    assert msg["header"]["type"] == RTM_DELTCLASS and msg["handle"] == 0xD7F00011
    assert msg.get_attr("TCA_KIND") is None


def test_xmit_ticks_agree_with_pyroute2s_port_of_tc():
    from pyroute2.netlink.rtnl.tcmsg.common import calc_xmittime

    for rate, size in ((625_000, 2500), (125_000_000, 500_000), (125, 1600)):
        assert xmit_ticks(rate, size) == pytest.approx(calc_xmittime(rate, size), abs=1)


@pytest.mark.parametrize("rate, expected", [(0, MIN_QUANTUM_BYTES), (1_875_000, 187_500), (625_000, 62_500),
                                            (10**9, MAX_QUANTUM_BYTES)])
def test_quantum_follows_rate_between_a_frame_and_the_kernels_ceiling(rate, expected):
    assert quantum_bytes(rate) == expected
