"""What keeping a user's counter files open costs on a real kernel, and what it saves.

    python benchmarks/bench_kept_open.py [--cgroups 1000]

The daemon keeps each user's counter files open between ticks (``Cgroup(keep_open=True)``,
within the descriptor budget of :func:`monitors.users.descriptor_budget`) and re-reads them
with one ``pread`` each. A kernfs file read through a seq_file keeps the page-sized buffer of
its first read until it is closed (fs/seq_file.c ``seq_read_iter``, allocated
``GFP_KERNEL_ACCOUNT``: charged to the daemon's cgroup), so the descriptors pin kernel memory
that no RSS figure shows. This boots Debian's kernel under qemu (TCG, as tests/vm/boot.py
does), makes CGROUPS cgroups with the cpu and memory controllers, and prints:

* the unreclaimable slab (/proc/meminfo ``SUnreclaim``) that reading a user's six files — as
  the monitor does for a user with a memory.high and no governed disk — and keeping them open
  adds, per cgroup, and what closing them gives back;
* the CPU of one read of the six, kept open and opened and closed at each read. Under TCG
  both are many times what they are on a CPU; their ratio is the point.

Prints; asserts nothing. Needs what tier 2 needs (qemu, linux-image-amd64, virtme-ng).
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cgroups", type=int, default=1000)
    parser.add_argument("--in-guest", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_guest:
        measure(args.cgroups)
        return 0
    from tests.vm.boot import newest_kernel, tool_path

    os.environ["PATH"] = tool_path()
    inside = f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} {shlex.quote(__file__)} " \
             f"--in-guest --cgroups {args.cgroups}"
    print(f"booting {newest_kernel()} under TCG (qemu, 2 CPUs, 2 GiB)", flush=True)
    return subprocess.run(["vng", "--run", newest_kernel(), "--disable-kvm", "--force-9p", "--cpus", "2",
                           "--memory", "2G", "--exec", inside], check=False).returncode


def measure(count: int) -> None:
    from cgroups import Cgroup
    from monitors.model import MEMORY_STAT_KEYS

    root = Path("/sys/fs/cgroup")
    (root / "cgroup.subtree_control").write_text("+cpu +memory")
    parent = root / "bench-kept-open"
    parent.mkdir(exist_ok=True)
    (parent / "cgroup.subtree_control").write_text("+cpu +memory")
    paths = [parent / f"c{i}" for i in range(count)]
    for path in paths:
        path.mkdir(exist_ok=True)
    resource.setrlimit(resource.RLIMIT_NOFILE, (8 * count + 256, 8 * count + 256))

    def read_all(cgroups) -> float:
        start = time.process_time()
        for cg in cgroups:
            cg.cpu_stat(), cg.memory_current(), cg.memory_stat(MEMORY_STAT_KEYS), cg.memory_events()
            cg.pressure_totals("cpu"), cg.pressure_totals("memory")
        return (time.process_time() - start) / len(cgroups)

    try:
        before = _unreclaimable_kib()
        kept = [Cgroup(path, keep_open=True) for path in paths]
        read_all(kept)
        held = _unreclaimable_kib()
        for cg in kept:
            cg._last.clear()  # parsed again, as the opened ones below are: the descriptors' saving alone
        kept_s = read_all(kept)
        for cg in kept:
            cg.close()
        time.sleep(1)
        after = _unreclaimable_kib()
        opened_s = read_all([Cgroup(path) for path in paths])
    finally:
        for path in paths:
            path.rmdir()
        parent.rmdir()
    print(f"{count:,} cgroups, six counter files each (cpu.stat, memory.current, memory.stat, memory.events, "
          f"cpu.pressure, memory.pressure), kernel {os.uname().release}:")
    print(f"  kept open after a read: SUnreclaim +{(held - before) / count:.1f} KiB a cgroup; "
          f"closing them gave back {(held - after) / count:.1f} KiB a cgroup")
    print(f"  one read of the six, kept open: {kept_s * 1e6:.0f} µs CPU a cgroup; opened and closed at each read: "
          f"{opened_s * 1e6:.0f} µs (under TCG: the ratio, {opened_s / kept_s:.1f}×, is the point)")


def _unreclaimable_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("SUnreclaim:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/meminfo has no SUnreclaim line")


if __name__ == "__main__":
    sys.exit(main())
