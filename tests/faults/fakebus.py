"""A stand-in for the system bus at a socket path, for :class:`governor.enforce.systemd.SystemdBackend`.

Modes: ``mute`` accepts and never answers (a hung bus daemon: the client's 1 s SASL timeout);
``stuck`` authenticates and says Hello, then never answers a method call (a systemd that does
not answer: the backend's call timeout); ``systemd`` answers ``SetUnitProperties`` by writing
the cgroup files as systemd would (``CPUQuotaPerSecUSec``/``CPUQuotaPeriodUSec`` → cpu.max,
``CPUWeight``, ``MemoryLow|High|Max``; org.freedesktop.systemd1(5)). "Gone" is no socket: stop it.
One peer, no routing: every message is for us. Wire format: jeepney's parser and serialiser.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from jeepney import HeaderFields, MessageType, new_error, new_method_return
from jeepney.low_level import Parser

UINT64_MAX = 2**64 - 1


class FakeBus:
    def __init__(self, path: Path, user_slice: Path, mode: str = "systemd"):
        self.path, self.user_slice, self.mode = Path(path), Path(user_slice), mode
        self.calls: list[str] = []
        self.accepted = 0  # connections taken
        self._conns: list[socket.socket] = []
        self._server: socket.socket | None = None
        self._serial = 0

    def start(self) -> None:
        self.path.unlink(missing_ok=True)
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(str(self.path))
        self._server.listen(64)
        threading.Thread(target=self._accept, args=(self._server,), daemon=True).start()

    def stop(self) -> None:
        """Gone: the socket and every connection closed."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in self._conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self._conns.clear()
        self.path.unlink(missing_ok=True)

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            self._conns.append(conn)
            self.accepted += 1
            if self.mode != "mute":
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            data = b""
            while b"BEGIN\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
                if b"AUTH" in chunk:
                    conn.sendall(b"OK 0123456789abcdef0123456789abcdef\r\n")
            parser = Parser()
            rest = data.split(b"BEGIN\r\n", 1)[1]
            while True:
                for msg in parser.feed(rest):
                    self._answer(conn, msg)
                rest = conn.recv(65536)
                if not rest:
                    return
        except OSError:
            return

    def _answer(self, conn: socket.socket, msg) -> None:
        if msg.header.message_type != MessageType.method_call:
            return
        member = msg.header.fields.get(HeaderFields.member)
        self.calls.append(member)
        if member == "Hello":
            reply = new_method_return(msg, "s", (":1.42",))
        elif self.mode == "stuck":
            return
        elif member == "SetUnitProperties":
            unit, _runtime, properties = msg.body
            self._apply(unit, dict(properties))
            reply = new_method_return(msg)
        elif member == "Ping":
            reply = new_method_return(msg)
        else:
            reply = new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod")
        self._serial += 1
        conn.sendall(reply.serialise(serial=self._serial))

    def _apply(self, unit: str, properties: dict) -> None:
        path = self.user_slice / unit
        if "CPUQuotaPerSecUSec" in properties:
            per_sec = properties["CPUQuotaPerSecUSec"][1]
            period = properties.get("CPUQuotaPeriodUSec", ("t", 100_000))[1]
            quota = "max" if per_sec == UINT64_MAX else str(round(per_sec * period / 1_000_000))
            (path / "cpu.max").write_text(f"{quota} {period}\n")
        if "CPUWeight" in properties:
            (path / "cpu.weight").write_text(f"{properties['CPUWeight'][1]}\n")
        for name, file in (("MemoryLow", "memory.low"), ("MemoryHigh", "memory.high"), ("MemoryMax", "memory.max")):
            if name in properties:
                value = properties[name][1]
                (path / file).write_text("max\n" if value == UINT64_MAX else f"{value}\n")


class DropInSystemd:
    """systemd as :class:`governor.enforce.systemd.SystemdBackend` meets it through an in-process
    connection (``SystemdBackend(connect=model.connect)``): ``SetUnitProperties`` with
    ``runtime=true`` goes into the unit's runtime drop-ins, which outlive the slice
    (/run/systemd/system.control/UNIT.d) and are applied again to the slice made at her next
    login (:meth:`log_in`); a running slice's cgroup files are written as :class:`FakeBus` does."""

    def __init__(self, user_slice: Path):
        self.user_slice = Path(user_slice)
        self.dropins: dict[str, dict] = {}
        self._files = FakeBus(Path("/nonexistent"), user_slice)

    def connect(self):
        return self

    def send_and_get_reply(self, msg, timeout=None):
        if msg.header.fields.get(HeaderFields.member) == "SetUnitProperties":
            unit, runtime, properties = msg.body
            assert runtime is True
            self.dropins.setdefault(unit, {}).update(dict(properties))
            if (self.user_slice / unit).is_dir():
                self._files._apply(unit, dict(properties))
        return new_method_return(msg)

    def close(self) -> None:
        pass

    def log_in(self, unit: str) -> None:
        """Her slice was just made: systemd applies the unit's properties, drop-ins included."""
        if unit in self.dropins:
            self._files._apply(unit, self.dropins[unit])
