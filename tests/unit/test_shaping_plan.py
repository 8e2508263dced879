"""Pure parts of network shaping: class ids and rates."""

import pytest

from governor.shaping.classes import FIRST_MINOR, MinorAllocator, plan_classes
from governor.shaping.model import ClassRate


def test_minors_are_stable_and_reused():
    alloc = MinorAllocator()
    first = alloc.assign([50002, 50001])
    assert first == {50001: FIRST_MINOR, 50002: FIRST_MINOR + 1}
    assert alloc.assign([50002, 50003]) == {50002: FIRST_MINOR + 1, 50003: FIRST_MINOR}


def test_rate_is_the_weighted_share_and_ceil_the_drf_allocation():
    weights = {1: 3.0, 2: 1.0}
    assert plan_classes(20e6, weights) == {1: ClassRate(15_000_000, 20_000_000), 2: ClassRate(5_000_000, 20_000_000)}
    contended = plan_classes(20e6, weights, {1: 15e6, 2: 5e6})
    assert contended == {1: ClassRate(15_000_000, 15_000_000), 2: ClassRate(5_000_000, 5_000_000)}
    with pytest.raises(OverflowError):
        MinorAllocator().assign(range(70_000))
