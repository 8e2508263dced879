"""One conformance suite for every enforcement backend (fake trees, the real kernel, real systemd).

``check_writes(backend, target, device)`` applies a fixed set of limits, checks that the
kernel files (read back through the backend) show them, restores the snapshot and checks the
files are back. ``lacks``: knobs the backend's cgroup interface has no file for (cgroup v1 has
no memory.high); they must read back as the kernel default (max), never as a value half-written. ``check_dry_run`` is the same scenario for the backend that must not write.
``check_gone`` asks every backend to refuse a vanished slice with TargetGone.
"""

import time

from cgroups import CpuMax, IoMax
from governor.enforce.apply import apply_limit_set
from governor.enforce.model import MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, LimitSet, Target, TargetGone

MiB = 2**20
SCENARIO = LimitSet(
    cpu_max=CpuMax(50000, 100000), cpu_weight=250,
    memory_low=16 * MiB, memory_high=300 * MiB, memory_max=400 * MiB, io_max={},
)
IO_LIMIT = IoMax(rbps=MiB, wbps=None, riops=None, wiops=100)


def apply_scenario(backend, target: Target, device: str) -> None:
    backend.set_cpu_max(target, SCENARIO.cpu_max)
    backend.set_cpu_weight(target, SCENARIO.cpu_weight)
    backend.set_memory(target, MEMORY_LOW, SCENARIO.memory_low)
    backend.set_memory(target, MEMORY_HIGH, SCENARIO.memory_high)
    backend.set_memory(target, MEMORY_MAX, SCENARIO.memory_max)
    backend.set_io_max(target, device, IO_LIMIT)


def settled(backend, target: Target, expected=None, timeout_s: float = 3.0) -> LimitSet:
    """Read until it equals ``expected`` (or stops changing): systemd applies property changes
    to the cgroup files from its event loop, just after it answers the call."""
    deadline = time.monotonic() + timeout_s
    now = backend.read(target)
    while now != expected and time.monotonic() < deadline:
        time.sleep(0.05)
        now = backend.read(target)
    return now


def check_writes(backend, target: Target, device: str, lacks=()) -> None:
    before = backend.read(target)
    apply_scenario(backend, target, device)
    high = None if MEMORY_HIGH in lacks else SCENARIO.memory_high
    now = settled(backend, target, LimitSet(SCENARIO.cpu_max, SCENARIO.cpu_weight, SCENARIO.memory_low,
                                            high, SCENARIO.memory_max, {device: IO_LIMIT}))
    assert now.cpu_max == SCENARIO.cpu_max, now
    assert now.cpu_weight == SCENARIO.cpu_weight
    assert (now.memory_low, now.memory_high, now.memory_max) == (16 * MiB, high, 400 * MiB)
    assert now.io_max.get(device) == IO_LIMIT, now.io_max
    backend.set_cpu_max(target, CpuMax(None, 100000))
    unlimited = LimitSet(CpuMax(None, 100000), *[getattr(now, f) for f in ("cpu_weight", "memory_low", "memory_high", "memory_max", "io_max")])
    assert settled(backend, target, unlimited).cpu_max.quota_usec is None  # "max" round-trips
    apply_limit_set(backend, target, before)
    assert settled(backend, target, before) == before


def check_dry_run(backend, target: Target, device: str) -> None:
    before = backend.read(target)
    apply_scenario(backend, target, device)
    assert backend.read(target) == before  # nothing written
    assert [(r.unit, r.knob) for r in backend.recorded] == [
        (target.unit, k) for k in ("cpu.max", "cpu.weight", "memory.low", "memory.high", "memory.max", "io.max")]
    assert backend.recorded[-1].value == (device, IO_LIMIT)


def check_gone(backend, gone: Target) -> None:
    for call in (lambda: backend.set_cpu_max(gone, CpuMax(50000)), lambda: backend.set_memory(gone, MEMORY_HIGH, MiB),
                 lambda: backend.read(gone)):
        try:
            call()
        except TargetGone:
            continue
        raise AssertionError(f"{backend.name}: no TargetGone for a vanished slice")
