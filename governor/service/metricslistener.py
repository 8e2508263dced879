"""The metrics' HTTP listener: any request for any path, GET or HEAD, is answered with one body
(the exposition), on the standard library's asyncio streams, one event loop on a thread of its
own.

What it guarantees: no connection waits for another. Each is a coroutine of the one loop, so an
idle or slow connection holds no one back, and a scrape is answered at once however many a user
keeps open (the observability audit: served one at a time, each for up to the timeout, two idle
connections made a scrape wait past Prometheus's default scrape_timeout of 10 s; a pool of
worker threads would only have raised that number to the pool's size).

The limits:

- :data:`CONNECTION_TIMEOUT_S` for a connection's whole request head, counted from its accept (a
  client trickling a byte at a time is cut off there), and as much again for its response, which
  is written as her socket takes it, a piece (:data:`WRITE_CHUNK_BYTES`) at a time: a response
  whose client takes no piece for :data:`STALL_TIMEOUT_S` is cut off there; then the connection
  is closed.
- The bytes in flight: every 200 response shares the one body ``respond()`` returned (no copy
  per connection: the head and the body are written separately), and what waits in the listener
  for a client that does not read is one piece at most — :data:`MAX_CONNECTIONS` ×
  :data:`WRITE_CHUNK_BYTES` (4 MiB) in all, whatever the body's size. A dropped connection's
  exception leaves no reference cycle holding its frames (the daemon collects cycles once a
  minute, ``runtime.GarbageCollection``). The security audit of 2026-11-28: the whole response
  was one new bytes object per connection, copied again into asyncio's buffer, and the cycles of
  timed-out connections kept them until the next collection — 8 processes holding connections
  that never read their response took a 1,000-user daemon from 87 to 280 MiB, and the listener
  alone, with a 15 MB body, to 2.26 GiB.
- :data:`MAX_CONNECTIONS` open at most, one descriptor each (prometheus_client's
  ``start_http_server`` spends a thread per connection and never times out, so any local user
  could exhaust the daemon's descriptors). One more closes, of the peer address that holds the
  most, the connection that has made no progress for the longest (its accept, its request read,
  the last piece of its response taken): a flood of her connections — idle, trickling their
  request or never reading their response — closes her own, never a scrape that is being
  served, and Prometheus's request, sent as soon as it connects, is read before the next
  connections are accepted (:data:`ACCEPTS_PER_ROUND` a round of the loop). (Before the audit of
  2026-11-28 the victim was the oldest still sending its request: once all of a flood's
  connections sat waiting for their reader, the one connection still reading its request was
  Prometheus's, and it was closed.) asyncio hands a connection over two
  rounds after it accepts it, and a closed one's descriptor goes a round after the close: under
  a flood, up to three rounds of accepts (3 × :data:`ACCEPTS_PER_ROUND`, 24 descriptors) are
  open beyond the cap for a moment (eight threads flooding the loopback: 88 open at most,
  against 65 for the hand-written selector loop this replaced).
- A request head over :data:`MAX_REQUEST_BYTES` is answered 431 (Request Header Fields Too
  Large), one that is not HTTP 400, a method other than GET and HEAD 405 (a connection that
  closes before its head ends gets nothing). One request per connection (``Connection: close``).
- After an error status the connection is half-closed and what the client still sends (the
  rest of a long head, a body) is read and dropped, :data:`MAX_DISCARD_BYTES` at most, within
  :data:`DISCARD_TIMEOUT_S`: closing a socket with unread input sends a TCP reset, and a client
  still sending a 1 MB header then saw "connection reset" instead of the status.

``respond()`` is called on the listener's thread, for each GET and HEAD; it should return the
same bytes object while its content stands (its caller's cache is what bounds a scrape's cost).
One that raises is answered 500 and logged once (until it succeeds again). A failure of the
loop itself (accept out of descriptors: it retries a second later) is logged once, and the
listener goes on.

Errors: :class:`Listener` raises OSError when its address cannot be bound (in use, not this
host's, no permission) or its loop has no descriptors, before any thread starts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import logging
import socket
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable

__all__ = ["ACCEPTS_PER_ROUND", "CONNECTION_TIMEOUT_S", "DISCARD_TIMEOUT_S", "LISTEN_BACKLOG", "Listener",
           "MAX_CONNECTIONS", "MAX_DISCARD_BYTES", "MAX_REQUEST_BYTES", "STALL_TIMEOUT_S", "WRITE_CHUNK_BYTES"]

log = logging.getLogger("drfgov")

#: A connection must send its whole request head within this many seconds of its accept, and
#: take the whole response within as many once it starts; then it is closed.
CONNECTION_TIMEOUT_S = 5.0
#: A response is written this many bytes at a time, each piece once the kernel has taken the one
#: before: what a client that does not read holds in the listener (asyncio copies what the
#: kernel has not taken yet).
WRITE_CHUNK_BYTES = 65536
#: A response whose client takes no piece of it for this many seconds is cut off (a scrape takes
#: a piece in microseconds; 1 s lets a client that never reads hold the listener's bytes no longer).
STALL_TIMEOUT_S = 1.0
#: Open connections at most, each one descriptor (the daemon keeps 256 for everything but the
#: users' counter files, monitors.users.DESCRIPTOR_RESERVE): one more closes, of the peer address
#: that holds the most, the one that has made no progress for the longest.
MAX_CONNECTIONS = 64
#: A request head longer than this is answered 431 (Prometheus sends a few hundred bytes).
MAX_REQUEST_BYTES = 16384
#: After an error status, at most this much more of the request is read and dropped before the
#: close, within :data:`DISCARD_TIMEOUT_S` (beyond either, the close resets the connection): a
#: flood of bad requests costs the listener — which shares the interpreter with the tick — a
#: bounded read each (the review of 2026-11-27: 4 MiB and the whole 5 s took the listener from
#: 0.5 to 0.75 of a core under six flooding processes).
MAX_DISCARD_BYTES = 2 * 2**20
DISCARD_TIMEOUT_S = 1.0
#: Connections accepted per round of the loop (asyncio's ``backlog``): a flood cannot hold back
#: a request that has arrived, and runs at most three rounds of these past :data:`MAX_CONNECTIONS`.
ACCEPTS_PER_ROUND = 8
#: Connections the kernel queues until the listener accepts them (they cost the daemon nothing).
LISTEN_BACKLOG = 128


class _Connection:
    """One connection's bookkeeping: its peer's address, when it last made progress (monotonic
    seconds: its accept, its request read, a piece of its response taken), and its task."""

    __slots__ = ("peer", "progress_s", "task")

    def __init__(self, peer: str):
        self.peer, self.progress_s = peer, time.monotonic()
        self.task: asyncio.Task | None = None  # held here: the loop keeps only a weak reference


class Listener:
    """Serve ``respond()`` (bytes of ``content_type``) on ``host``:``port`` (an IP address)
    until :meth:`close`, on a thread of its own (see the module's docstring).

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, host: str, port: int, respond: Callable[[], bytes], content_type: str):
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart finds it in TIME_WAIT
            sock.bind((host, port))
            sock.listen(LISTEN_BACKLOG)
        except OSError:
            sock.close()
            raise
        try:
            loop = asyncio.new_event_loop()  # a descriptor or two: out of them is an OSError here too
        except OSError:
            sock.close()
            raise
        loop.set_exception_handler(self._loop_failed)
        self._loop, self._stop = loop, asyncio.Event()
        self._respond, self._content_type = respond, content_type.encode()
        self._connections: dict[asyncio.StreamWriter, _Connection] = {}
        self._failing = self._broken = False  # respond() failed; the listener did (each logged once)
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._thread_main, args=(sock, started), name="drfgov-metrics",
                                        daemon=True)
        self._thread.start()
        started.result()  # serving, or start_server's exception (none is known once the socket is bound)

    def close(self) -> None:
        """Stop the loop (at once: it waits on nothing but its sockets), close every connection
        and the listening socket."""
        try:
            self._loop.call_soon_threadsafe(self._stop.set)
        except RuntimeError:  # the loop has ended already
            pass
        self._thread.join(timeout=10)

    def _thread_main(self, sock: socket.socket, started: concurrent.futures.Future) -> None:
        with asyncio.Runner(loop_factory=lambda: self._loop) as runner:  # at its end: tasks cancelled, loop closed
            runner.run(self._run(sock, started))

    async def _run(self, sock: socket.socket, started: concurrent.futures.Future) -> None:
        try:
            server = await asyncio.start_server(self._accepted, sock=sock, backlog=ACCEPTS_PER_ROUND,
                                                limit=MAX_REQUEST_BYTES)
            sock.listen(LISTEN_BACKLOG)  # asyncio listened with its accepts per round: the kernel's queue again
        except BaseException as exc:
            sock.close()
            started.set_exception(exc)
            return
        started.set_result(None)
        async with server:  # closes the listening socket at the end
            await self._stop.wait()
        for writer in list(self._connections):
            self._drop(writer)
        await asyncio.sleep(0)  # their sockets are closed in the round after the abort

    def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """A new connection (asyncio's callback, on the loop): the cap enforced, its task started."""
        if len(self._connections) >= MAX_CONNECTIONS:
            self._drop(self._victim())
        peer = writer.get_extra_info("peername")
        connection = _Connection(str(peer[0]) if peer else "?")
        self._connections[writer] = connection
        connection.task = asyncio.get_running_loop().create_task(self._serve(reader, writer, connection))

    def _victim(self) -> asyncio.StreamWriter:
        """The connection to close for a new one: of the peer address that holds the most (a
        user flooding the loopback closes her own first), the one that has made no progress for
        the longest — never a scrape being served, which takes a piece of its response every
        few microseconds, whatever phase her connections are in. Ties between peers go to the
        longest stalled of all (a flood spread over many source addresses, 127.0.x.y)."""
        held = Counter(c.peer for c in self._connections.values())
        writer, _ = min(self._connections.items(), key=lambda wc: (-held[wc[1].peer], wc[1].progress_s))
        return writer

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     connection: _Connection) -> None:
        head = body = b""
        try:
            try:
                async with asyncio.timeout(CONNECTION_TIMEOUT_S):
                    request = await _read_head(reader)
                head, body = self._answer(request)
            except asyncio.LimitOverrunError:
                head, body = _response(b"431 Request Header Fields Too Large", b"text/plain; charset=utf-8",
                                       f"request head longer than {MAX_REQUEST_BYTES} bytes\n".encode())
            connection.progress_s = time.monotonic()
            async with asyncio.timeout(CONNECTION_TIMEOUT_S):
                await _write(writer, head, body, connection)
            if not head.startswith(b"HTTP/1.1 2"):  # she may still be sending: see the module's docstring
                writer.write_eof()
                async with asyncio.timeout(DISCARD_TIMEOUT_S):
                    await _discard(reader, MAX_DISCARD_BYTES)
        except (asyncio.IncompleteReadError, TimeoutError, OSError) as exc:
            _forget(exc)  # closed before its head ended, the timeouts, reset by the client: nothing to report
        except Exception as exc:  # noqa: BLE001 - a bug: logged once, the listener must not die of it
            if not self._broken:
                log.exception("metrics: the listener failed (it goes on)")
            self._broken = True
            _forget(exc)
        finally:
            head = body = b""  # noqa: F841 - a traceback that outlives this frame holds no response
            self._drop(writer)

    def _answer(self, request: bytes) -> tuple[bytes, bytes]:
        """The response (head, body) to a ``request`` head: any path is the exposition, to GET
        and HEAD; its body is ``respond()``'s bytes themselves."""
        method, _, rest = request.partition(b" ")
        if not rest.strip():
            return _response(b"400 Bad Request", b"text/plain; charset=utf-8", b"bad request\n")
        if method not in (b"GET", b"HEAD"):
            return _response(b"405 Method Not Allowed", b"text/plain; charset=utf-8", b"GET or HEAD\n",
                             b"Allow: GET, HEAD\r\n")
        try:
            body = self._respond()
        except Exception:  # noqa: BLE001 - a bug: logged once, the listener goes on
            if not self._failing:
                log.exception("metrics: the exposition failed")
            self._failing = True
            return _response(b"500 Internal Server Error", b"text/plain; charset=utf-8", b"exposition failed\n")
        self._failing = False
        head, body = _response(b"200 OK", self._content_type, body)
        return (head, b"") if method == b"HEAD" else (head, body)

    def _drop(self, writer: asyncio.StreamWriter) -> None:
        """Close a connection now (a response still buffered is dropped with it)."""
        if self._connections.pop(writer, None) is not None:
            transport = writer.transport
            transport.abort()  # its reader removed, a read already due cancelled: nothing reads again
            if getattr(transport, "_read_ready_cb", None) is not None:
                # CPython 3.11's socket transport keeps a bound method of its own, a reference
                # cycle (the transport, its socket; ~1 KiB a connection kept until the daemon's
                # next collection): 3.12's close() drops it (python/cpython#100348), no abort() does.
                transport._read_ready_cb = None

    def _loop_failed(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        if not self._broken:
            log.error("metrics: the listener failed (it goes on): %s", context.get("message"),
                      exc_info=context.get("exception"))
        self._broken = True


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    """The request head, up to its blank line (``\\r\\n`` or a bare ``\\n`` ends a line).

    Raises:
        asyncio.LimitOverrunError: it is longer than :data:`MAX_REQUEST_BYTES`.
        asyncio.IncompleteReadError: the client closed before its end.
    """
    head = b""
    while True:
        line = await reader.readuntil(b"\n")
        head += line
        if len(head) > MAX_REQUEST_BYTES:
            raise asyncio.LimitOverrunError("request head too long", len(head))
        if line in (b"\n", b"\r\n"):
            return head


async def _write(writer: asyncio.StreamWriter, head: bytes, body: bytes, connection: _Connection) -> None:
    """Write ``head``, then ``body`` :data:`WRITE_CHUNK_BYTES` at a time, each piece once the
    kernel has taken all before it (what asyncio keeps of a piece the kernel has not taken yet is
    a copy: one piece at most, never the body), noting the connection's progress after each.

    Raises:
        TimeoutError: the kernel took no piece for :data:`STALL_TIMEOUT_S`.
        OSError: the connection was reset or dropped.
    """
    writer.transport.set_write_buffer_limits(high=0)  # drain() returns once the kernel has it all
    writer.write(head)
    view = memoryview(body)  # its slices are the body's own bytes
    try:
        for start in range(0, max(len(view), 1), WRITE_CHUNK_BYTES):
            writer.write(view[start:start + WRITE_CHUNK_BYTES])
            async with asyncio.timeout(STALL_TIMEOUT_S):
                await writer.drain()
            connection.progress_s = time.monotonic()
    finally:
        view.release()


async def _discard(reader: asyncio.StreamReader, limit_bytes: int) -> None:
    """Read and drop what the client sends until she closes, or ``limit_bytes`` are dropped."""
    dropped = 0
    while dropped <= limit_bytes:
        chunk = await reader.read(65536)
        if not chunk:
            return
        dropped += len(chunk)


def _forget(exc: BaseException) -> None:
    """Break the reference cycles an exception of a dropped connection leaves: a future that
    holds the exception, whose traceback holds the frames that awaited it (its locals: the
    future, the response). The daemon collects cycles once a minute (``runtime.GarbageCollection``),
    so each kept its connection's objects until then (the security audit of 2026-11-28: 41,481 of
    them after a flood). The frames are cleared, and the tracebacks dropped, along the chain of
    causes and contexts."""
    todo, seen = [exc], set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)  # one still running (the caller's) is left as it is
        e.__traceback__ = None
        todo += (e.__cause__, e.__context__)


def _response(status: bytes, content_type: bytes, body: bytes, extra: bytes = b"") -> tuple[bytes, bytes]:
    """(head, body) of a response: the body is not copied."""
    return (b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\nConnection: close\r\n" + extra + b"\r\n", body)
