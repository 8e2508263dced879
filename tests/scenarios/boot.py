"""Boot the scenario tier: one VM, every scenario of tests/scenarios.

    python -m tests.scenarios.boot [PYTEST ARGS...]      # e.g. -k memory

The guest (tests/vm/boot.py's machinery) has 2 CPUs, 2 GiB of memory and, besides the usual
/dev/vda, a 512 MiB scratch disk (serial ``drfgov-scratch``) that qemu throttles to
:data:`SCRATCH_BYTES_PER_S` each way: a disk whose bandwidth is known whatever the host's load,
so the policy's ``capacity.disks`` is true. Results (results.json, tables.txt, the daemon's
log) are copied to ``$DRFGOV_SCENARIOS_OUT``, by default ``out/scenarios`` in the repository.

Exit status: the guest pytest's, or 3 when the VM could not be booted.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tests.vm.boot import REPO, Drive, boot

__all__ = ["SCRATCH", "SCRATCH_BYTES_PER_S", "main"]

SCRATCH_BYTES_PER_S = 20 * 2**20  # issue 14's disk: 20 MiB/s
SCRATCH = Drive("drfgov-scratch", 512 * 2**20, SCRATCH_BYTES_PER_S, SCRATCH_BYTES_PER_S)
TIMEOUT_S = 30 * 60


def main(argv: list[str]) -> int:
    out = Path(os.environ.get("DRFGOV_SCENARIOS_OUT", REPO / "out" / "scenarios"))
    t0 = time.monotonic()
    status = boot(["-v", "-s", *argv], tests="tests/scenarios", memory="2G", drives=[SCRATCH], copy_out_to=out,
                  timeout_s=TIMEOUT_S, label="scenario tier", guest_env={"PYTHONUNBUFFERED": "1"})
    print(f"scenario tier: {time.monotonic() - t0:.0f} s wall clock (boot included); results in {out}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
