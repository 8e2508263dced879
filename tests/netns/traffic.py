"""Traffic for shaping tests: a TCP sink counting bytes per port, and a sender.

    python -m tests.netns.traffic sink PORT... --seconds S --skip S   # prints {port: bits/s}
    python -m tests.netns.traffic send HOST PORT --seconds S
"""

import json
import selectors
import socket
import sys
import time


def sink(ports: list[int], seconds: float, skip: float) -> dict[int, float]:
    sel = selectors.DefaultSelector()
    for port in ports:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("0.0.0.0", port))
        srv.listen()
        sel.register(srv, selectors.EVENT_READ, ("listen", port))
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


def send(host: str, port: int, seconds: float) -> None:
    s = socket.create_connection((host, port), timeout=10)
    chunk = b"x" * (1 << 16)
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            s.sendall(chunk)
    except OSError:
        pass
    s.close()


if __name__ == "__main__":
    if sys.argv[1] == "sink":
        args = sys.argv[2:]
        seconds = float(args[args.index("--seconds") + 1])
        skip = float(args[args.index("--skip") + 1])
        ports = [int(a) for a in args[: args.index("--seconds")]]
        print(json.dumps(sink(ports, seconds, skip)), flush=True)
    else:
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[5]))
