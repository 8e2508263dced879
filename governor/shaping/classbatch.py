"""Many HTB class changes in one netlink round trip (rtnetlink ``RTM_NEWTCLASS``/``RTM_DELTCLASS``).

pyroute2 builds the tree (qdiscs, the IFB device, filters) and reads statistics; this module
does only the per-tick hot path, where pyroute2's generic marshalling costs about 200 µs per
class and its HTB encoder computes the legacy 256-entry rate tables in Python (about 1 ms per
class). A class message has a fixed layout, so it is packed here with :mod:`struct`:

* ``struct nlmsghdr`` + ``struct tcmsg`` (include/uapi/linux/rtnetlink.h);
* ``TCA_KIND "htb"`` and ``TCA_OPTIONS`` nesting ``TCA_HTB_PARMS`` — ``struct tc_htb_opt``,
  two ``struct tc_ratespec`` then buffer, cbuffer, quantum, level, prio
  (include/uapi/linux/pkt_sched.h) — plus ``TCA_HTB_RATE64``/``TCA_HTB_CEIL64`` above 2³² bytes/s.

No rate tables are sent: the rate specs carry ``linklayer = TC_LINKLAYER_ETHERNET``, and since
Linux 3.11 ``htb_change_class`` (net/sched/sch_htb.c) computes transmission times itself and
reads a table only to guess the link layer of old tc binaries. The messages go out in chunks
of at most :data:`CHUNK_BYTES` per ``sendmsg`` (each acknowledgement takes an skb in the
socket's receive buffer, so a whole batch at once would overrun it: ENOBUFS); every one asks for an acknowledgement, and the
answers are matched by sequence number, so one refused class names itself.

:meth:`ClassBatch.counters` is the other per-tick path: one ``RTM_GETTCLASS`` dump of an
interface, of which only ``TCA_STATS2`` (``TCA_STATS_BASIC`` and ``TCA_STATS_QUEUE``,
include/uapi/linux/gen_stats.h) is read — about 10× faster than decoding every attribute.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CHUNK_BYTES", "ClassChange", "ClassBatch", "pack_change", "quantum_bytes", "xmit_ticks"]

RTM_NEWTCLASS, RTM_DELTCLASS, RTM_GETTCLASS, NLMSG_ERROR, NLMSG_DONE = 40, 41, 42, 2, 3
NLM_F_REQUEST, NLM_F_ACK, NLM_F_REPLACE, NLM_F_CREATE, NLM_F_DUMP = 0x1, 0x4, 0x100, 0x400, 0x300
TCA_STATS2, TCA_STATS_BASIC, TCA_STATS_QUEUE = 7, 1, 3
TCA_KIND, TCA_OPTIONS = 1, 2
TCA_HTB_PARMS, TCA_HTB_RATE64, TCA_HTB_CEIL64 = 1, 6, 7
TC_LINKLAYER_ETHERNET = 1
CHUNK_BYTES = 16 * 1024  # ~160 classes: their acknowledgements (one skb each) fit RCVBUF_BYTES
RCVBUF_BYTES = 4 * 2**20
SO_RCVBUFFORCE, SOL_NETLINK, NETLINK_CAP_ACK = 33, 270, 10
U32_MAX = 2**32 - 1
MIN_QUANTUM_BYTES, MAX_QUANTUM_BYTES = 1514, 200_000  # sch_htb warns outside 1000..200000

_NLMSGHDR = struct.Struct("=IHHII")
_TCMSG = struct.Struct("=BBHiIII")
_NLA = struct.Struct("=HH")
_RATESPEC = "BBHhHI"
_HTB_OPT = struct.Struct("=" + _RATESPEC + _RATESPEC + "IIIII")
_KIND = _NLA.pack(8, TCA_KIND) + b"htb\0"
_NLMSGERR = struct.Struct("=i")
_BASIC = struct.Struct("=QI")  # struct gnet_stats_basic: bytes, packets
_QUEUE = struct.Struct("=IIIII")  # struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits


def _psched_tick_per_usec() -> float:
    """Scheduler ticks per microsecond, from /proc/net/psched (``t2us us2t clock_res hz``), as tc does."""
    try:
        with open("/proc/net/psched") as f:
            t2us, us2t, clock_res, _ = (int(x, 16) for x in f.read().split())
        return t2us / us2t * clock_res / 1e6
    except (OSError, ValueError):
        return 1.0


_TICKS_PER_USEC = _psched_tick_per_usec()


def xmit_ticks(rate_bytes_per_s: int, size_bytes: int) -> int:
    """Scheduler ticks to send ``size_bytes`` at ``rate_bytes_per_s`` (tc's ``tc_calc_xmittime``)."""
    return min(U32_MAX, int(1e6 * size_bytes / max(1, rate_bytes_per_s) * _TICKS_PER_USEC))


def quantum_bytes(rate_bytes_per_s: int) -> int:
    """HTB's DRR quantum: ``rate / 10`` (the kernel's default ``r2q``) clamped to a full frame and
    to 200,000. Spare bandwidth is lent in proportion to quantum, so within the clamp it follows
    the users' weights; setting it explicitly also spares the kernel log one warning per class."""
    return max(MIN_QUANTUM_BYTES, min(MAX_QUANTUM_BYTES, rate_bytes_per_s // 10))


@dataclass(frozen=True)
class ClassChange:
    """One class to create/replace (``rate_bits_per_s`` set) or delete (``rate_bits_per_s`` None).

    ``burst_bytes``/``cburst_bytes``: what may go at line speed after an idle spell.
    """

    ifindex: int
    handle: int  # major:minor as one u32
    parent: int
    rate_bits_per_s: int | None = None
    ceil_bits_per_s: int | None = None
    burst_bytes: int = 0
    cburst_bytes: int = 0


def pack_change(change: ClassChange, seq: int) -> bytes:
    """The netlink message for one change, with sequence number ``seq``."""
    body = _TCMSG.pack(0, 0, 0, change.ifindex, change.handle, change.parent, 0)
    if change.rate_bits_per_s is None:
        return _NLMSGHDR.pack(16 + len(body), RTM_DELTCLASS, NLM_F_REQUEST | NLM_F_ACK, seq, 0) + body
    rate, ceil = change.rate_bits_per_s // 8, (change.ceil_bits_per_s or change.rate_bits_per_s) // 8
    parms = _HTB_OPT.pack(0, TC_LINKLAYER_ETHERNET, 0, 0, 0, min(rate, U32_MAX),
                          0, TC_LINKLAYER_ETHERNET, 0, 0, 0, min(ceil, U32_MAX),
                          xmit_ticks(rate, change.burst_bytes), xmit_ticks(ceil, change.cburst_bytes),
                          quantum_bytes(rate), 0, 0)
    options = _NLA.pack(4 + len(parms), TCA_HTB_PARMS) + parms
    if rate > U32_MAX:
        options += _NLA.pack(12, TCA_HTB_RATE64) + struct.pack("=Q", rate)
    if ceil > U32_MAX:
        options += _NLA.pack(12, TCA_HTB_CEIL64) + struct.pack("=Q", ceil)
    body += _KIND + _NLA.pack(4 + len(options), TCA_OPTIONS) + options
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
    return _NLMSGHDR.pack(16 + len(body), RTM_NEWTCLASS, flags, seq, 0) + body


class ClassBatch:
    """A NETLINK_ROUTE socket (in network namespace ``netns``, None: this one) for class batches."""

    def __init__(self, netns: str | None = None):
        if netns is None:
            self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        else:
            from pyroute2.netns import create_socket

            self.sock = create_socket(netns, socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        try:  # root may exceed net.core.rmem_max; anyone may ask up to it
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF_BYTES)
        except OSError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF_BYTES)
        self.sock.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)  # errors come back without the request
        self.sock.bind((0, 0))
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, changes: Iterable[ClassChange]) -> dict[ClassChange, str]:
        """Apply every change; returns the refused ones with the kernel's reason (empty: all done).

        Raises:
            OSError: the socket itself failed.
        """
        refused: dict[ClassChange, str] = {}
        chunk, pending = [], {}
        size = 0
        for change in changes:
            self.seq += 1
            message = pack_change(change, self.seq)
            if size + len(message) > CHUNK_BYTES and chunk:
                self._flush(chunk, pending, refused)
                chunk, pending, size = [], {}, 0
            chunk.append(message)
            pending[self.seq] = change
            size += len(message)
        if chunk:
            self._flush(chunk, pending, refused)
        return refused

    def counters(self, ifindex: int, major: int) -> dict[int, tuple[int, int, int, int]]:
        """minor → (bytes, packets, drops, overlimits) of every class ``major:minor`` on ``ifindex``.

        Raises:
            OSError: the socket failed, or the kernel refused the dump (no such interface).
        """
        self.seq += 1
        seq = self.seq
        self.sock.send(_NLMSGHDR.pack(36, RTM_GETTCLASS, NLM_F_REQUEST | NLM_F_DUMP, seq, 0)
                       + _TCMSG.pack(0, 0, 0, ifindex, 0, 0, 0))
        out: dict[int, tuple[int, int, int, int]] = {}
        while True:
            data = self.sock.recv(1 << 20)
            for offset, length, kind, got_seq in _messages(data):
                if got_seq != seq:
                    continue
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    (error,) = _NLMSGERR.unpack_from(data, offset + 16)
                    raise OSError(-error, os.strerror(-error))
                if kind == RTM_NEWTCLASS:
                    handle = struct.unpack_from("=I", data, offset + 24)[0]
                    if handle >> 16 == major:
                        out[handle & 0xFFFF] = _class_counters(data, offset + 36, offset + length)

    def _flush(self, chunk: list[bytes], pending: dict[int, ClassChange], refused: dict[ClassChange, str]) -> None:
        self.sock.send(b"".join(chunk))
        while pending:
            data = self.sock.recv(1 << 20)
            for offset, _, kind, seq in _messages(data):
                if kind == NLMSG_ERROR and seq in pending:
                    (error,) = _NLMSGERR.unpack_from(data, offset + 16)
                    change = pending.pop(seq)
                    if error:
                        refused[change] = os.strerror(-error)


def _messages(data: bytes):
    """(offset, length, type, sequence number) of each netlink message in one datagram."""
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _, seq, _ = _NLMSGHDR.unpack_from(data, offset)
        yield offset, length, kind, seq
        offset += (length + 3) & ~3 if length else len(data)


def _class_counters(data: bytes, start: int, end: int) -> tuple[int, int, int, int]:
    """(bytes, packets, drops, overlimits) from the TCA_STATS2 attribute among ``data[start:end]``."""
    sent = packets = drops = overlimits = 0
    for kind, at, size in _attributes(data, start, end):
        if kind == TCA_STATS2:
            for inner, inner_at, inner_size in _attributes(data, at, at + size):
                if inner == TCA_STATS_BASIC and inner_size >= _BASIC.size:
                    sent, packets = _BASIC.unpack_from(data, inner_at)
                elif inner == TCA_STATS_QUEUE and inner_size >= _QUEUE.size:
                    _, _, drops, _, overlimits = _QUEUE.unpack_from(data, inner_at)
    return sent, packets, drops, overlimits


def _attributes(data: bytes, start: int, end: int):
    """(type, payload offset, payload size) of each netlink attribute in ``data[start:end]``."""
    while start + 4 <= end:
        length, kind = _NLA.unpack_from(data, start)
        if length < 4:
            return
        yield kind & 0x3FFF, start + 4, length - 4
        start += (length + 3) & ~3
