"""The host as a whole, read each tick: CPU busy time and available memory (reads /proc; never writes).

The control loop subtracts the users' own use from these to learn what the rest of the host
(system services, the kernel's softirq work, the governor itself) takes right now, so the
capacity the users share is what is really left for them rather than a guess in the policy.

* ``/proc/stat``, line ``cpu``: ``user nice system idle iowait irq softirq steal guest
  guest_nice`` in USER_HZ ticks (proc(5)); busy = all but idle and iowait (guest time is
  already inside user and nice).
* ``/proc/meminfo``, ``MemAvailable`` (kB; Documentation/filesystems/proc.rst, since 3.14).

Both files are kept open and re-read with pread(2) from offset 0. Their numbers are read as the
kernel prints them (``%llu``/``%lu``: ASCII digits, a u64; :func:`cgroups.parse.uint`); a
field that is not one is no reading, and gives None as a file that cannot be read does.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from cgroups.errors import ParseError
from cgroups.parse import uint
from monitors.model import HostSample

__all__ = ["HostReader", "parse_cpu_busy_usec", "parse_memory_available_bytes"]

_USEC_PER_TICK = 1_000_000 / os.sysconf("SC_CLK_TCK")


def parse_cpu_busy_usec(stat_text: str) -> int | None:
    """Busy time of all CPUs in µs from /proc/stat's ``cpu`` line (fs/proc/stat.c, ``show_stat``:
    ``seq_put_decimal_ull`` each); None without one, or with a field of its first eight that is
    no number the kernel prints (:func:`cgroups.parse.uint`: not ``1x0``, nor ``١``, which
    ``int()`` takes)."""
    for line in stat_text.splitlines():
        if line.startswith("cpu "):
            try:
                fields = [uint(f) for f in line.split()[1:9]]
            except ParseError:
                return None
            fields += [0] * (8 - len(fields))
            user, nice, system, _idle, _iowait, irq, softirq, steal = fields
            return round((user + nice + system + irq + softirq + steal) * _USEC_PER_TICK)
    return None


def parse_memory_available_bytes(meminfo_text: str) -> int | None:
    """``MemAvailable`` in bytes from /proc/meminfo (fs/proc/meminfo.c: ``MemAvailable:  %8lu
    kB``); None on kernels without it, or when its line is not that (no value, a value that is
    no number the kernel prints: :func:`cgroups.parse.uint`)."""
    for line in meminfo_text.splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            if len(fields) != 3 or fields[2] != "kB":
                return None
            try:
                return uint(fields[1]) * 1024
            except ParseError:
                return None
    return None


class HostReader:
    """Reads :class:`~monitors.model.HostSample` s; files stay open between calls.

    A file that cannot be read, or read but not parsed (:func:`parse_cpu_busy_usec`,
    :func:`parse_memory_available_bytes`), gives None for its field (the loop then keeps the
    policy's static capacity): this never raises.
    """

    def __init__(self, clock: Callable[[], float], procfs: str = "/proc"):
        self.clock, self.procfs = clock, procfs
        self._fds: dict[str, int] = {}

    def __call__(self) -> HostSample:
        now = self.clock()
        stat, meminfo = self._read("stat"), self._read("meminfo")
        return HostSample(now, parse_cpu_busy_usec(stat) if stat else None,
                          parse_memory_available_bytes(meminfo) if meminfo else None)

    def _read(self, name: str) -> str | None:
        try:
            fd = self._fds.get(name)
            if fd is None:
                fd = self._fds[name] = os.open(f"{self.procfs}/{name}", os.O_RDONLY | os.O_CLOEXEC)
            chunks, offset = [], 0
            while chunk := os.pread(fd, 1 << 16, offset):
                chunks.append(chunk)
                offset += len(chunk)
            return b"".join(chunks).decode(errors="replace")
        except OSError:
            self.close()
            return None

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
