"""Backend that asks systemd to set the limits: systemd owns ``user-UID.slice``.

On a systemd host the slices belong to systemd (single-writer rule; slices take no
``Delegate=``), so limits go through ``org.freedesktop.systemd1.Manager.SetUnitProperties``
with ``runtime=true`` (gone at reboot, like ``systemctl set-property --runtime``); systemd then
writes the same cgroup files. Reads come from the cgroup files, the effective truth.

Property names and types: systemd.resource-control(5) and org.freedesktop.systemd1(5):
``CPUQuotaPerSecUSec`` (t, µs of CPU per wall second), ``CPUQuotaPeriodUSec`` (t),
``CPUWeight`` (t), ``MemoryLow|High|Max`` (t, bytes), ``IORead|WriteBandwidthMax`` and
``IORead|WriteIOPSMax`` (a(st): device node path, limit). ``UINT64_MAX`` is "infinity".
D-Bus transport: jeepney (pure Python, blocking connection).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from cgroups.limits import CpuMax, InvalidLimit, IoMax, check_cpu_weight, check_device
from governor.enforce.cgroupfs import read_limit_set, read_memory_current
from governor.enforce.model import EnforceError, Knob, LimitSet, Target, TargetGone

__all__ = ["SystemdBackend", "properties_for_cpu_max", "properties_for_io_max", "properties_for_memory", "UINT64_MAX"]

UINT64_MAX = 2**64 - 1
_MEMORY_PROPERTY = {"memory.low": "MemoryLow", "memory.high": "MemoryHigh", "memory.max": "MemoryMax"}
_IO_PROPERTY = {"rbps": "IOReadBandwidthMax", "wbps": "IOWriteBandwidthMax",
                "riops": "IOReadIOPSMax", "wiops": "IOWriteIOPSMax"}

Property = tuple[str, tuple[str, Any]]  # (name, (D-Bus signature, value))


def _t(value: int | None) -> tuple[str, int]:
    return ("t", UINT64_MAX if value is None else int(value))


def properties_for_cpu_max(limit: CpuMax) -> list[Property]:
    """cpu.max as systemd properties: quota per second of wall time, and the period."""
    per_sec = None if limit.quota_usec is None else round(limit.quota_usec * 1_000_000 / limit.period_usec)
    return [("CPUQuotaPerSecUSec", _t(per_sec)), ("CPUQuotaPeriodUSec", _t(limit.period_usec))]


def properties_for_memory(knob: Knob, limit_bytes: int | None) -> list[Property]:
    """memory.low|high|max as MemoryLow|High|Max, bytes (None: infinity)."""
    if limit_bytes is not None and not 0 <= limit_bytes < UINT64_MAX:
        raise InvalidLimit(f"{knob}: {limit_bytes} is not a byte count systemd takes")
    return [(_MEMORY_PROPERTY[knob.file], _t(limit_bytes))]


def properties_for_io_max(device: str, limit: IoMax) -> list[Property]:
    """io.max for one disk: four per-device list properties naming ``/dev/block/MAJ:MIN``."""
    node = f"/dev/block/{device}"
    return [(prop, ("a(st)", [(node, UINT64_MAX if getattr(limit, key) is None else getattr(limit, key))]))
            for key, prop in _IO_PROPERTY.items()]


class SystemdBackend:
    """Sets properties on ``user-UID.slice`` through the system bus.

    Args:
        connect: returns an object with ``send_and_get_reply(message, timeout)`` (a jeepney
            blocking connection); default: the system bus.
        timeout_s: per call; a stuck manager must not stall the control loop. After a call
            times out, calls fail at once with the same error for ``timeout_s`` (then one is
            tried again): one wait per ``timeout_s``, not one per user — 1,000 users each
            waiting 5 s made one tick last 83 minutes.
        clock: seconds, monotonic (for that quiet period).
    """

    name = "systemd"
    limits_outlive_cgroup = True  # runtime drop-ins, until she is released or the host reboots
    memory_high_throttles = True  # MemoryHigh=

    def __init__(self, connect: Callable[[], Any] | None = None, timeout_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic):
        self._connect = connect or _system_bus
        self._conn = None
        self.timeout_s, self._clock = timeout_s, clock
        self._timed_out: tuple[float, str] | None = None  # (when, why) of the last call that timed out
        self._to_inactive = False

    @contextmanager
    def releasing(self):
        """Let writes reach a slice that is not running: systemd writes the runtime drop-ins
        (``/run/systemd/system.control/UNIT.d``) for an inactive unit too, and those are what
        she would get back at her next login — so restore puts her originals there, instead
        of leaving our last limits to come back (and be taken for her own). A restore also asks
        the bus afresh, even within the quiet period after a timeout (the bus may be back by the
        stop; a bus still silent costs one wait, which starts the quiet period again)."""
        self._to_inactive = True
        self._timed_out = None
        try:
            yield
        finally:
            self._to_inactive = False

    def read(self, target: Target) -> LimitSet:
        return read_limit_set(target.cgroup)

    def memory_current(self, target: Target) -> int | None:
        return read_memory_current(target.cgroup)

    def set_cpu_max(self, target: Target, limit: CpuMax) -> None:
        self._set(target, lambda: properties_for_cpu_max(limit.validate()))

    def set_cpu_weight(self, target: Target, weight: int) -> None:
        self._set(target, lambda: [("CPUWeight", _t(check_cpu_weight(weight)))])

    def set_memory(self, target: Target, knob: Knob, limit_bytes: int | None) -> None:
        self._set(target, lambda: properties_for_memory(knob, limit_bytes))

    def set_io_max(self, target: Target, device: str, limit: IoMax) -> None:
        self._set(target, lambda: properties_for_io_max(check_device(device), limit.validate()))

    def ping(self) -> None:
        """Raise :class:`EnforceError` unless systemd answers on the bus."""
        from jeepney import DBusAddress, new_method_call

        peer = DBusAddress("/org/freedesktop/systemd1", bus_name="org.freedesktop.systemd1",
                           interface="org.freedesktop.DBus.Peer")
        self._call(new_method_call(peer, "Ping"), "ping systemd")

    def _manager(self, method: str, signature: str, args: tuple, what: str):
        """Call ``org.freedesktop.systemd1.Manager.method`` and return its unwrapped reply.

        Raises:
            EnforceError: systemd refused, or the bus did not answer (see :meth:`_call`).
        """
        from jeepney import DBusAddress, new_method_call

        manager = DBusAddress("/org/freedesktop/systemd1", bus_name="org.freedesktop.systemd1",
                              interface="org.freedesktop.systemd1.Manager")
        return self._call(new_method_call(manager, method, signature, args), what)

    def unit_property(self, unit: str, name: str, interface: str = "org.freedesktop.systemd1.Unit"):
        """The value of property ``name`` of ``unit`` as systemd holds it now (``LoadUnit``
        then ``org.freedesktop.DBus.Properties.Get``; a unit not loaded is loaded, not started).

        Raises:
            EnforceError: as :meth:`_manager`.
        """
        from jeepney import DBusAddress, new_method_call

        (path,) = self._manager("LoadUnit", "s", (unit,), f"{unit}: LoadUnit")
        props = DBusAddress(path, bus_name="org.freedesktop.systemd1", interface="org.freedesktop.DBus.Properties")
        ((_, value),) = self._call(new_method_call(props, "Get", "ss", (interface, name)), f"{unit}: Get {name}")
        return value

    def manager_property(self, name: str):
        """A property of the manager itself (``DefaultCPUAccounting``, ``Version``, …).

        Raises:
            EnforceError: as :meth:`_manager`.
        """
        from jeepney import DBusAddress, new_method_call

        props = DBusAddress("/org/freedesktop/systemd1", bus_name="org.freedesktop.systemd1",
                            interface="org.freedesktop.DBus.Properties")
        ((_, value),) = self._call(new_method_call(props, "Get", "ss", ("org.freedesktop.systemd1.Manager", name)),
                                   f"Get {name}")
        return value

    def _set(self, target: Target, properties_of: Callable[[], list[Property]]) -> None:
        """Send the properties ``properties_of()`` builds (it validates: a value systemd or the
        kernel would refuse is an EnforceError naming the unit)."""
        try:
            properties = properties_of()
        except InvalidLimit as exc:
            raise EnforceError(f"{target.unit}: {exc}") from None
        if not self._to_inactive and not target.cgroup.exists():
            raise TargetGone(f"{target.unit}: slice vanished")
        self._before_write(target.unit, [name for name, _ in properties])
        self._manager("SetUnitProperties", "sba(sv)", (target.unit, True, properties),
                      f"{target.unit}: SetUnitProperties {', '.join(name for name, _ in properties)}")

    def _before_write(self, unit: str, names: list[str]) -> None:
        """Called before each SetUnitProperties of properties ``names`` (a hook: the v1 backend
        notes the unit's drop-ins and which ones the write makes)."""

    def _call(self, message, what: str):
        from jeepney.wrappers import DBusErrorResponse, unwrap_msg

        if self._timed_out is not None and self._clock() - self._timed_out[0] < self.timeout_s:
            raise EnforceError(f"{what}: system bus: {self._timed_out[1]}")  # not answering: do not wait again yet
        try:
            if self._conn is None:
                self._conn = self._connect()
            reply = self._conn.send_and_get_reply(message, timeout=self.timeout_s)
            self._timed_out = None
            return unwrap_msg(reply)
        except DBusErrorResponse as exc:
            raise EnforceError(f"{what}: systemd refused: {exc.name}: {' '.join(map(str, exc.data))}") from None
        except (OSError, TimeoutError, ConnectionError) as exc:
            self._conn = None  # reconnect next time
            if isinstance(exc, TimeoutError):
                self._timed_out = (self._clock(), f"{str(exc) or 'no answer'} (waited {self.timeout_s:g} s; not answering)")
                raise EnforceError(f"{what}: system bus: {self._timed_out[1]}") from None
            raise EnforceError(f"{what}: system bus: {exc}") from None


def _system_bus():
    from jeepney.io.blocking import open_dbus_connection

    return open_dbus_connection(bus="SYSTEM")
