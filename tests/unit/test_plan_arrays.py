"""Planning over arrays (governor/control/planarrays.py) gives plan_user's limits, exactly."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cgroups import CpuMax, IoMax
from cgroups.limits import PAGE_SIZE
from governor.control.plan import DiskPlan, plan_user
from governor.control.planarrays import PlanRows, plan_rows
from governor.control.resources import CPU, MEMORY, Resource
from governor.enforce.model import LimitSet

MiB = 2**20
D80, D160 = Resource.disk("8:0"), Resource.disk("8:16")
DISKS = (DiskPlan("8:0", D80, 200 * MiB, 100 * MiB), DiskPlan("8:16", D160, 500 * MiB, 450 * MiB))
RESOURCES = (CPU, MEMORY, D80, D160)
CEILINGS = (
    LimitSet(CpuMax(50_000), 100, 0, 64 * MiB, None, {"8:0": IoMax(1 << 20, None, None, 120)}),
    LimitSet(CpuMax(None), 100, 512 * MiB, None, 3 * 2**30, {}),
    LimitSet(CpuMax(250_000, 50_000), 100, 0, None, None, {"9:0": IoMax(wbps=4096)}),
    LimitSet(CpuMax(None), 100, 0, None, None, {}),  # limits nothing
)

byte_counts = st.integers(0, 2**40)
fractions = st.floats(0.0, 1.0)
rates = st.one_of(st.just(0.0), st.floats(1e-3, 1e9))  # bytes/s over a tick: 0, or at least a byte an hour
amounts = st.one_of(st.floats(0.0, 64.0), st.sampled_from([0.0, 1e-9, 0.5, 2.5e-5, 0.000015]))


@st.composite
def ticks(draw):
    n = draw(st.integers(1, 12))
    resources = RESOURCES[:draw(st.integers(2, 4))]
    disks = tuple(d for d in DISKS if d.resource in resources)
    r = len(resources)

    def matrix(values):
        return np.array(draw(st.lists(st.lists(values, min_size=r, max_size=r), min_size=n, max_size=n)), dtype=float)

    def column(values, dtype=float):
        return np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=dtype)

    allocation, share = matrix(amounts), matrix(amounts)
    allocation[:, 1] = column(st.floats(0.0, 2.0**40))  # memory in bytes
    share[:, 1] = column(st.floats(0.0, 2.0**40))
    optional_bytes = st.one_of(st.none(), byte_counts.map(float), st.floats(0.0, 2.0**40))
    return PlanRows(
        resources=resources,
        cpu_weight=column(st.one_of(st.sampled_from([0.001, 0.5, 1.0, 1.005, 2.5, 3.0, 1000.0, 1e6]),
                                    st.floats(1e-6, 1e6))),  # the policy's range of weights
        allocation=allocation, static_share=share,
        unused=np.array(draw(st.lists(st.lists(st.booleans(), min_size=r, max_size=r), min_size=n, max_size=n))),
        capped=frozenset(draw(st.sets(st.sampled_from(resources)))),
        memory_current_bytes=column(byte_counts, np.int64),
        written_high_bytes=np.array([np.nan if v is None else float(int(v)) // PAGE_SIZE * PAGE_SIZE
                                     for v in draw(st.lists(optional_bytes, min_size=n, max_size=n))]),
        guaranteed_memory_bytes=column(byte_counts, np.int64),
        memory_demand_bytes=column(st.one_of(st.floats(-1.0, 2.0**40), st.just(float("nan")))),
        memory_bound_bytes=np.array([np.nan if v is None else v for v in draw(st.lists(optional_bytes, min_size=n,
                                                                                     max_size=n))]),
        memory_guard_bytes=np.array([np.nan if v is None else v for v in draw(st.lists(optional_bytes, min_size=n,
                                                                                     max_size=n))]),
        disks=disks,
        io_mix=np.array(draw(st.lists(st.lists(st.tuples(rates, rates),
                                               min_size=len(disks), max_size=len(disks)), min_size=n, max_size=n)),
                        dtype=float).reshape(n, len(disks), 2),
        ceilings=draw(st.lists(st.one_of(st.none(), st.sampled_from(CEILINGS)), min_size=n, max_size=n)),
    )


@settings(max_examples=400, deadline=None)
@given(rows=ticks(), margin=st.integers(0, 2**30), step=st.integers(PAGE_SIZE, 2**30))
def test_every_row_is_planned_as_plan_user_plans_her(rows, margin, step):
    planned = plan_rows(rows, margin, step)
    expected = [plan_user(rows.user_input(i), margin, step).limits for i in range(len(rows.cpu_weight))]
    assert planned == expected
    for limits in planned:  # Python ints, as the kernel files and orjson take them
        assert all(type(v) is int for v in (limits.cpu_weight, limits.memory_low) if v is not None)
        assert all(type(v) is int for v in (limits.memory_high, limits.memory_max) if v is not None)
        assert limits.cpu_max.quota_usec is None or type(limits.cpu_max.quota_usec) is int
        assert all(type(v) is int for io in limits.io_max.values() for v in (io.rbps, io.wbps) if v is not None)


def test_a_limit_that_is_no_finite_number_fails_as_plan_user_fails():
    rows = PlanRows((CPU, MEMORY), np.ones(1), np.array([[np.inf, 1e9]]), np.ones((1, 2)), np.zeros((1, 2), bool),
                    frozenset({CPU}), np.zeros(1, np.int64), np.full(1, np.nan), np.zeros(1, np.int64), np.zeros(1),
                    np.full(1, np.nan), np.full(1, np.nan), (), np.zeros((1, 0, 2)), [None])
    with pytest.raises(OverflowError):
        plan_user(rows.user_input(0), 256 * MiB, 128 * MiB)
    with pytest.raises(ValueError, match="not a finite number"):
        plan_rows(rows, 256 * MiB, 128 * MiB)


def test_a_tick_of_no_users_plans_nothing():
    empty = np.zeros((0, 2))
    rows = PlanRows((CPU, MEMORY), np.zeros(0), empty, empty, empty.astype(bool), frozenset({CPU, MEMORY}),
                    np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0), (),
                    np.zeros((0, 0, 2)), [])
    assert plan_rows(rows, 256 * MiB, 128 * MiB) == []
