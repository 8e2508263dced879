"""Real processes under other uids, started inside a user's v1 slice (every hierarchy).

The child moves itself (cgroup.procs of each hierarchy) while still root, then drops to the
uid and gid and execs: nothing it does afterwards runs outside her slice or as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

#: The system's Python: the test's own interpreter may live where other uids cannot enter (/root).
PYTHON = shutil.which("python3", path="/usr/bin:/bin:/usr/local/bin") or "/usr/bin/python3"

BUSY = "while True:\n    pass\n"
# Grows by STEP MiB every PAUSE s up to TARGET MiB (pages touched), prints 'reached', then holds.
GROWER = """
import sys, time
step, target, pause = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
chunks = []
while len(chunks) * step < target:
    chunks.append(bytearray(step << 20))
    time.sleep(pause)
print("reached", len(chunks) * step, flush=True)
while True:
    time.sleep(1)
"""


def start_as(uid: int, dirs: dict[str, Path], code: str, *args: str) -> subprocess.Popen:
    """Run ``python -c code args`` as ``uid`` (gid the same) inside ``dirs`` (controller → slice dir)."""
    procs_files = [str(d / "cgroup.procs") for d in dirs.values()]

    def enter():
        pid = str(os.getpid())
        for f in procs_files:
            with open(f, "w") as out:
                out.write(pid)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    return subprocess.Popen([PYTHON, "-c", code, *args], preexec_fn=enter, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd="/")
