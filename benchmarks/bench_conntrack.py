"""Cost of telling a governed user's connections to be tracked liberally (governor.shaping.conntrack).

    python benchmarks/bench_conntrack.py [--connections 1000] [--half-open 10000]   (as root)

In two scratch network namespaces joined by a veth pair, with the governor's table marking
uid 50002's connections: CONNECTIONS established TCP connections of hers (each with a byte
sent), and HALF_OPEN more of hers that never got past their SYN (a SYN to an address on the
link that nobody answers: what anyone can make by the hundred thousand). Then one pass of
:func:`track_liberally` with no budget to run out, and a second that finds every connection
told already: wall and CPU time, and per connection told. The pass's budget
(:data:`governor.shaping.conntrack.BUDGET_S`) is chosen from these figures. Prints; asserts
nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.shaping.conntrack import track_liberally  # noqa: E402
from governor.shaping.nft import OURS_MARK, OURS_MASK, NftClassifier, mark  # noqa: E402

NS, PEER, UID, PORT = "drfgov-bench-ct", "drfgov-bench-ct-peer", 50002, 7000

_LISTEN = """
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.78.0.2", {port}))
s.listen(4096)
kept = [s.accept()[0] for _ in range({n})]
time.sleep(3600)
"""
_CONNECT = """
import resource, socket, time
resource.setrlimit(resource.RLIMIT_NOFILE, ({n} + 1024, {n} + 1024))
kept = []
for _ in range({n}):
    s = socket.create_connection(("10.78.0.2", {port})); s.send(b"x"); kept.append(s)
for i in range({half_open}):
    t = socket.socket(); t.setblocking(False); t.connect_ex(("10.78.0.%d" % (3 + i % 240), 1000 + i // 240)); t.close()
print("ready", flush=True)
time.sleep(3600)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1000, help="her established connections")
    parser.add_argument("--half-open", type=int, default=10_000, help="her connections that never got past a SYN")
    args = parser.parse_args()
    _drop()
    procs = []
    try:
        for ns in (NS, PEER):
            _sh("ip", "netns", "add", ns)
        _sh("ip", "-n", NS, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", PEER)
        for ns, dev, addr in ((NS, "va", "10.78.0.1/24"), (PEER, "vb", "10.78.0.2/24")):
            _sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        nft = NftClassifier(NS, ingress=True)
        nft.install()
        nft.apply({UID: 0x10}, {})
        procs.append(subprocess.Popen(["ip", "netns", "exec", PEER, sys.executable, "-c",
                                       _LISTEN.format(port=PORT, n=args.connections)]))
        time.sleep(1.0)
        her = subprocess.Popen(["ip", "netns", "exec", NS, "setpriv", f"--reuid={UID}", f"--regid={UID}",
                                "--clear-groups", sys.executable, "-c",
                                _CONNECT.format(port=PORT, n=args.connections, half_open=args.half_open)],
                               stdout=subprocess.PIPE, text=True, cwd="/")
        procs.append(her)
        if her.stdout.readline().strip() != "ready":
            raise SystemExit("her connections could not be made")
        print(f"{args.connections} established connections of hers and {args.half_open} half-open, marked "
              f"{mark(0x10):#x}")
        for what in ("first pass", "second pass (all told already)"):
            wall, cpu = time.perf_counter(), time.process_time()
            done = track_liberally(OURS_MARK, OURS_MASK, NS, budget_s=3600.0)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            each = f", {wall / done.changed * 1e3:.2f} ms a connection told" if done.changed else ""
            print(f"{what}: {done.changed} told, {done.failed} not: {wall:.2f} s wall, {cpu:.2f} s CPU{each}")
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
        _drop()


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def _drop() -> None:
    for ns in (NS, PEER):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


if __name__ == "__main__":
    main()
