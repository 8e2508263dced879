"""sd_notify(3) for ``Type=notify`` units, through the ``sdnotify`` package.

READY=1 after the first tick, STATUS= a one-line summary every tick, WATCHDOG=1 at least every
half ``WatchdogSec`` (systemd passes it as ``$WATCHDOG_USEC``), RELOADING=1/READY=1 around a
SIGHUP reload and STOPPING=1 on the way out. Outside systemd (no ``$NOTIFY_SOCKET``) every
call does nothing.
"""

from __future__ import annotations

import os

import sdnotify

__all__ = ["Notifier"]


class Notifier:
    """Reads ``$NOTIFY_SOCKET`` and ``$WATCHDOG_USEC``/``$WATCHDOG_PID`` when made."""

    def __init__(self):
        env = os.environ
        self.enabled = bool(env.get("NOTIFY_SOCKET"))
        self._notifier = sdnotify.SystemdNotifier() if self.enabled else None
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        mine = not pid or pid == str(os.getpid())
        #: how often to ping the watchdog (half its timeout), or None when it is off
        self.watchdog_period_s: float | None = int(usec) / 2e6 if usec.isdigit() and int(usec) > 0 and mine else None

    def _send(self, message: str) -> None:
        if self._notifier is not None:
            self._notifier.notify(message)

    def ready(self, status: str) -> None:
        self._send(f"READY=1\nSTATUS={status}")

    def status(self, status: str) -> None:
        self._send(f"STATUS={status}")

    def watchdog(self) -> None:
        if self.watchdog_period_s is not None:
            self._send("WATCHDOG=1")

    def reloading(self) -> None:
        self._send("RELOADING=1")

    def stopping(self, status: str) -> None:
        self._send(f"STOPPING=1\nSTATUS={status}")
