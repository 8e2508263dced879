"""One directory in one cgroup v1 hierarchy: typed readers and validated writers named after its files.

No policy lives here. Errors are those of :mod:`cgroups.errors` (one vocabulary for both
layers), raised once, at this boundary: :class:`CgroupGone` (the directory vanished),
:class:`ControllerMissing` (no such file here), :class:`ParseError`, :class:`ReadFailed`,
:class:`InvalidLimit` (refused before writing) and :class:`WriteRefused` (the kernel refused,
with the errno). Sources: Documentation/admin-guide/cgroup-v1/ (see :mod:`cgroups_v1.values`).

The single-integer files (``cpu.cfs_quota_us``, ``cpu.cfs_period_us``, ``cpu.shares``,
``cpuacct.usage``, ``memory.usage_in_bytes``, ``memory.limit_in_bytes``,
``memory.soft_limit_in_bytes``, ``memory.failcnt``) are written through cgroupspy (its
``IntegerFile`` renders None as ``-1``, the v1 convention) and read here (:meth:`V1Cgroup._number`)
by v2's rules: :func:`cgroups.parse.single_int`, then the kernel's range of each file. cgroupspy's
reads are Python's ``int()``, which takes ``1_000``, ``+100``, ``-5`` and ``١٢``, and turn ``-1``
into None in every file, where the kernel prints ``-1`` in ``cpu.cfs_quota_us`` alone; its node
would give us nothing but the text, which :meth:`V1Cgroup.read_text` reads with this layer's one
translation of OSError. The rest is ours, see :mod:`cgroups_v1`.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

from cgroupspy.controllers import CpuController, MemoryController

from cgroups import parse
from cgroups.errors import CgroupGone, ParseError, WriteRefused
from cgroups.identity import CgroupDirectory
from cgroups_v1.values import (
    BlkioPair, OomControl, V1CpuStat, check_bytes_or_unlimited, check_cfs, check_cfs_period, check_cfs_quota,
    check_cpu_shares, check_throttle, in_bytes_or_none,
)

__all__ = ["V1Cgroup", "THROTTLE_FILES"]

_USEC_PER_TICK = 1_000_000 / os.sysconf("SC_CLK_TCK")
#: The four blkio throttle rule files and the io.max key each carries.
THROTTLE_FILES = {"rbps": "blkio.throttle.read_bps_device", "wbps": "blkio.throttle.write_bps_device",
                  "riops": "blkio.throttle.read_iops_device", "wiops": "blkio.throttle.write_iops_device"}


class _Node:
    """The one attribute of a cgroupspy node its controllers use: the directory, as bytes."""

    __slots__ = ("full_path",)

    def __init__(self, path: Path):
        self.full_path = os.fsencode(path)


class V1Cgroup(CgroupDirectory):
    """A directory in one v1 hierarchy, e.g. ``/sys/fs/cgroup/memory/user.slice/user-1000.slice``.

    Which readers make sense depends on the hierarchy (cpu, cpuacct, memory, blkio); a file the
    hierarchy lacks raises :class:`ControllerMissing`.
    """

    __slots__ = ("path", "_node")

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._node = _Node(self.path)

    # -- raw access (the boundary) ----------------------------------------------------------------

    def read_text(self, name: str) -> str:
        """The whole content of file ``name`` (errors as in the class docstring)."""
        try:
            with open(self.path / name, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError as exc:
            raise self._read_error(name, exc) from None

    def _number(self, name: str, check: Callable[[int], int] | None = None, unlimited: bool = False) -> int | None:
        """Single-integer file ``name`` read as v2's files are: :func:`cgroups.parse.single_int`
        (ASCII digits, blanks around them and the newline allowed), then ``check`` — the
        writer's rule of :mod:`cgroups_v1.values`, one copy for both — through
        :func:`cgroups.parse.held`. ``unlimited``: ``-1`` reads as None (``cpu.cfs_quota_us``;
        the memory limits, where it is only what was written to a plain file, the kernel
        printing a huge number instead: :func:`~cgroups_v1.values.in_bytes_or_none`).

        Raises:
            ParseError: naming the file, line and text; else as :meth:`read_text`.
        """
        path = str(self.path / name)
        text = self.read_text(name)
        if unlimited and text.strip() == "-1":
            return None
        return parse.single_int(text, path) if check is None else parse.single_int_within(text, path, check)

    def _spy_set(self, controller, attribute: str, name: str, value: int | None) -> None:
        """Write a single-integer file through cgroupspy (None → ``-1``)."""
        path = self.path / name
        if not path.exists():
            raise self._missing(name)
        try:
            setattr(controller(self._node), attribute, value)
        except OSError as exc:  # buffered: EINVAL and friends surface when cgroupspy closes the file
            if not self.path.is_dir():
                raise CgroupGone(self.path) from None
            raise WriteRefused(path, str(-1 if value is None else value), exc.errno or errno.EIO) from None

    # -- any hierarchy ----------------------------------------------------------------------------

    def procs(self) -> list[int]:
        """cgroup.procs: PIDs of the processes directly in this cgroup."""
        return parse.int_list(self.read_text("cgroup.procs"), str(self.path / "cgroup.procs"))

    def add_process(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) here: write it to cgroup.procs."""
        self.write_text("cgroup.procs", str(int(pid)))

    # -- cpu --------------------------------------------------------------------------------------

    def cpu_cfs_quota_us(self) -> int | None:
        """cpu.cfs_quota_us, µs of CPU per period (1000 … 2^63 - 1); None = unlimited (-1)."""
        return self._number("cpu.cfs_quota_us", check_cfs_quota, unlimited=True)

    def cpu_cfs_period_us(self) -> int:
        """cpu.cfs_period_us, µs (1000 … 1000000, default 100000): never 0 to divide by."""
        return self._number("cpu.cfs_period_us", check_cfs_period)

    def cpu_shares(self) -> int:
        """cpu.shares, relative weight (2 … 262144, default 1024)."""
        return self._number("cpu.shares", check_cpu_shares)

    def cpu_stat(self) -> V1CpuStat:
        """cpu.stat: ``nr_periods``, ``nr_throttled``, ``throttled_time`` (ns), cumulative."""
        path = str(self.path / "cpu.stat")
        kv = parse.flat_keyed(self.read_text("cpu.stat"), path)
        try:
            return V1CpuStat(kv["nr_periods"], kv["nr_throttled"], kv["throttled_time"])
        except KeyError as exc:
            raise ParseError(path, 1, "", f"expected a {exc.args[0]} line") from None

    def set_cpu_cfs(self, quota_usec: int | None, period_usec: int) -> None:
        """Write cpu.cfs_period_us (unless it reads ``period_usec`` already), then cpu.cfs_quota_us
        (validated; None = unlimited). A period that reads as garbage is written over."""
        quota_usec, period_usec = check_cfs(quota_usec, period_usec)
        try:
            current_usec = self.cpu_cfs_period_us()
        except ParseError:
            current_usec = None
        if current_usec != period_usec:
            self._spy_set(CpuController, "cfs_period_us", "cpu.cfs_period_us", period_usec)
        self._spy_set(CpuController, "cfs_quota_us", "cpu.cfs_quota_us", quota_usec)

    def set_cpu_shares(self, shares: int) -> None:
        """Write cpu.shares (2..262144)."""
        self._spy_set(CpuController, "shares", "cpu.shares", check_cpu_shares(shares))

    # -- cpuacct ----------------------------------------------------------------------------------

    def cpuacct_usage(self) -> int:
        """cpuacct.usage: CPU time of every task in this cgroup and below, ns, cumulative."""
        return self._number("cpuacct.usage")

    def cpuacct_stat_usec(self) -> tuple[int, int]:
        """cpuacct.stat ``user`` and ``system``, converted from USER_HZ ticks to µs."""
        path = str(self.path / "cpuacct.stat")
        kv = parse.flat_keyed(self.read_text("cpuacct.stat"), path)
        try:
            return round(kv["user"] * _USEC_PER_TICK), round(kv["system"] * _USEC_PER_TICK)
        except KeyError as exc:
            raise ParseError(path, 1, "", f"expected a {exc.args[0]} line") from None

    # -- memory -----------------------------------------------------------------------------------

    def memory_usage_in_bytes(self) -> int:
        """memory.usage_in_bytes: what the kernel charges this cgroup (page cache included), bytes."""
        return self._number("memory.usage_in_bytes")

    def memory_limit_in_bytes(self) -> int | None:
        """memory.limit_in_bytes, bytes; None = unlimited (:func:`~cgroups_v1.values.in_bytes_or_none`)."""
        return in_bytes_or_none(self._number("memory.limit_in_bytes", unlimited=True))

    def memory_soft_limit_in_bytes(self) -> int | None:
        """memory.soft_limit_in_bytes, bytes; None = unlimited (the default)."""
        return in_bytes_or_none(self._number("memory.soft_limit_in_bytes", unlimited=True))

    def memory_failcnt(self) -> int:
        """memory.failcnt: times usage hit memory.limit_in_bytes (cumulative)."""
        return self._number("memory.failcnt")

    def memory_stat(self, keys: tuple[str, ...] | None = None) -> dict[str, int]:
        """memory.stat (bytes and counts; ``total_*`` keys are hierarchical); only ``keys`` if given."""
        path = str(self.path / "memory.stat")
        text = self.read_text("memory.stat")
        return parse.flat_keyed(text, path) if keys is None else parse.flat_keyed_select(text, keys, path)

    def memory_oom_control(self) -> OomControl:
        """memory.oom_control (``oom_kill`` None on kernels before 4.13)."""
        path = str(self.path / "memory.oom_control")
        kv = parse.flat_keyed(self.read_text("memory.oom_control"), path)
        try:
            return OomControl(kv["oom_kill_disable"], kv["under_oom"], kv.get("oom_kill"))
        except KeyError as exc:
            raise ParseError(path, 1, "", f"expected a {exc.args[0]} line") from None

    def set_memory_limit_in_bytes(self, limit_bytes: int | None) -> None:
        """Write memory.limit_in_bytes (bytes, None = unlimited). Below usage the kernel reclaims
        and later OOM-kills inside the cgroup: callers keep it above use plus a margin."""
        value = check_bytes_or_unlimited("memory.limit_in_bytes", limit_bytes)
        self._spy_set(MemoryController, "limit_in_bytes", "memory.limit_in_bytes", value)

    def set_memory_soft_limit_in_bytes(self, limit_bytes: int | None) -> None:
        """Write memory.soft_limit_in_bytes (bytes, None = unlimited)."""
        value = check_bytes_or_unlimited("memory.soft_limit_in_bytes", limit_bytes)
        self._spy_set(MemoryController, "soft_limit_in_bytes", "memory.soft_limit_in_bytes", value)

    # -- blkio ------------------------------------------------------------------------------------

    def blkio_throttle_io_service_bytes(self, recursive: bool = True) -> dict[str, BlkioPair]:
        """blkio.throttle.io_service_bytes(_recursive): bytes read and written per ``MAJ:MIN``."""
        return self._blkio_pairs("blkio.throttle.io_service_bytes" + ("_recursive" if recursive else ""))

    def blkio_throttle_io_serviced(self, recursive: bool = True) -> dict[str, BlkioPair]:
        """blkio.throttle.io_serviced(_recursive): read and write I/Os per ``MAJ:MIN`` (same shape)."""
        return self._blkio_pairs("blkio.throttle.io_serviced" + ("_recursive" if recursive else ""))

    def blkio_throttle(self, key: str) -> dict[str, int]:
        """One rule file (``key`` rbps, wbps, riops or wiops: see :data:`THROTTLE_FILES`): its
        limit per ``MAJ:MIN`` (devices without a rule are not listed; a value 0 is no rule)."""
        name = THROTTLE_FILES[key]
        path = str(self.path / name)
        out = {}
        for no, line in enumerate(self.read_text(name).splitlines(), 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 2:
                raise ParseError(path, no, line, "expected 'MAJ:MIN VALUE'")
            value = parse.uint(parts[1], path, no, line)
            if value:  # 0 is how a rule is removed; the kernel lists no such line, a fake tree may
                out[parts[0]] = value
        return out

    def set_blkio_throttle(self, key: str, device: str, value: int | None) -> None:
        """Set (or with None remove) the rule of ``key`` (rbps, wbps, riops, wiops) for whole disk ``device``."""
        name = THROTTLE_FILES[key]
        device, value = check_throttle(name, device, value)
        self.write_text(name, f"{device} {0 if value is None else value}")

    def _blkio_pairs(self, name: str) -> dict[str, BlkioPair]:
        path = str(self.path / name)
        read: dict[str, int] = {}
        write: dict[str, int] = {}
        for no, line in enumerate(self.read_text(name).splitlines(), 1):
            parts = line.split()
            if not parts or parts[0] == "Total":
                continue
            if len(parts) != 3:
                raise ParseError(path, no, line, "expected 'MAJ:MIN OPERATION VALUE'")
            dev, op, value = parts
            if op == "Read":
                read[dev] = parse.uint(value, path, no, line)
            elif op == "Write":
                write[dev] = parse.uint(value, path, no, line)
        return {dev: BlkioPair(read.get(dev, 0), write.get(dev, 0)) for dev in sorted(read.keys() | write.keys())}

