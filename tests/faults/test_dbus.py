"""D-Bus gone, then slow (a bus that never answers; a systemd that never answers), then back,
under the systemd backend (:mod:`tests.faults.fakebus` at ``$DBUS_SYSTEM_BUS_ADDRESS``): the
daemon does not die nor fail a tick, keeps feeding the watchdog, logs each error once (not
every tick), and writes every limit once the bus answers; its stop restores every original
through the bus.

The backend's call timeout is 0.5 s here (the product's is 5 s: it changes the waiting, not
what the daemon does); a hung bus costs the client's 1 s authentication timeout."""

import logging
import threading
import time

import pytest

from governor.enforce.systemd import SystemdBackend
from tests.faults.fakebus import FakeBus
from tests.faults.harness import FakeClock, limits_lost, make_world, record_figures, unlimited_users

USERS = 12
WATCHDOG_PERIOD_S = 2.0  # pings due every 2 s; systemd would kill after twice that (WatchdogSec)


class RecordingNotifier:
    watchdog_period_s = WATCHDOG_PERIOD_S

    def __init__(self):
        self.pings: list[float] = []

    def watchdog(self):
        self.pings.append(time.monotonic())

    def ready(self, status): pass
    def status(self, status): pass
    def reloading(self): pass
    def stopping(self, status): pass


def wait_for(condition, timeout_s=120.0):
    end = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < end, "condition not met in time"
        time.sleep(0.02)


def test_dbus_gone_slow_and_back(base, monkeypatch, caplog):
    bus_path = base / "system_bus_socket"
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={bus_path}")
    world = make_world(base, USERS, backend_factory=lambda: SystemdBackend(timeout_s=0.5),
                       clock=FakeClock(real_time=True), pace_s=0.02)
    notifier = RecordingNotifier()
    d = world.daemon(notifier=notifier)
    bus = FakeBus(bus_path, world.host.user_slice, mode="mute")
    caplog.set_level(logging.INFO, logger="drfgov")
    thread = threading.Thread(target=lambda: setattr(d, "status", d.run()), daemon=True)
    thread.start()
    phases = {}
    try:
        waits = 0  # calls that waited for a timeout: connections to a mute bus, calls a stuck one took
        for mode, ticks in (("gone", 6), ("mute", 3), ("stuck", 3)):
            start = d.ticks
            if mode != "gone":
                bus.mode = mode
                bus.accepted, bus.calls = 0, []
                bus.start()
            waited = lambda: bus.accepted if mode == "mute" else bus.calls.count("SetUnitProperties")  # noqa: E731
            wait_for(lambda: d.ticks >= start + ticks and (mode == "gone" or waited() >= 2))  # past a quiet period
            bus.stop()
            phases[mode] = d.ticks - start
            waits += 0 if mode == "gone" else waited()
        gaps = [b - a for a, b in zip(notifier.pings, notifier.pings[1:])]
        still_unlimited = len(unlimited_users(world.host))
        bus.mode = "systemd"
        bus.start()
        back = d.ticks
        wait_for(lambda: not unlimited_users(world.host))  # within the backend's quiet period after a timeout
        ticks_to_write = d.ticks - back
    finally:
        d.request_stop()
        thread.join(60)
        bus.stop()
        d.host.monitor.close()  # its kept-open files, not to be inherited by later tests' children
    lost = limits_lost(world.host)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    down = sum(phases.values())
    record_figures("dbus", "D-Bus gone, hung (no answer), systemd not answering; then back", 3, len(lost),
                   down, 0, f"{down} ticks without limits while the bus was down ({phases}); {len(errors)} error "
                   f"lines for {USERS} users; longest watchdog gap {max(gaps):.1f} s; limits written "
                   f"{ticks_to_write} tick(s) after the bus came back; {waits} timed-out calls in "
                   f"{phases['mute'] + phases['stuck']} slow ticks")
    assert d.status == 0 and d.failed_ticks == 0 and not lost
    assert still_unlimited == USERS  # nothing could be written while it was down (no tick failed for it)
    # a slow bus costs one timeout per tick at most, not one per user (1,000 users at 5 s: 83 min)
    assert waits <= (phases["mute"] + phases["stuck"]) / 2, (waits, phases)
    assert max(gaps) < 2 * WATCHDOG_PERIOD_S, gaps  # systemd's watchdog would not have fired
    # a line per kind of failure (a phase, and what its start and end break), not per user nor per tick
    assert len(errors) <= 3 * len(phases), "\n".join(errors)
