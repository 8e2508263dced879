"""Traffic for shaping tests: TCP sinks that count bytes per port, and a sender.

    python -m tests.netns.traffic record PORT...                      # see record()
    python -m tests.netns.traffic send HOST PORT [--seconds S]        # until the sink closes, or S seconds
    python -m tests.netns.traffic sink PORT... --seconds S --skip S   # prints {port: bits/s}

``record`` is what :class:`tests.netns.flows.Flows` uses: it reports when each flow's first byte
arrived and what arrived in every :data:`BUCKET_S` slot, on the host's monotonic clock, so that a
window can be chosen after the fact, when every flow is known to be running. ``sink`` (a window
fixed from the sink's own start) is kept for the callers that pace their senders themselves.
"""

import json
import selectors
import socket
import sys
import time

BUCKET_S = 0.05
MAX_RECORD_S = 600.0  # a forgotten recorder stops by itself
MAX_SEND_S = 600.0


def _listen(sel: selectors.BaseSelector, ports: list[int]) -> None:
    for port in ports:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", port))
        srv.listen()
        sel.register(srv, selectors.EVENT_READ, ("listen", port))


def record(ports: list[int]) -> dict:
    """Count what arrives on ``ports`` until a line other than ``peek`` (or EOF) on stdin.

    Prints ``ready`` once listening, then ``start PORT T`` when PORT's first byte arrives
    (T: ``time.monotonic()``, which is CLOCK_MONOTONIC: one clock for every process on the
    host, in any network namespace). Returns ``{"base": T0, "bucket_s": B, "ports": {port:
    {slot: bytes}}}``: slot ``k`` holds the bytes read in ``[T0 + k·B, T0 + (k+1)·B)``.
    A ``peek`` line prints ``counted `` and that document as it stands, and counting goes on
    (a window that has passed can be measured while the flows still run).
    """
    sel = selectors.DefaultSelector()
    _listen(sel, ports)
    sel.register(sys.stdin, selectors.EVENT_READ, ("stop", None))
    slots: dict[int, dict[int, int]] = {p: {} for p in ports}
    started: set[int] = set()
    base = time.monotonic()
    print("ready", flush=True)
    while time.monotonic() < base + MAX_RECORD_S:
        for key, _ in sel.select(timeout=0.5):
            kind, port = key.data
            if kind == "stop":
                if sys.stdin.readline().strip() != "peek":
                    return {"base": base, "bucket_s": BUCKET_S, "ports": slots}
                print("counted " + json.dumps({"base": base, "bucket_s": BUCKET_S, "ports": slots}), flush=True)
                continue
            if kind == "listen":
                conn, _ = key.fileobj.accept()
                sel.register(conn, selectors.EVENT_READ, ("data", port))
                continue
            data = key.fileobj.recv(1 << 16)
            if not data:
                sel.unregister(key.fileobj)
                continue
            t = time.monotonic()
            if port not in started:
                started.add(port)
                print(f"start {port} {t!r}", flush=True)
            slot = int((t - base) / BUCKET_S)
            slots[port][slot] = slots[port].get(slot, 0) + len(data)
    return {"base": base, "bucket_s": BUCKET_S, "ports": slots}


def sink(ports: list[int], seconds: float, skip: float) -> dict[int, float]:
    sel = selectors.DefaultSelector()
    _listen(sel, ports)
    counted = {p: 0 for p in ports}
    start = time.monotonic()
    print("ready", flush=True)
    while (now := time.monotonic()) < start + skip + seconds + 5:
        for key, _ in sel.select(timeout=0.2):
            kind, port = key.data
            if kind == "listen":
                conn, _ = key.fileobj.accept()
                sel.register(conn, selectors.EVENT_READ, ("data", port))
            else:
                data = key.fileobj.recv(1 << 16)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                t = time.monotonic()
                if start + skip <= t < start + skip + seconds:
                    counted[port] += len(data)
        if now > start + skip + seconds:
            break
    return {p: 8 * b / seconds for p, b in counted.items()}


def send(host: str, port: int, seconds: float = MAX_SEND_S) -> None:
    """Send as fast as TCP allows until the sink closes the connection or ``seconds`` pass."""
    s = socket.create_connection((host, port), timeout=60)
    chunk = b"x" * (1 << 16)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            s.sendall(chunk)
    except OSError:
        pass
    s.close()


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "record":
        result = record([int(a) for a in args])
        print(json.dumps(result), flush=True)
    elif command == "sink":
        seconds = float(args[args.index("--seconds") + 1])
        skip = float(args[args.index("--skip") + 1])
        ports = [int(a) for a in args[: args.index("--seconds")]]
        print(json.dumps(sink(ports, seconds, skip)), flush=True)
    else:
        seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args else MAX_SEND_S
        send(args[0], int(args[1]), seconds)
