"""Cost of updating user classes: HTB class batches (governor.shaping.classbatch) and the nftables uid map.

    python benchmarks/bench_shaping.py [--users 1000]   (as root; needs iproute2 and nftables)

In a scratch network namespace with a veth pair: install the tree, create USERS classes,
then change every class's rate (the worst batch), then change 10% of them; read every class's
counters (what each tick does); and fill the uid → class map. Prints milliseconds per batch. Target: ≤ 50 ms for 1,000 classes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.shaping.classes import MinorAllocator, plan_classes  # noqa: E402
from governor.shaping.htb import HtbTree  # noqa: E402
from governor.shaping.model import ClassRate  # noqa: E402
from governor.shaping.nft import NftClassifier  # noqa: E402

NS = "drfgov-bench"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    args = parser.parse_args()
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        subprocess.run(["ip", "-n", NS, "link", "add", "va", "type", "veth", "peer", "name", "vb"], check=True)
        subprocess.run(["ip", "-n", NS, "link", "set", "va", "up"], check=True)
        link = 10_000_000_000
        tree, nft = HtbTree("va", NS), NftClassifier(NS)
        tree.install(link)
        nft.install()
        uids = range(100_000, 100_000 + args.users)
        minors = MinorAllocator().assign(uids)
        weights = {u: 1.0 + u % 3 for u in uids}
        current: dict = {}
        for label, alloc in (("create", None), ("change all", {u: 5e6 + u % 7 for u in uids})):
            before, current = current, {minors[u]: r for u, r in plan_classes(link, weights, alloc).items()}
            t0 = time.perf_counter()
            touched = tree.apply(current, before)
            print(f"htb {label}: {len(touched)} classes in {(time.perf_counter() - t0) * 1e3:.1f} ms")
        changed = dict(current)
        for m in list(changed)[: args.users // 10]:
            changed[m] = ClassRate(changed[m].rate_bits_per_s + 1000, changed[m].ceil_bits_per_s + 1000)
        t0 = time.perf_counter()
        touched = tree.apply(changed, current)
        print(f"htb change 10%: {len(touched)} classes in {(time.perf_counter() - t0) * 1e3:.1f} ms")
        t0 = time.perf_counter()
        stats = tree.class_stats()
        print(f"htb counters: {len(stats)} classes read in {(time.perf_counter() - t0) * 1e3:.1f} ms (one dump)")
        t0 = time.perf_counter()
        n = nft.apply(minors, {})
        print(f"nft map: {n} elements in {(time.perf_counter() - t0) * 1e3:.1f} ms (one batch)")
        tree.close()
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


if __name__ == "__main__":
    main()
