"""Test cgroups in this machine's real cgroup v1 hierarchies, and their clean-up.

Each test gets a parent ``drfgov-test-XXXXXX`` at the root of the cpu, cpuacct, memory and
blkio hierarchies (the shell's own memory cgroup is elsewhere, so the root is the one place we
can always create and remove), with ``user.slice/user-UID.slice`` made in each, as systemd
would. Clean-up kills every process left in the tree, then removes the directories bottom-up;
it runs even when the test fails.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from pathlib import Path

from cgroups_v1.mounts import V1Mounts

GOVERNED_FILES = {
    "cpu": ("cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares"),
    "memory": ("memory.limit_in_bytes", "memory.soft_limit_in_bytes"),
    "blkio": ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
              "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"),
}


class SliceTree:
    """``PARENT/user.slice/user-UID.slice`` in every governed v1 hierarchy (a hierarchy that
    holds several controllers, ``cpu,cpuacct``, once)."""

    def __init__(self, mounts: V1Mounts):
        self.mounts = mounts
        self.parent = f"drfgov-test-{secrets.token_hex(3)}"
        self.points = sorted({Path(p) for p in mounts.points.values()})
        for point in self.points:
            (point / self.parent / "user.slice").mkdir(parents=True)

    def add_user(self, uid: int) -> dict[str, Path]:
        """Make her slice in each hierarchy; returns controller → directory."""
        dirs = self.slice_dirs(uid)
        for d in set(dirs.values()):
            d.mkdir()
        return dirs

    def slice_dirs(self, uid: int) -> dict[str, Path]:
        return {c: Path(p) / self.parent / "user.slice" / f"user-{uid}.slice" for c, p in self.mounts.points.items()}

    def governed_files(self, uid: int) -> dict[str, str]:
        """The text of every file the governor may write, of her slice."""
        out = {}
        for controller, names in GOVERNED_FILES.items():
            if controller in self.mounts:
                d = self.slice_dirs(uid)[controller]
                out.update({f"{controller}/{n}": (d / n).read_text() for n in names})
        return out

    def cleanup(self) -> None:
        """Kill what is left inside, move nothing out by hand, remove every directory bottom-up."""
        for _ in range(50):
            pids = set()
            for point in self.points:
                root = point / self.parent
                if root.exists():
                    for procs in root.rglob("cgroup.procs"):
                        try:
                            pids.update(int(p) for p in procs.read_text().split())
                        except OSError:
                            pass
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        for point in self.points:
            root = point / self.parent
            if not root.exists():
                continue
            for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [root]:
                for _ in range(50):
                    try:
                        d.rmdir()
                        break
                    except FileNotFoundError:
                        break
                    except OSError:
                        time.sleep(0.1)  # EBUSY while the last task exits
