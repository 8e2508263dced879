"""Counter files the kernel could not have written, mid-run, through the real monitor and loop
(the loop audit of 2026-11-27): each is that user's error, never the tick's. A memory.current of
2^63 stopped every user's tick (an int64 array of the plan); a cpu.stat value past a u64 was an
internal error, or a use of 1e19 cores; garbage in /proc/meminfo stopped every tick."""

import pytest

from tests.faults.harness import FIRST_UID, make_world

HERS = FIRST_UID + 1
CPU_STAT = "usage_usec {}\nuser_usec 0\nsystem_usec 0\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\n"


@pytest.mark.parametrize("name, text", [
    ("memory.current", f"{2**63}\n"),
    ("memory.current", f"{2**64 + 5}\n"),
    ("cpu.stat", CPU_STAT.format(10**25)),
    ("cpu.stat", CPU_STAT.format(10**400)),
], ids=["memory-2^63", "memory-past-u64", "cpu-10^25", "cpu-10^400"])
def test_a_counter_past_what_the_kernel_prints_is_her_parse_error(base, name, text):
    world = make_world(base, 3)
    d = world.daemon()
    d.tick(), d.tick()
    world.before_discovery = lambda w: (w.host.slice(HERS) / name).write_text(text)  # after the host's step
    report = d.tick()
    mine = report.users[HERS]
    assert mine.error is not None and mine.error.startswith("sample: ") and "internal error" not in mine.error
    assert name in mine.error
    others = [r for uid, r in report.users.items() if uid != HERS]
    assert others and all(r.error is None and r.usage for r in others)


def test_garbage_in_proc_meminfo_keeps_the_static_capacity(base):
    world = make_world(base, 3)
    d = world.daemon()
    d.tick(), d.tick()
    proc = world.host.root / "proc"
    (proc / "meminfo").write_text("MemTotal: 16000000 kB\nMemAvailable: 80x0000 kB\n")
    (proc / "stat").write_text("cpu  100 0 1x0 10000 0 0 0 0 0 0\n")
    d.tick()
    report = d.tick()
    assert report.errors == 0 and all(r.usage for r in report.users.values())
