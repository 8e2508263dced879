"""How exactly a user's HTB class holds its rate, from 1 Mbit/s to 1 Gbit/s (target: ±5%).

    python benchmarks/bench_shaping_accuracy.py [--seconds 4] [--rates 1,10,100,1000]   (as root)

In two network namespaces joined by a veth pair (tests/netns/flows.py): the governor's tree on
the sender's side with the link and one user's class at RATE (rate = ceil), her TCP flow
saturating it. Over the steady part of the run it prints three rates against RATE: the bytes
the class sent (HTB's own count: every MTU-sized frame with its headers, even inside a GSO
packet), the bytes the receiving veth got (rx_bytes: a GSO packet counts its headers once, so
this is close to the payload), and the TCP payload the receiver read — lower than RATE by the
headers, 66 of every 1514 bytes (−4.4%) at MTU 1500 with TCP timestamps.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.shaping.htb import HtbTree  # noqa: E402
from tests.netns.flows import A, B, classify, drop_pair, make_pair, spawn_traffic  # noqa: E402

UID, PORT, SKIP_S = 50001, 5001, 2.0


def rx_bytes() -> int:
    out = subprocess.run(["ip", "-n", B, "-j", "-s", "link", "show", "vb"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)[0]["stats64"]["rx"]["bytes"]


def one(rate_bits_per_s: int, seconds: float) -> tuple[float, float, float]:
    make_pair()
    try:
        tree = HtbTree("va", A)
        tree.install(rate_bits_per_s)
        _, minors = classify(tree, A, rate_bits_per_s, {UID: 1.0})
        minor = minors[UID]
        sink = spawn_traffic(B, None, "sink", str(PORT), "--seconds", str(seconds), "--skip", str(SKIP_S),
                        stdout=subprocess.PIPE, text=True)
        assert sink.stdout.readline().strip() == "ready"
        sender = spawn_traffic(A, UID, "send", "10.77.0.2", str(PORT), "--seconds", str(seconds + SKIP_S + 1))
        time.sleep(SKIP_S)
        t0, class0, rx0 = time.monotonic(), tree.class_stats()[minor].bytes, rx_bytes()
        time.sleep(seconds)
        t1, class1, rx1 = time.monotonic(), tree.class_stats()[minor].bytes, rx_bytes()
        sender.wait(timeout=60)
        payload = json.loads(sink.stdout.readline())[str(PORT)]
        sink.wait(timeout=30)
        tree.close()
        elapsed = t1 - t0
        return 8 * (class1 - class0) / elapsed, 8 * (rx1 - rx0) / elapsed, payload
    finally:
        drop_pair()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rates", default="1,10,100,1000", help="Mbit/s, comma-separated")
    args = parser.parse_args()
    print(f"{'class rate':>12} {'HTB sent':>18} {'received (L2)':>18} {'TCP payload':>18}")
    for mbit in (float(r) for r in args.rates.split(",")):
        rate = int(mbit * 1e6)
        sent, received, payload = one(rate, args.seconds)
        cells = [f"{v / 1e6:9.2f} ({100 * (v / rate - 1):+5.1f}%)" for v in (sent, received, payload)]
        print(f"{mbit:>7g} Mbit/s " + " ".join(f"{c:>18}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
