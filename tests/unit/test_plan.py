"""The limit planner: work conservation, never-OOM memory rules, disk split, hysteresis."""

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cgroups import CpuMax, IoMax
from cgroups.limits import PAGE_SIZE
from governor.control import plan as planner
from governor.control.plan import DiskPlan, MemoryState, UserPlanInput
from governor.control.resources import CPU, MEMORY, Resource
from governor.enforce.model import CPU_MAX, MEMORY_HIGH, MEMORY_MAX, LimitSet as Limits

MiB = 2**20
MARGIN, STEP = 256 * MiB, 128 * MiB
D80 = Resource.disk("8:0")
DISK = DiskPlan("8:0", D80, read_bytes_per_s=200 * MiB, write_bytes_per_s=100 * MiB)
ALL = frozenset({CPU, MEMORY, D80})


def plan_user(u, margin, step):
    """The planned limits (the planner returns them with a reason per knob); planned without
    words, as the loop plans every tick, they are the same."""
    limits = planner.plan_user(u, margin, step).limits
    assert planner.plan_user(u, margin, step, explain=False).limits == limits
    return limits


def changed_knobs(*args, **kw):
    return [str(k) for k in planner.changed_knobs(*args, **kw)]


def user(**kw):
    """A user of every contended resource (so caps are her allocation), unless told."""
    base = dict(cpu_weight=1.0, allocation={CPU: 1.5, MEMORY: 2048 * MiB, D80: 0.25},
                static_share={CPU: 1.0, MEMORY: 4096 * MiB, D80: 0.5}, unused=frozenset(), capped=ALL,
                memory=MemoryState(current_bytes=1024 * MiB, written_high_bytes=None),
                guaranteed_memory_bytes=4096 * MiB, memory_demand_bytes=3000 * MiB, disks=(DISK,),
                io_mix={"8:0": (50 * MiB, 0.0)})
    base.update(kw)
    return UserPlanInput(**base)


def test_reasons_are_worded_when_first_read_and_the_loops_own_stand_over_them():
    u = user(ceiling=Limits(CpuMax(80_000), 100, 0, None, None, {}))
    worded = []
    lazy = planner.Reasons(lambda: worded.append(1) or planner.plan_user(u, MARGIN, STEP).reasons)
    assert worded == []  # planning alone words nothing
    lazy[MEMORY_MAX] = "raised at the write"
    assert lazy[MEMORY_MAX] == "raised at the write" and worded == [1]
    assert lazy[CPU_MAX] == "CPU contended: her DRF allocation, 1.500 cores; her own cpu.max 80000 100000 is lower: kept"
    assert {**dict(lazy), MEMORY_MAX: None} == {**planner.plan_user(u, MARGIN, STEP).reasons, MEMORY_MAX: None}
    assert worded == [1]  # worded once
    assert planner.plan_user(u, MARGIN, STEP, explain=False).reasons == {}


def test_reasons_whose_wording_failed_read_as_none_after_the_failure():
    def broken():
        raise ValueError("a bug in the wording")
    lazy = planner.Reasons(broken)
    with pytest.raises(ValueError):
        lazy[CPU_MAX]
    assert dict(lazy) == {} and CPU_MAX not in lazy  # tried once; the reader that hit it saw why
    lazy[CPU_MAX] = "the loop's own"
    assert dict(lazy) == {CPU_MAX: "the loop's own"}


def test_uncontended_resources_cap_nobody():
    plan = planner.plan_user(user(capped=frozenset()), MARGIN, STEP)
    limits = plan.limits
    assert limits.cpu_max == CpuMax(None) and limits.memory_high is None and limits.memory_max is None
    assert limits.io_max == {} and limits.memory_low == 3000 * MiB  # protection still applies
    assert "work conservation" in plan.reasons[CPU_MAX]


def test_uncontended_memory_holds_only_a_growth_not_yet_confirmed():
    """Memory not contended: a guarded user (growth seen in one reading) has memory.high at
    her guard — never below what she holds — and memory.max the margin above; an admin's
    lower memory.high stays; a contended tick ignores the guard (her allocation rules)."""
    plan = planner.plan_user(user(capped=frozenset(), memory_guard_bytes=1500 * MiB + 7), MARGIN, STEP)
    assert plan.limits.memory_high == 1500 * MiB and plan.limits.memory_max == 1500 * MiB + MARGIN
    assert "not yet confirmed" in plan.reasons[MEMORY_HIGH] and plan.limits.cpu_max == CpuMax(None)
    below = plan_user(user(capped=frozenset(), memory_guard_bytes=512 * MiB), MARGIN, STEP)
    assert below.memory_high == 1024 * MiB and below.memory_max == 1024 * MiB + MARGIN  # what she holds
    admin = plan_user(user(capped=frozenset(), memory_guard_bytes=1500 * MiB,
                           ceiling=Limits(CpuMax(None), 100, 0, 1200 * MiB, None, {})), MARGIN, STEP)
    assert admin.memory_high == 1200 * MiB
    assert plan_user(user(memory_guard_bytes=1500 * MiB), MARGIN, STEP) == plan_user(user(), MARGIN, STEP)


def test_contended_cpu_and_weight():
    limits = plan_user(user(cpu_weight=2.5), MARGIN, STEP)
    assert limits.cpu_max == CpuMax(150000, 100000) and limits.cpu_weight == 250
    assert plan_user(user(cpu_weight=1000.0), MARGIN, STEP).cpu_weight == 10000
    assert plan_user(user(allocation={CPU: 0.0001}), MARGIN, STEP).cpu_max.quota_usec == 1000  # kernel minimum


def test_memory_low_is_the_guarantee_capped_by_demand():
    assert plan_user(user(memory_demand_bytes=100 * MiB), MARGIN, STEP).memory_low == 100 * MiB
    assert plan_user(user(), MARGIN, STEP).memory_low == 3000 * MiB


def test_io_split_follows_her_mix_and_her_share_of_disk_time():
    limits = plan_user(user(io_mix={"8:0": (50 * MiB, 25 * MiB)}), MARGIN, STEP)
    io = limits.io_max["8:0"]
    assert io.rbps / (200 * MiB) + io.wbps / (100 * MiB) == pytest.approx(0.25, rel=1e-6)
    assert io.rbps / io.wbps == pytest.approx(2.0, rel=1e-6)
    idle = plan_user(user(io_mix={}), MARGIN, STEP).io_max["8:0"]
    assert (idle.rbps, idle.wbps) == (round(0.25 * 200 * MiB), round(0.25 * 100 * MiB))
    reader = plan_user(user(io_mix={"8:0": (50 * MiB, 0.0)}), MARGIN, STEP).io_max["8:0"]
    assert reader.rbps == round(0.25 * 200 * MiB) and reader.wbps == round(0.1 * 0.5 * 100 * MiB)  # she can still write


@settings(max_examples=300, deadline=None)
@given(current=st.integers(0, 64 * 2**30), target=st.integers(0, 64 * 2**30),
       written=st.one_of(st.none(), st.integers(0, 64 * 2**30)), margin=st.integers(0, 2**30), step=st.integers(PAGE_SIZE, 2**30))
def test_memory_max_never_below_use_plus_margin_and_high_steps_down_bounded(current, target, written, margin, step):
    u = user(allocation={CPU: 1, MEMORY: target}, memory=MemoryState(current, written))
    limits = plan_user(u, margin, step)
    assert limits.memory_max >= current + margin
    assert limits.memory_max >= limits.memory_high
    start = max(current, target) if written is None else written
    if target < start:
        assert limits.memory_high >= start - step  # comes down by at most one step per tick
    assert limits.memory_high >= target // PAGE_SIZE * PAGE_SIZE
    assert all(v % PAGE_SIZE == 0 for v in (limits.memory_low, limits.memory_high, limits.memory_max))  # whole pages


def test_memory_high_reaches_its_target_in_bounded_steps():
    written, ticks = None, 0
    current = 4096 * MiB
    while ticks < 1000:
        limits = plan_user(user(allocation={MEMORY: 1024 * MiB}, memory=MemoryState(current, written),
                                guaranteed_memory_bytes=1024 * MiB), MARGIN, STEP)
        ticks += 1
        if limits.memory_high == 1024 * MiB:
            break
        assert written is None or written - limits.memory_high <= STEP
        written = limits.memory_high
    assert ticks == math.ceil((4096 - 1024) / 128)


def test_memory_high_never_takes_what_she_holds_within_her_guaranteed_share():
    """Memory counts as contended when the users' demands pass it, while DRF may give a user
    held back elsewhere (her CPU) a memory allocation of x·D well below what she holds: a
    user holding 8 GiB of her guaranteed 8 GiB had memory.high 4 GiB, below her own memory.low
    (the DRF audit of 2026-11-26). What she holds within her guarantee stays hers."""
    held = user(allocation={MEMORY: 4096 * MiB}, memory=MemoryState(8192 * MiB, None),
                guaranteed_memory_bytes=8192 * MiB, memory_demand_bytes=8192 * MiB + 64 * MiB)
    limits = plan_user(held, MARGIN, STEP)
    assert limits.memory_low == limits.memory_high == 8192 * MiB
    assert "what she holds within her guaranteed share" in planner.plan_user(held, MARGIN, STEP).reasons[MEMORY_HIGH]
    # past her guarantee, what she holds beyond it steps down toward her allocation as before
    beyond = user(allocation={MEMORY: 4096 * MiB}, memory=MemoryState(10240 * MiB, 10240 * MiB),
                  guaranteed_memory_bytes=8192 * MiB, memory_demand_bytes=10240 * MiB)
    assert plan_user(beyond, MARGIN, STEP).memory_high == 10240 * MiB - STEP
    stepped = user(allocation={MEMORY: 4096 * MiB}, memory=MemoryState(10240 * MiB, 8192 * MiB + STEP // 2),
                   guaranteed_memory_bytes=8192 * MiB, memory_demand_bytes=10240 * MiB)
    assert plan_user(stepped, MARGIN, STEP).memory_high == 8192 * MiB  # down to her guarantee, no further


def _limits(quota=50000, weight=100, low=0, high=None, mx=None, io=None):
    return Limits(CpuMax(quota), weight, low, high, mx, io or {})


def test_changed_knobs_hysteresis():
    old = _limits(50000, 100, 0, 1000 * MiB, 1200 * MiB, {"8:0": IoMax(rbps=10 * MiB, wbps=5 * MiB)})
    assert changed_knobs(None, old, 0.05) == ["cpu.max", "cpu.weight", "memory.low", "memory.high", "memory.max", "io.max 8:0"]
    same_ish = _limits(51000, 102, 0, 1010 * MiB, 1210 * MiB, {"8:0": IoMax(rbps=10 * MiB + 1, wbps=5 * MiB)})
    assert changed_knobs(old, same_ish, 0.05) == []
    moved = _limits(None, 300, 0, 990 * MiB, 1200 * MiB, {})
    # quota → max, weight tripled, memory.high lowered (always written), disk limit removed
    assert changed_knobs(old, moved, 0.05) == ["cpu.max", "cpu.weight", "memory.high", "io.max 8:0"]


def test_unwritten_knobs_stay_in_force_so_small_moves_cannot_drift_the_kernel_away():
    kernel = Limits(CpuMax(100_000), 100, 0, None, None, {})
    plan = kernel
    for _ in range(30):  # the plan creeps up 3% a tick: inside a 5% band each time
        plan = Limits(CpuMax(round(plan.cpu_max.quota_usec * 1.03)), 100, 0, None, None, {})
        knobs = planner.changed_knobs(kernel, plan, 0.05)
        kernel = kernel.with_values_of(plan, knobs)
        assert abs(kernel.cpu_max.quota_usec - plan.cpu_max.quota_usec) <= 0.05 * kernel.cpu_max.quota_usec + 1
    assert kernel.cpu_max.quota_usec > 200_000


def test_memory_max_is_raised_past_the_band_when_use_nears_it():
    written = Limits(CpuMax(None), 100, 0, 2**30, 2**30 + 2**28, {})
    planned = Limits(CpuMax(None), 100, 0, 2**30, 2**30 + 2**28 + 2**24, {})  # +1.3%: inside the band
    assert "memory.max" not in changed_knobs(written, planned, 0.05, memory_floor_bytes=2**30)
    assert "memory.max" in changed_knobs(written, planned, 0.05, memory_floor_bytes=2**30 + 2**28 + 1)


def test_a_user_gets_at_least_her_static_share_of_what_she_does_not_use_so_she_can_start():
    """The issue's idle caps: the CPU-only user's io.max was 1 KiB/s. On a resource she does
    not use, her cap is at least her weighted static share."""
    idle = user(allocation={CPU: 0.02, MEMORY: 2048 * MiB, D80: 0.0}, unused=frozenset({CPU, D80}), io_mix={})
    limits = plan_user(idle, MARGIN, STEP)
    assert limits.cpu_max == CpuMax.for_cores(1.0)  # her static share, not 0.02
    io = limits.io_max["8:0"]
    assert (io.rbps, io.wbps) == (round(0.5 * 200 * MiB), round(0.5 * 100 * MiB))  # her share, either way
    used = plan_user(user(allocation={CPU: 0.5, MEMORY: 2048 * MiB, D80: 0.25}), MARGIN, STEP)
    assert used.cpu_max == CpuMax.for_cores(0.5)  # she uses it: her DRF allocation, below her static share


def test_memory_high_is_the_allocation_without_a_floor_memory_is_a_stock():
    limits = plan_user(user(unused=frozenset({MEMORY}), allocation={CPU: 1.5, MEMORY: 512 * MiB, D80: 0.25},
                            memory=MemoryState(256 * MiB, None)), MARGIN, STEP)
    assert limits.memory_high == 512 * MiB  # not her 4 GiB static share: that room may not exist


ORIGINAL = Limits(CpuMax(80_000), 100, 64 * MiB, 1536 * MiB, 2048 * MiB, {"8:0": IoMax(rbps=10 * MiB)})


def test_an_admins_own_limits_are_never_lifted():
    free = plan_user(user(capped=frozenset(), ceiling=ORIGINAL), MARGIN, STEP)
    assert free.cpu_max == CpuMax(80_000) and free.memory_high == 1536 * MiB and free.memory_max == 2048 * MiB
    assert free.io_max == {"8:0": IoMax(rbps=10 * MiB)} and free.memory_low == 3000 * MiB
    tight = plan_user(user(ceiling=ORIGINAL), MARGIN, STEP)  # contended: ours are lower where they are
    assert tight.cpu_max == CpuMax(80_000)  # 0.8 < her 1.5-core allocation: hers stays
    assert tight.memory_high == 1536 * MiB  # 1.5 GiB < her 2 GiB allocation
    assert tight.io_max["8:0"].rbps == 10 * MiB and tight.io_max["8:0"].wbps is not None


limit_values = st.one_of(st.none(), st.integers(PAGE_SIZE, 64 * 2**30))


@settings(max_examples=300, deadline=None)
@given(current=st.integers(0, 64 * 2**30), target=st.integers(0, 64 * 2**30), written=limit_values,
       margin=st.integers(0, 2**30), step=st.integers(PAGE_SIZE, 2**30), capped=st.booleans(),
       own_high=limit_values, own_max=limit_values, own_quota=st.one_of(st.none(), st.integers(1000, 10**6)))
def test_limits_never_lift_an_admins_and_memory_max_is_ours_only_above_use(current, target, written, margin, step,
                                                                         capped, own_high, own_max, own_quota):
    original = Limits(CpuMax(own_quota), 100, 0, own_high, own_max, {})
    u = user(allocation={CPU: 1, MEMORY: target}, memory=MemoryState(current, written),
             capped=ALL if capped else frozenset(), ceiling=original)
    limits = plan_user(u, margin, step)
    for mine, theirs in ((limits.memory_high, own_high), (limits.memory_max, own_max)):
        assert theirs is None or (mine is not None and mine <= theirs)
    assert own_quota is None or limits.cpu_max.quota_usec <= own_quota
    if limits.memory_max is not None and limits.memory_max != own_max:  # ours, not hers left in force
        assert limits.memory_max >= current + margin


def _within_ceiling_reference(planned, original, reasons):
    """The ceiling rule as written before its fast path (issue 16), word for word: the oracle."""
    from governor.control.plan import MEMORY_HIGH, MEMORY_LOW, _lower
    from governor.enforce.model import Knob

    cpu_max, memory_low = planned.cpu_max, planned.memory_low
    memory = {"memory_high": planned.memory_high, "memory_max": planned.memory_max}
    mine, theirs = planned.cpu_max.cores, original.cpu_max.cores
    if theirs is not None and (mine is None or theirs < mine):
        cpu_max = original.cpu_max
        reasons.add(CPU_MAX, "; her own cpu.max {} is lower: kept", original.cpu_max)
    for knob, attr in ((MEMORY_HIGH, "memory_high"), (MEMORY_MAX, "memory_max")):
        mine, theirs = memory[attr], getattr(original, attr)
        if _lower(mine, theirs) != mine:
            memory[attr] = theirs
            reasons.add(knob, "; her own {} {} is lower: kept", knob, theirs)
    if (original.memory_low or 0) > (planned.memory_low or 0):
        memory_low = original.memory_low
        reasons.add(MEMORY_LOW, "; her own memory.low {} is higher: kept", original.memory_low)
    io_max = dict(planned.io_max)
    for device, theirs in original.io_max.items():
        mine = io_max.get(device, IoMax())
        merged = IoMax(_lower(mine.rbps, theirs.rbps), _lower(mine.wbps, theirs.wbps),
                       _lower(mine.riops, theirs.riops), _lower(mine.wiops, theirs.wiops))
        if merged != mine:
            io_max[device] = merged
            reasons.add(Knob.io_max(device), "; her own io.max {} is lower: kept", theirs,
                        default="disk not contended: no cap")
    return Limits(cpu_max, planned.cpu_weight, memory_low, memory["memory_high"], memory["memory_max"], io_max)


_maybe = st.one_of(st.none(), st.integers(1, 5).map(lambda k: k * 1000))
_io = st.builds(IoMax, _maybe, _maybe, _maybe, _maybe)
# memory.high/max: also values MiBs apart
_memory_values = st.one_of(_maybe, st.sampled_from([16 * MiB, 17 * MiB, 32 * MiB + 4096, 40 * MiB]))
_limit_sets = st.builds(
    Limits, st.builds(CpuMax, st.one_of(st.none(), st.sampled_from([1000, 50_000, 150_000])),
                      st.sampled_from([100_000, 50_000])),
    st.integers(1, 3), st.one_of(st.none(), st.sampled_from([0, 4096, 8192])), _memory_values, _memory_values,
    st.dictionaries(st.sampled_from(["8:0", "8:16", "254:0"]), _io, max_size=3))


@settings(max_examples=1000, deadline=None)
@given(planned=_limit_sets, original=_limit_sets, worded=st.booleans())
def test_the_ceiling_rule_keeps_its_limits_and_words(planned, original, worded):
    """The fast path (on values, before her LimitSet is built; no new IoMax where hers is
    unlimited) gives the limits and the reasons the rule as first written gave."""
    reasons, expected_reasons = (planner._Words(), planner._Words()) if worded else (planner._SILENT, planner._SILENT)
    cpu_max, low, high, memory_max, io_max = planner._within_ceiling(
        planned.cpu_max, planned.memory_low, planned.memory_high, planned.memory_max, planned.io_max, original, reasons)
    got = Limits(cpu_max, planned.cpu_weight, low, high, memory_max, io_max)
    assert got == _within_ceiling_reference(planned, original, expected_reasons)
    assert reasons == expected_reasons


def _changed_knobs_reference(written, planned, hysteresis, memory_floor_bytes=0):
    """changed_knobs as written before its fast path (issue 16), word for word: the oracle."""
    from governor.control.hysteresis import moved
    from governor.enforce.model import CPU_WEIGHT, MEMORY_HIGH, MEMORY_LOW, Knob

    if written is None:
        return planned.knobs()
    out = []
    if moved(written.cpu_max.quota_usec, planned.cpu_max.quota_usec, hysteresis) or \
            written.cpu_max.period_usec != planned.cpu_max.period_usec:
        out.append(CPU_MAX)
    if moved(written.cpu_weight, planned.cpu_weight, hysteresis):
        out.append(CPU_WEIGHT)
    for knob in (MEMORY_LOW, MEMORY_HIGH, MEMORY_MAX):
        old, new = written.value(knob), planned.value(knob)
        lowered = old is not None and new is not None and new < old and knob != MEMORY_LOW
        too_tight = knob == MEMORY_MAX and old is not None and old < memory_floor_bytes and new != old
        if lowered or too_tight or moved(old, new, hysteresis):
            out.append(knob)
    for device in sorted(set(written.io_max) | set(planned.io_max)):
        old, new = written.io_max.get(device), planned.io_max.get(device)
        if old is None or new is None or moved(old.rbps, new.rbps, hysteresis) or moved(old.wbps, new.wbps, hysteresis):
            out.append(Knob.io_max(device))
    return out


@settings(max_examples=1000, deadline=None)
@given(written=st.one_of(st.none(), _limit_sets), planned=_limit_sets, hysteresis=st.sampled_from([0.0, 0.05, 0.5]),
       floor=st.sampled_from([0, 2000, 4000, 6000]))
# the band's edges: a lowered memory.low is no safety write; only memory.max is "too tight"
@example(written=Limits(CpuMax(None), 1, 8192, None, None, {}), planned=Limits(CpuMax(None), 1, 4096, None, None, {}),
         hysteresis=0.5, floor=0)
@example(written=Limits(CpuMax(None), 1, 0, 2000, None, {}), planned=Limits(CpuMax(None), 1, 0, 3000, None, {}),
         hysteresis=0.5, floor=4000)
def test_changed_knobs_keeps_its_rule(written, planned, hysteresis, floor):
    assert planner.changed_knobs(written, planned, hysteresis, floor) == \
        _changed_knobs_reference(written, planned, hysteresis, floor)
