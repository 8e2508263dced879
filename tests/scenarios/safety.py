"""Safety evidence: OOM kills counted by the kernel, per cgroup and in its log.

* ``memory.events`` of a cgroup counts, hierarchically, ``oom`` (its limit was hit and reclaim
  failed) and ``oom_kill`` (processes in it killed by any OOM killer, cgroup or global —
  Documentation/admin-guide/cgroup-v2.rst);
* the kernel log (``/dev/kmsg``) has a line for every OOM kill, global or in a cgroup.
"""

from __future__ import annotations

import errno
import os
import re

from cgroups import Cgroup, CgroupError

__all__ = ["KernelLog", "OOM_LINE", "memory_events"]

OOM_LINE = re.compile(r"invoked oom-killer|Out of memory|oom-kill:|Killed process|Memory cgroup out of memory")


def memory_events(cg: Cgroup) -> dict[str, int]:
    """``memory.events`` as a dict (``low``, ``high``, ``max``, ``oom``, ``oom_kill``, ...)."""
    try:
        text = cg.read_text("memory.events")
    except (CgroupError, OSError):
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


class KernelLog:
    """The kernel log from now on (``/dev/kmsg``, opened at its end)."""

    def __init__(self, path: str = "/dev/kmsg"):
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        os.lseek(self.fd, 0, os.SEEK_END)

    def mark(self, text: str) -> None:
        """Write ``text`` into the log (dmesg shows where each scenario begins)."""
        os.write(self.fd, f"<5>drfgov-scenarios: {text}\n".encode())

    def new_lines(self) -> list[str]:
        """Messages logged since the last call (or since opening)."""
        lines = []
        while True:
            try:
                record = os.read(self.fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten before we read them: go on
                    continue
                raise
            if not record:
                break
            _, _, message = record.decode(errors="replace").partition(";")
            lines.append(message.split("\n", 1)[0])
        return lines

    def close(self) -> None:
        os.close(self.fd)
