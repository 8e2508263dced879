"""One cgroup v2 directory: typed readers and writers named after its interface files.

No policy lives here: the caller decides what to write; this layer checks that the kernel
would accept it, writes it, and turns the kernel's refusals into :class:`WriteRefused`.
Source: Documentation/admin-guide/cgroup-v2.rst ("Interface Files" of each controller).

Reading costs one ``open``/``read``/``close`` per file, or with ``keep_open`` one ``pread``
per counter file read every tick; cpu.stat, memory.events and the pressure files are not
parsed again while their bytes are those of their last read (``Cgroup._counter``;
``benchmarks/bench_cgroups.py``, ``benchmarks/bench_daemon.py``).
"""

from __future__ import annotations

import errno
import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, fields
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from cgroups import parse
from cgroups.errors import CgroupGone, ParseError, ReadFailed
from cgroups.identity import CgroupDirectory
from cgroups.limits import (
    BYTES_LIMIT_MAX, CpuMax, CpuStat, IoMax, IoStat, MemoryEvents,
    Pressure, PressureLine, PressureTotals, check_bytes, check_cpu_weight, check_device,
)

__all__ = ["COUNTER_FILES", "MEMORY_STAT_BYTES", "Cgroup", "Descriptors"]

T = TypeVar("T")

#: The amounts of memory.stat, in bytes ("All memory amounts are in bytes": cgroup-v2.rst,
#: "memory.stat"); its other keys count events (``pgfault``, ``workingset_refault_anon``, …).
MEMORY_STAT_BYTES = frozenset({
    "anon", "file", "kernel", "kernel_stack", "pagetables", "sec_pagetables", "percpu", "sock", "vmalloc", "shmem",
    "zswap", "zswapped", "file_mapped", "file_dirty", "file_writeback", "swapcached", "anon_thp", "file_thp",
    "shmem_thp", "inactive_anon", "active_anon", "inactive_file", "active_file", "unevictable", "slab_reclaimable",
    "slab_unreclaimable", "slab", "hugetlb"})

#: The files a monitor reads every tick; with ``keep_open`` only these stay open. A limit file
#: (cpu.max, memory.high, …) is read when a user is first seen and around a write: too rarely
#: to hold a descriptor (and the kernel's page-sized seq_file buffer that comes with it).
COUNTER_FILES = frozenset({"cpu.stat", "memory.current", "memory.stat", "memory.events", "io.stat",
                           "cpu.pressure", "memory.pressure", "io.pressure"})

_PRESSURE_FILES = {controller: f"{controller}.pressure" for controller in ("cpu", "memory", "io")}
_READ_SIZE = 1 << 16
_NO_IO = IoStat(0, 0, 0, 0, 0, 0)
_IO_STAT_KEYS = frozenset({"rbytes", "wbytes", "rios", "wios"})
_IO_MAX_KEYS = frozenset({"rbps", "wbps", "riops", "wiops"})


class Descriptors:
    """A budget of descriptors shared by the :class:`Cgroup` objects that keep counter files open
    (``keep_open=``): a file stays open after its first read only while one is left, and
    :meth:`Cgroup.close` (or a read that finds the cgroup removed) gives them back. So the
    budget counts the files really kept — four a user, six while a memory.high of the
    governor's is in force, two more with disks governed — not a worst case per user.

    Raises (construction): ValueError for a negative count."""

    __slots__ = ("total", "left")

    def __init__(self, count: int):
        if count < 0:
            raise ValueError(f"a budget of {count} descriptors")
        self.total, self.left = count, count

    def take(self) -> bool:
        """One descriptor from the budget, if one is left."""
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def give(self, count: int) -> None:
        """``count`` descriptors back (files closed)."""
        self.left += count

    @property
    def held(self) -> int:
        """Descriptors kept open now."""
        return self.total - self.left


class Cgroup(CgroupDirectory):
    """A cgroup v2 directory.

    Args:
        path: its directory, e.g. ``/sys/fs/cgroup/user.slice/user-1000.slice``.

    Readers raise :class:`CgroupGone` when the directory vanished, :class:`ControllerMissing`
    when the file's controller is not enabled, :class:`ParseError` on unexpected content.
    Writers raise :class:`InvalidLimit` before writing a value the kernel would refuse, and
    :class:`WriteRefused` (with the errno) when the kernel refuses anyway.
    """

    __slots__ = ("path", "_prefix", "_fds", "_budget", "_last")

    def __init__(self, path: str | os.PathLike[str], keep_open: bool | Descriptors = False):
        """``keep_open``: keep each of the :data:`COUNTER_FILES` open after its first read and
        re-read it with pread(2) at offset 0 (seq_file restarts there), sparing an
        open(2)/close(2) per read — for monitors that read the same files every tick; at most
        ``len(COUNTER_FILES)`` descriptors, and with a :class:`Descriptors` budget only while
        it has one left (the others are opened and closed at each read). :meth:`close`
        releases them."""
        self.path = Path(path)
        self._prefix = f"{self.path}/"  # string joins: pathlib costs more than the read itself
        self._fds: dict[str, int] | None = {} if keep_open else None
        self._budget = keep_open if isinstance(keep_open, Descriptors) else None
        self._last: dict[str, tuple[bytes, object]] = {}  # counter file → (its bytes last read, their value)

    @property
    def keeps_open(self) -> bool:
        """Whether this object keeps interface files open between reads now."""
        return bool(self._fds)

    def close(self) -> None:
        """Close the files kept open (``keep_open``; their descriptors back to its budget) and
        forget the readings kept with them. The object stays usable but keeps nothing open
        from then on: a slice's object outlives her monitor where a restore still holds it (a
        reload that ends her governance reads her memory.current through it), and a file it
        kept then would be held outside any budget, for good (issue 16's audit: one such
        reload at a limit of 1,024 reached EMFILE)."""
        self._release_fds()
        self._fds = None
        self._last.clear()

    def _release_fds(self) -> None:
        """Close every file kept open and give their descriptors back to the budget."""
        if self._fds:
            for fd in self._fds.values():
                os.close(fd)
            if self._budget is not None:
                self._budget.give(len(self._fds))
            self._fds.clear()

    def child(self, name: str) -> Cgroup:
        return Cgroup(self.path / name)

    # -- raw access -----------------------------------------------------------------------------

    def read_text(self, name: str) -> str:
        """The whole content of interface file ``name``.

        Raises:
            CgroupGone: the cgroup vanished; ControllerMissing: the file's controller is not
            enabled; ReadFailed: any other error of open(2) or read(2), with its errno.
        """
        return self._read_bytes(name).decode(errors="replace")  # kernel text is ASCII; garbage fails the parser

    def _read_bytes(self, name: str) -> bytes:
        """The whole content of ``name`` as the kernel gave it (errors as :meth:`read_text`)."""
        fds = self._fds
        kept = fds.get(name) if fds is not None else None
        fd = kept
        if fd is None:
            try:
                fd = os.open(self._prefix + name, os.O_RDONLY | os.O_CLOEXEC)
            except OSError as exc:
                raise self._read_error(name, exc) from None
        try:
            chunk = os.pread(fd, _READ_SIZE, 0)  # a short read is the whole file: skip the EOF read
            if kept is not None and len(chunk) < _READ_SIZE:
                return chunk  # a counter file kept open: the common case
            chunks = [chunk]
            while len(chunk) == _READ_SIZE and (chunk := os.pread(fd, _READ_SIZE, _READ_SIZE * len(chunks))):
                chunks.append(chunk)
        except OSError as exc:  # ENODEV: the cgroup was removed while we read it (or since we opened it)
            if fds is not None and fds.pop(name, None) is not None and self._budget is not None:
                self._budget.give(1)
            self._last.pop(name, None)
            os.close(fd)
            if exc.errno in (errno.ENODEV, errno.ENOENT):
                # every file kept is of the removed cgroup: a slice made again under the same
                # name is read through new ones
                self._release_fds()
                self._last.clear()
                raise CgroupGone(self.path) from None
            raise ReadFailed(self._prefix + name, exc.errno, exc.strerror) from None
        except BaseException:  # not the kernel's (an interrupt): a fresh descriptor is not leaked
            if kept is None:
                os.close(fd)
            raise
        if kept is None:
            if fds is None or name not in COUNTER_FILES or (self._budget is not None and not self._budget.take()):
                os.close(fd)
            else:
                fds[name] = fd
        return b"".join(chunks)

    def _counter(self, name: str, parse: Callable[[str, str], T]) -> T:
        """``parse(text, path)`` of counter file ``name``; when its bytes are those of its last
        read here, that read's value again, unparsed: ``parse`` is pure and its values
        immutable, so that is the value parsing would give. (An idle user's counters do not
        move between ticks; a busy one's memory.events and the pressure of what does not hold
        her back neither.) Errors as :meth:`read_text`, and ``parse``'s (a failed parse is not
        kept)."""
        raw = self._read_bytes(name)
        last = self._last.get(name)
        if last is not None and last[0] == raw:
            return last[1]
        value = parse(raw.decode(errors="replace"), self._prefix + name)
        self._last[name] = (raw, value)
        return value

    # -- readers ----------------------------------------------------------------------------------

    def controllers(self) -> frozenset[str]:
        """cgroup.controllers: controllers available to this cgroup."""
        return frozenset(self.read_text("cgroup.controllers").split())

    def subtree_control(self) -> frozenset[str]:
        """cgroup.subtree_control: controllers enabled for this cgroup's children."""
        return frozenset(self.read_text("cgroup.subtree_control").split())

    def procs(self) -> list[int]:
        """cgroup.procs: PIDs of the processes directly in this cgroup."""
        return parse.int_list(self.read_text("cgroup.procs"), self._prefix + "cgroup.procs")

    def cpu_stat(self) -> CpuStat:
        """cpu.stat (µs and counts, cumulative)."""
        return self._counter("cpu.stat", _cpu_stat)

    def cpu_max(self) -> CpuMax:
        """cpu.max; ``quota_usec`` None = unlimited. A value the kernel would not hold (a period
        outside 1000..1000000 µs, a quota below 1000 µs: :meth:`CpuMax.validate`) is a
        :class:`ParseError`, as garbage is."""
        path = self._prefix + "cpu.max"
        text = self.read_text("cpu.max")
        line = text.strip()
        parts = text.split()
        if len(parts) != 2:
            raise ParseError(path, 1, line, "expected '$QUOTA $PERIOD'")
        limit = CpuMax(parse.int_or_max(parts[0], path, 1, line), parse.uint(parts[1], path, 1, line))
        return parse.held(path, line, limit.validate)

    def cpu_weight(self) -> int:
        """cpu.weight, 1–10000 (default 100); another number is a :class:`ParseError`."""
        path = self._prefix + "cpu.weight"
        return parse.single_int_within(self.read_text("cpu.weight"), path, check_cpu_weight)

    def memory_current(self) -> int:
        """memory.current, bytes in use (including page cache): the cgroup's page counter in
        bytes (mm/memcontrol.c, ``memory_current_read``), which holds at most PAGE_COUNTER_MAX
        pages (mm/page_counter.c: LONG_MAX / PAGE_SIZE). A number past what the byte limits
        hold (:func:`check_bytes`, the one rule) is a :class:`ParseError`, as garbage is:
        2^63 read as a use stopped the tick for every user (an int64 array of the plan)."""
        name, path = "memory.current", self._prefix + "memory.current"
        text = self.read_text(name)
        value = parse.single_int(text, path)
        if value > BYTES_LIMIT_MAX:  # rare: the rule's own words (a check a read would cost 0.4 µs)
            parse.held(path, text.strip(), lambda: check_bytes(name, value))
        return value

    def memory_stat(self, keys: tuple[str, ...] | None = None) -> dict[str, int]:
        """memory.stat: bytes per kind (``anon``, ``file``, ``shmem``, ...) and event counts.

        ``keys``: only these (those the kernel lists), without parsing the other ~40 lines.
        An amount in bytes (:data:`MEMORY_STAT_BYTES`) past what :func:`check_bytes` takes is
        a :class:`ParseError`, as for memory.current: pages of the cgroup's, counted in a
        ``long`` (mm/memcontrol.c, ``memcg_page_state_output``), never more than it holds."""
        name, path = "memory.stat", self._prefix + "memory.stat"
        text = self.read_text(name)
        values = parse.flat_keyed(text, path) if keys is None else parse.flat_keyed_select(text, keys, path)
        if values and max(values.values()) > BYTES_LIMIT_MAX:  # rare: the rule's own words, as above
            for key in MEMORY_STAT_BYTES.intersection(values):
                value = values[key]
                parse.held(path, f"{key} {value}", lambda: check_bytes(f"{name} {key}", value),
                           lambda: _line_no(text, key))
        return values

    def memory_events(self) -> MemoryEvents:
        """memory.events (cumulative counts)."""
        return self._counter("memory.events", _memory_events)

    def memory_low(self) -> int | None:
        """memory.low, bytes of best-effort protection (None = max)."""
        return self._limit_bytes("memory.low")

    def memory_high(self) -> int | None:
        """memory.high, bytes above which the cgroup is throttled and reclaimed (None = max)."""
        return self._limit_bytes("memory.high")

    def memory_max(self) -> int | None:
        """memory.max, bytes hard limit (None = max)."""
        return self._limit_bytes("memory.max")

    def io_stat(self) -> Mapping[str, IoStat]:
        """io.stat per device ``"MAJ:MIN"`` (cumulative bytes and I/Os), read-only: a counter file
        (:meth:`_counter`), so a user whose disks did not move costs a ``pread`` and no parse.

        The kernel lists a device with no keys at all before the cgroup's first I/O on it
        (seen on 6.1 once io.max is set); that reads as zero counters.
        """
        return self._counter("io.stat", _io_stat_read_only)

    def io_max(self) -> dict[str, IoMax]:
        """io.max per device ``"MAJ:MIN"`` that has a limit; fields None = max. The kernel
        lists the four keys on each device's line (blk-throttle.c, ``tg_prfill_limit``): a
        line without them, or a value 0 (the kernel holds none: it writes ``max``), is a
        :class:`ParseError`."""
        path = self._prefix + "io.max"
        limits = {}
        for dev, kv in parse.device_keyed(self.read_text("io.max"), path, _IO_MAX_KEYS, allow_max=True).items():
            limit = _keyed(IoMax, kv, path)
            limits[dev] = parse.held(path, f"{dev} {limit.render()}", limit.validate)
        return {dev: limit for dev, limit in limits.items() if not limit.unlimited}  # as the kernel lists them

    def pressure(self, controller: str) -> Pressure:
        """``controller``.pressure for cpu, memory or io (PSI; Documentation/accounting/psi.rst)."""
        name = f"{controller}.pressure"
        text = self.read_text(name)
        fast = _pressure_fast(text)
        return fast if fast is not None else _pressure_checked(text, self._prefix + name)

    def pressure_totals(self, controller: str) -> PressureTotals:
        """The ``some`` and ``full`` stall totals of ``controller``.pressure (µs, cumulative):
        :meth:`pressure` without the averages, for a monitor that reads it every tick (a
        quarter of the objects, and for the kernel's own layout none of the float parsing).
        The same texts are accepted, with the same totals: the kernel's two-line layout by
        ``_PSI_TOTALS``, anything else as :meth:`pressure` checks it."""
        name = _PRESSURE_FILES.get(controller) or f"{controller}.pressure"  # one string a file: it keys her kept reads
        return self._counter(name, _pressure_totals)

    # -- writers ----------------------------------------------------------------------------------

    def set_cpu_max(self, limit: CpuMax) -> None:
        """Write cpu.max (validated: 1 ms ≤ period ≤ 1 s, quota ≥ 1 ms or max)."""
        self.write_text("cpu.max", limit.validate().render())

    def set_cpu_weight(self, weight: int) -> None:
        """Write cpu.weight (1–10000)."""
        self.write_text("cpu.weight", str(check_cpu_weight(weight)))

    def set_memory_low(self, limit_bytes: int | None) -> None:
        """Write memory.low (bytes, None = max)."""
        self.write_text("memory.low", _bytes("memory.low", limit_bytes))

    def set_memory_high(self, limit_bytes: int | None) -> None:
        """Write memory.high (bytes, None = max). Lowering it below use throttles and reclaims."""
        self.write_text("memory.high", _bytes("memory.high", limit_bytes))

    def set_memory_max(self, limit_bytes: int | None) -> None:
        """Write memory.max (bytes, None = max).

        Below memory.current the *writer* reclaims and then OOM-kills inside the cgroup:
        callers must keep it above use plus a margin (the planning layer does).
        """
        self.write_text("memory.max", _bytes("memory.max", limit_bytes))

    def set_io_max(self, device: str, limit: IoMax) -> None:
        """Write io.max for whole disk ``device`` (``"MAJ:MIN"``); all-None removes the limit."""
        self.write_text("io.max", f"{check_device(device)} {limit.validate().render()}")

    def enable_controllers(self, controllers: list[str]) -> None:
        """Add ``controllers`` to cgroup.subtree_control (one write each, so the error names it)."""
        for name in controllers:
            self.write_text("cgroup.subtree_control", f"+{name}")

    # -- helpers ----------------------------------------------------------------------------------

    def _limit_bytes(self, name: str) -> int | None:
        """A memory limit file: bytes or ``max`` (None), within :func:`check_bytes` (a value
        the kernel cannot hold is garbage, not a limit an admin set)."""
        path = self._prefix + name
        return parse.single_int_within(self.read_text(name), path, lambda value: check_bytes(name, value),
                                       allow_max=True)


#: One PSI line as the kernel prints it (kernel/sched/psi.c, ``psi_show``: ``avg10=%lu.%02lu``
#: … ``total=%llu``): the averages ASCII digits.digits, the total ASCII digits, a u64
#: (:func:`cgroups.parse.uint`). The one rule for PSI text: the fast match of the two-line
#: layout (``_PSI``, and ``_PSI_TOTALS`` for the totals alone) and the checked parse line by
#: line (:func:`_pressure_checked`) are built from it, the fast ones taking only totals of
#: :data:`cgroups.parse.FAST_DIGITS` digits (the rest checked), so they take the same texts.
#: Not ``nan``, ``inf``, a sign, an exponent or other scripts' digits, which ``float()``/``int()`` take.
_PSI_AVG, _PSI_TOTAL = r"[0-9]+\.[0-9]+", parse.FAST_UINT
_PSI_LINE_OF = "avg10=({a}) avg60=({a}) avg300=({a}) total=({t})".format
_PSI_LINE = re.compile(rf"(some|full) {_PSI_LINE_OF(a=_PSI_AVG, t='[0-9]+')}")
_PSI = re.compile(rf"some {_PSI_LINE_OF(a=_PSI_AVG, t=_PSI_TOTAL)}\nfull {_PSI_LINE_OF(a=_PSI_AVG, t=_PSI_TOTAL)}\n?\Z")
#: The same layout for the totals alone (the averages not captured): text this does not match
#: is checked as :meth:`Cgroup.pressure` checks it (garbage fails).
_PSI_TOTALS = re.compile(rf"some {_PSI_LINE_OF(a='?:' + _PSI_AVG, t=_PSI_TOTAL)}\n"
                         rf"full {_PSI_LINE_OF(a='?:' + _PSI_AVG, t=_PSI_TOTAL)}\n?\Z")


#: cpu.stat as the kernel writes it (kernel/cgroup/rstat.c, kernel/sched/core.c): the three
#: times; since Linux 6.12 the niced time; the force-idle time with core scheduling; with the
#: cpu controller the throttling counters, and since Linux 5.14 the bursts — for
#: :func:`_cpu_stat` to take in one match. Values are u64s, taken here of at most
#: :data:`cgroups.parse.FAST_DIGITS` digits. Text this does not match (keys added later,
#: another order, a value longer) is parsed key by key, where a value past 2^64 - 1 fails.
_N = parse.FAST_UINT
_CPU_STAT = re.compile(rf"usage_usec ({_N})\nuser_usec ({_N})\nsystem_usec ({_N})\n"
                       rf"(?:nice_usec {_N}\n)?(?:core_sched\.force_idle_usec {_N}\n)?"
                       rf"(?:nr_periods ({_N})\nnr_throttled ({_N})\nthrottled_usec ({_N})\n"
                       rf"(?:nr_bursts ({_N})\nburst_usec ({_N})\n)?)?\Z")


def _cpu_stat(text: str, path: str) -> CpuStat:
    """cpu.stat: the kernel's layout in one match (:data:`_CPU_STAT`; half the CPU of a parse
    key by key, issue 16), anything else key by key, with the same values and errors."""
    m = _CPU_STAT.match(text)
    if m is None:
        return _keyed(CpuStat, parse.flat_keyed(text, path), path)
    usage, user, system, periods, throttled, throttled_usec, bursts, burst_usec = m.groups()
    return CpuStat(int(usage), int(user), int(system), periods and int(periods), throttled and int(throttled),
                   throttled_usec and int(throttled_usec), bursts and int(bursts), burst_usec and int(burst_usec))


#: One io.stat line as the kernel writes it (block/blk-cgroup.c, ``blkcg_print_one_stat``):
#: the device, then nothing (no I/O yet, seen on 6.1) or the four counters and, since Linux
#: 4.19, the discards; u64s, taken here of at most :data:`cgroups.parse.FAST_DIGITS` ASCII
#: digits. A file of such lines alone is read in one pass (:func:`_io_stat`); anything else
#: (keys of io.latency or io.cost, a value longer, …) key by key.
_IO_STAT_LINE = re.compile(rf"([0-9]+:[0-9]+)(?: rbytes=({_N}) wbytes=({_N}) rios=({_N}) "
                           rf"wios=({_N})(?: dbytes=({_N}) dios=({_N}))?)? ?\n")


def _io_stat(text: str, path: str) -> dict[str, IoStat]:
    """io.stat: the kernel's lines in one pass of :data:`_IO_STAT_LINE`, anything else checked
    key by key (:func:`cgroups.parse.device_keyed`), with the same values and errors."""
    out, at = {}, 0
    for m in _IO_STAT_LINE.finditer(text):
        if m.start() != at:
            break
        at = m.end()
        dev, rb, wb, ri, wi, db, di = m.groups()
        out[dev] = _NO_IO if rb is None else IoStat(int(rb), int(wb), int(ri), int(wi), db and int(db), di and int(di))
    else:
        if at == len(text):
            return out
    return {dev: _keyed(IoStat, kv, path) if kv else _NO_IO
            for dev, kv in parse.device_keyed(text, path, _IO_STAT_KEYS, bare=True).items()}


def _io_stat_read_only(text: str, path: str) -> Mapping[str, IoStat]:
    """:func:`_io_stat` as a read-only mapping: a counter file's value is kept and shared."""
    return MappingProxyType(_io_stat(text, path))


def _memory_events(text: str, path: str) -> MemoryEvents:
    return _keyed(MemoryEvents, parse.flat_keyed(text, path), path)


def _pressure_totals(text: str, path: str) -> PressureTotals:
    """:meth:`Cgroup.pressure_totals` of ``text``: the kernel's layout by ``_PSI_TOTALS``,
    anything else checked as :meth:`Cgroup.pressure` checks it."""
    m = _PSI_TOTALS.match(text)
    if m is not None:
        return PressureTotals(int(m[1]), int(m[2]))
    checked = _pressure_checked(text, path)
    return PressureTotals(checked.some.total_usec, None if checked.full is None else checked.full.total_usec)


def _pressure_fast(text: str) -> Pressure | None:
    """The common two-line ``some``/``full`` layout, parsed in one regex match; None if it is not that."""
    m = _PSI.match(text)
    if m is None:
        return None
    g = m.groups()  # digits.digits and digits (_PSI_LINE): float() and int() take them all
    return Pressure(PressureLine(float(g[0]), float(g[1]), float(g[2]), int(g[3])),
                    PressureLine(float(g[4]), float(g[5]), float(g[6]), int(g[7])))


def _pressure_checked(text: str, path: str) -> Pressure:
    """Any layout of ``some`` and ``full`` lines (blank lines, blanks around a line, no ``full``),
    each line as the kernel prints it (:data:`_PSI_LINE`), each kind once, ``some`` there.

    Raises:
        ParseError: anything else, naming ``path``, the line and what was expected.
    """
    lines: dict[str, PressureLine] = {}
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _PSI_LINE.fullmatch(line.strip())
        if m is None:
            raise ParseError(path, no, line, "expected 'some|full avg10=D.D avg60=D.D avg300=D.D total=N' (digits 0-9)")
        kind, avg10, avg60, avg300, total = m.groups()
        if kind in lines:
            raise ParseError(path, no, line, f"a second {kind!r} line")
        lines[kind] = PressureLine(float(avg10), float(avg60), float(avg300), parse.uint(total, path, no, line))
    if "some" not in lines:
        raise ParseError(path, 1, text.strip()[:80], "expected a 'some' line")
    return Pressure(lines["some"], lines.get("full"))


def _line_no(text: str, key: str) -> int:
    """The number of the line of flat keyed ``text`` that holds ``key``'s value (its last)."""
    at = ("\n" + text).rfind(f"\n{key} ")
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def _keyed(cls, values: dict, path: str):
    """Build ``cls`` from keyed values: unknown keys ignored, missing optional → None."""
    names, required = _field_specs(cls)
    if not required <= values.keys():
        missing = next(name for name in names if name in required and name not in values)
        raise ParseError(path, 1, "", f"missing key {missing!r}")
    return cls(*map(values.get, names))


@functools.cache
def _field_specs(cls) -> tuple[tuple[str, ...], frozenset[str]]:
    """(every field name in order, the required ones) of ``cls``, a named tuple (a counter
    reading) or a dataclass (a limit), computed once per class; every field not required
    defaults to None."""
    if hasattr(cls, "_fields"):
        names, defaults = cls._fields, cls._field_defaults
    else:
        names = tuple(f.name for f in fields(cls))
        defaults = {f.name: f.default for f in fields(cls) if f.default is not MISSING}
    assert all(value is None for value in defaults.values()), f"{cls.__name__}: optional fields default to None"
    return names, frozenset(name for name in names if name not in defaults)


def _bytes(name: str, value: int | None) -> str:
    """The text of byte limit ``value`` for memory file ``name`` (:func:`check_bytes`)."""
    value = check_bytes(name, value)
    return "max" if value is None else str(value)
