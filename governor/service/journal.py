"""Log records to the systemd journal with fields of their own (the native protocol), when the
daemon runs under systemd; plain lines otherwise.

A record logged with ``extra={"journal": {"DRFGOV_UID": "1001", ...}}`` reaches journald with
those fields besides ``MESSAGE``, ``PRIORITY`` and ``SYSLOG_IDENTIFIER=drfgov``, so that
``journalctl -u drfgov DRFGOV_UID=1001`` lists one user's limit changes. Field names: upper
case letters, digits and ``_``, not starting with ``_`` (systemd.journal-fields(7)).

The native protocol (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/): one datagram per entry to
``/run/systemd/journal/socket``, ``KEY=value`` lines; a value holding a newline is sent as
``KEY``, newline, its length as a little-endian 64-bit integer, the bytes, newline. Entries
here are a few hundred bytes, far below the datagram limit (the memfd path is not needed).

Under systemd means: ``$JOURNAL_STREAM`` names the device and inode of our stderr (sd-daemon(3):
compare, as a child that inherited the variable may have another stderr). A send that fails
(journald restarting, the socket gone) falls back to the stderr line for that record; a record
that cannot be formatted goes to ``logging.Handler.handleError`` (the caller never sees it).
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Mapping

__all__ = ["JOURNAL_SOCKET", "JournalHandler", "encode_entry", "stderr_is_journal"]

JOURNAL_SOCKET = "/run/systemd/journal/socket"
#: syslog priorities of logging levels (sd-daemon(3)).
PRIORITY = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}


def stderr_is_journal(environ: Mapping[str, str] = os.environ, fd: int = 2) -> bool:
    """Whether ``fd`` is the journal stream systemd gave us (``$JOURNAL_STREAM`` = ``DEV:INODE``)."""
    try:
        device, inode = (int(x) for x in environ.get("JOURNAL_STREAM", "").split(":"))
        st = os.fstat(fd)
    except (ValueError, OSError):
        return False
    return (st.st_dev, st.st_ino) == (device, inode)


def encode_entry(fields: Mapping[str, object]) -> bytes:
    """One journal entry in the native protocol (see the module docstring)."""
    out = bytearray()
    for key, value in fields.items():
        data = str(value).encode("utf-8", "replace")
        if b"\n" in data:
            out += key.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n"
        else:
            out += key.encode() + b"=" + data + b"\n"
    return bytes(out)


class JournalHandler(logging.Handler):
    """Sends each record as a journal entry with its ``journal`` fields; ``fallback`` emits
    the record when the journal cannot be reached."""

    def __init__(self, fallback: logging.Handler, socket_path: str = JOURNAL_SOCKET, identifier: str = "drfgov"):
        super().__init__()
        self.fallback, self.socket_path, self.identifier = fallback, socket_path, identifier
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields = {"MESSAGE": self.format(record), "PRIORITY": PRIORITY.get(record.levelno, 6),
                      "SYSLOG_IDENTIFIER": self.identifier, **getattr(record, "journal", {})}
            self.socket.sendto(encode_entry(fields), self.socket_path)
        except OSError:
            self.fallback.emit(record)
        except Exception:  # noqa: BLE001 - a record that does not format: reported by logging, not raised
            self.handleError(record)

    def close(self) -> None:
        self.socket.close()
        super().close()
