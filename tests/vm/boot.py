"""Boot Debian's kernel under qemu (TCG) with virtme-ng and run the real-kernel tier inside.

    python -m tests.vm.boot [PYTEST ARGS...]

One boot runs every test in tests/vm: the guest sees this machine's files (copy-on-write),
has cgroup2 mounted at /sys/fs/cgroup with the cpu, memory and io controllers, 2 CPUs,
1 GiB of memory, and a 256 MiB virtual disk /dev/vda with two partitions (for io.max).
/dev/kvm hangs on these machines, so the VM always runs under TCG (--disable-kvm).

Other tiers reuse :func:`boot` with their own test directory, memory size, extra disks
(:class:`Drive`, optionally throttled by qemu) and a host directory that receives the guest's
out dir (``DRFGOV_VM_OUT``) when the VM is done; ``python -m tests.scenarios.boot`` does.

A guest stuck (:data:`SILENCE_S` without a line but the kernel's) says where it is before it
is killed: the kernel's console is shown at ``loglevel=4`` (stalls, lockups, hung tasks,
oopses, OOM kills) and its last alarming lines repeated; qemu answers QMP on a socket and the
vCPUs' RIPs are sampled and named from the guest's /proc/kallsyms (``nokaslr``), with the
kernel functions on each kernel-mode vCPU's stack (:func:`sample_vcpus`).

Exit status: the guest pytest's, or 3 when the VM could not be booted at all (named on
stderr). It never reports success for tests that did not run.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BOOT_FAILED = 3
#: A guest whose console prints nothing this long is stuck, not slow: a test that runs longer
#: is failed by pytest-timeout (600 s, printing its stack) and, stuck in the kernel, dumped by
#: faulthandler (660 s). Seen here under TCG (2026-11-27, tiers 2 and 4): qemu's two vCPUs
#: busy, qemu doing no I/O at all, nothing printed for 15 minutes and more.
SILENCE_S = 780.0
#: Kernel console level: messages below it are shown (``loglevel=4``: errors and worse — RCU
#: stalls, soft lockups, hung tasks, oopses, panics, one line per OOM kill — not the warnings of
#: an OOM report's dump, which tests that OOM on purpose would print by the hundred).
KERNEL_LOGLEVEL = 4
#: A console line the kernel printed: printk's timestamp ``[  123.456789] ``.
_KERNEL_STAMP = re.compile(r"\[\s*\d+\.\d{6}\] ")
_BOOT_STAMP = re.compile(r"\[\s*0\.000000\] ")
#: The kernel lines that say a guest is in trouble, shown first when a guest is stuck.
_KERNEL_ALARM = re.compile(r"rcu|lockup|hung task|blocked for more than|stall|Oops|BUG|panic|[Oo]ut of memory|"
                           r"oom-kill|Call Trace|RIP:|watchdog|WARNING|segfault|general protection")
#: How many of the kernel's lines a "guest stuck" message shows, and how wide.
KERNEL_SHOWN, KERNEL_WIDTH = 6, 200
#: Samples of the vCPUs' registers taken from a silent guest before it is killed, and their spacing.
VCPU_SAMPLES, VCPU_SAMPLE_INTERVAL_S = 5, 1.0
#: Boots a VM tier gets: a stuck guest (:data:`SILENCE_S`) is booted once more and every test
#: runs again, said on the console and in the closing summary (``guest stuck:``).
BOOTS = 2
DISK_SIZE_BYTES = 256 * 2**20
#: The guest's text symbols, dumped into its out dir as it starts (:func:`sample_vcpus` names RIPs).
KALLSYMS = "kallsyms"


def newest_kernel() -> str:
    """The newest Debian kernel image in /boot (the linux-image-amd64 package)."""
    images = sorted(glob.glob("/boot/vmlinuz-*"), key=os.path.getmtime)
    if not images:
        raise SystemExit(_boot_failure("no kernel in /boot: apt-get install linux-image-amd64"))
    return images[-1]


def make_disk(directory: Path) -> Path:
    """A sparse disk image with a 64 MiB partition and a second one filling the rest."""
    image = directory / "disk.img"
    with open(image, "wb") as f:
        f.truncate(DISK_SIZE_BYTES)
    subprocess.run([shutil.which("sfdisk", path=tool_path()) or "sfdisk", "-q", str(image)], input="label: dos\n,64M\n,\n", text=True, check=True)
    return image


@dataclass(frozen=True)
class Drive:
    """An extra virtual disk for the guest: a sparse image of ``size_bytes``, attached as a
    virtio-blk disk whose ``/sys/block/vdX/serial`` reads ``serial`` (at most 20 characters).

    ``read_bytes_per_s``/``write_bytes_per_s`` (None: unthrottled) are qemu's own throttling
    (``throttling.bps-read``/``bps-write``): the guest then has a disk of exactly that bandwidth
    whatever the host's load, which makes "the disk's capacity" a known number under TCG.
    """

    serial: str
    size_bytes: int
    read_bytes_per_s: int | None = None
    write_bytes_per_s: int | None = None

    def qemu_args(self, image: Path, index: int) -> list[str]:
        """``-drive``/``-device`` for qemu (virtme-ng passes them through ``--qemu-opts``)."""
        drive = f"if=none,id=drfgov-extra{index},file={image},format=raw"
        if self.read_bytes_per_s:
            drive += f",throttling.bps-read={self.read_bytes_per_s}"
        if self.write_bytes_per_s:
            drive += f",throttling.bps-write={self.write_bytes_per_s}"
        return ["-drive", drive, "-device", f"virtio-blk-pci,drive=drfgov-extra{index},serial={self.serial}"]


def _boot_failure(message: str) -> str:
    print(f"VM tier: cannot boot: {message}", file=sys.stderr)
    return str(BOOT_FAILED)


_TEST_ID = re.compile(r"(tests/\S+\.py::\S+)")
_PYTEST_DONE = re.compile(r"=+ .*\b(?:passed|failed|errors?|skipped|no tests ran)\b.* in [\d.]+s")


def where_it_stopped(lines: Sequence[str]) -> str:
    """Where a guest that never reported a status was, from its console ``lines``: the last
    test pytest named (``-v`` prints a test's id as it starts it), that pytest had finished
    (its summary line came: the guest hung after it), or the last line when pytest never named
    a test (a boot, or a unit before pytest, that hung). For the message of a tier that timed
    out or was stuck: the tail CI shows then says which test to look at."""
    for line in reversed(lines):
        if _PYTEST_DONE.search(line):
            return f"pytest had finished ({line.strip()[:120]}): the guest hung after it"
        found = _TEST_ID.search(line)
        if found:
            return f"the last test the console named: {found.group(1)}"
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return f"pytest named no test; the console's last line: {last[:200]!r}"


def is_kernel_line(line: str) -> bool:
    """Whether a console line is the kernel's (printk's timestamp starts it): such lines are
    shown and kept, but do not count as the guest talking (:func:`_relay`): a guest stuck in an
    RCU stall prints a report every few tens of seconds and is stuck all the same."""
    return _KERNEL_STAMP.match(line.lstrip("\r\x00 ")) is not None


def kernel_said(lines: Sequence[str], shown: int = KERNEL_SHOWN) -> list[str]:
    """The kernel's last words in console ``lines``: its last ``shown`` lines that sound an alarm
    (:data:`_KERNEL_ALARM`: stalls, lockups, hung tasks, oopses, OOM kills…), or, when none
    does, its last ``shown`` lines but the boot's chatter (stamped ``[    0.000000]``);
    each from its timestamp on, cut to :data:`KERNEL_WIDTH`."""
    said = []
    for line in lines:
        found = _KERNEL_STAMP.search(line)
        if found:
            said.append(line[found.start():].strip()[:KERNEL_WIDTH])
    # what the early console printed before loglevel= took effect (e820 map, command line…) is stamped 0
    after_boot = [line for line in said if not _BOOT_STAMP.match(line)]
    alarms = [line for line in said if _KERNEL_ALARM.search(line) and "command line:" not in line.lower()]
    return (alarms or after_boot)[-shown:] if shown > 0 else []


@dataclass(frozen=True)
class Symbols:
    """Kernel text symbols (``/proc/kallsyms`` or a System.map: ``ADDRESS TYPE NAME [MODULE]``)
    for naming the addresses a stuck guest's vCPUs are at; the kernel booted with ``nokaslr``,
    so the addresses of a dump taken in any such boot hold (those of modules: in that boot)."""

    addresses: tuple[int, ...]
    names: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> "Symbols":
        table: dict[int, str] = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3 or parts[1] not in ("t", "T", "w", "W"):
                continue
            try:
                address = int(parts[0], 16)
            except ValueError:
                continue
            if address == 0 or address == 2**64 - 1:  # kptr_restrict, or Debian's stub System.map
                continue
            name = parts[2] + (f" {parts[3]}" if len(parts) > 3 else "")
            table.setdefault(address, name)
        ordered = sorted(table.items())
        return cls(tuple(a for a, _ in ordered), tuple(n for _, n in ordered))

    def name(self, address: int) -> str | None:
        """``function+0xOFFSET`` (``[module]`` after it for a module's), or None when no
        symbol of the table is below ``address`` within 64 KiB (no function is that long)."""
        import bisect

        index = bisect.bisect_right(self.addresses, address) - 1
        if index < 0 or address - self.addresses[index] >= 0x10000:
            return None
        name, _, module = self.names[index].partition(" ")
        return f"{name}+{address - self.addresses[index]:#x}{f' {module}' if module else ''}"


def kernel_symbols(kernel: str, dumps: Sequence[Path] = ()) -> Symbols | None:
    """The first of ``dumps`` (a guest's /proc/kallsyms) or the kernel's System.map in /boot
    that holds symbols (Debian's is a one-line stub; the real one is in the -dbg package), or a
    dump a VM tier boot of this kernel saved (:func:`save_kernel_symbols`); None without one."""
    version = Path(kernel).name.removeprefix("vmlinuz-")
    for path in (*dumps, Path(f"/boot/System.map-{version}"), _symbols_cache(version)):
        try:
            symbols = Symbols.parse(Path(path).read_text(errors="replace"))
        except OSError:
            continue
        if len(symbols.addresses) > 1000:
            return symbols
    return None


def _symbols_cache(version: str) -> Path:
    return Path(tempfile.gettempdir()) / f"drfgov-kallsyms-{version}"


def save_kernel_symbols(kernel: str, dump: Path) -> None:
    """Keep the core kernel's symbols of a guest's /proc/kallsyms ``dump`` (no module's: they
    move from boot to boot) for the tiers that cannot dump them (the systemd tier)."""
    try:
        core = [line for line in dump.read_text(errors="replace").splitlines(keepends=True) if "[" not in line]
        if len(core) > 1000:
            _symbols_cache(Path(kernel).name.removeprefix("vmlinuz-")).write_text("".join(core))
    except OSError:
        pass


_CPU_HEADER = re.compile(r"^CPU#(\d+)", re.MULTILINE)
_RIP = re.compile(r"\bRIP=([0-9a-f]+)\b.*?\bCPL=(\d)\b.*?\bHLT=(\d)", re.IGNORECASE)
_RSP = re.compile(r"\bRSP=([0-9a-f]+)\b", re.IGNORECASE)


@dataclass(frozen=True)
class VcpuState:
    """One vCPU in one sample of qemu's ``info registers -a``."""

    cpu: int
    rip: int
    rsp: int
    cpl: int
    halted: bool


def parse_registers(text: str) -> list[VcpuState]:
    """The vCPUs of qemu's ``info registers -a`` (a ``CPU#N`` line, then its registers)."""
    heads = list(_CPU_HEADER.finditer(text))
    states = []
    for i, head in enumerate(heads):
        block = text[head.end():heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        rip, rsp = _RIP.search(block), _RSP.search(block)
        if rip and rsp:
            states.append(VcpuState(int(head.group(1)), int(rip.group(1), 16), int(rsp.group(1), 16),
                                    int(rip.group(2)), rip.group(3) == "1"))
    return states


def where_vcpu_is(state: VcpuState, symbols: Symbols | None) -> str:
    """``user space``, ``idle (hlt)`` or the kernel function the vCPU is in (its address when no
    symbol names it)."""
    if state.cpl == 3 or state.rip < 2**63:
        return "user space"
    if state.halted:
        return "idle (hlt)"
    return (symbols.name(state.rip) if symbols else None) or f"kernel {state.rip:#x}"


def summarize_vcpus(samples: Sequence[Sequence[VcpuState]], symbols: Symbols | None) -> str:
    """``vCPU0 in f+0x1a (5/5 samples), vCPU1 in user space (3/5 samples), g+0x8,+0x10 (2/5
    samples)``: where each vCPU was, by function, most often first, from several samples of
    :func:`parse_registers`."""
    from collections import Counter

    where: dict[int, Counter[str]] = {}
    offsets: dict[tuple[int, str], list[str]] = {}
    for sample in samples:
        for state in sample:
            place = where_vcpu_is(state, symbols)
            function, plus, offset = place.partition("+")  # "f+0x1a [module]" → "f [module]", "0x1a"
            offset, _, module = offset.partition(" ")
            function += f" {module}" if module else ""
            where.setdefault(state.cpu, Counter())[function] += 1
            seen = offsets.setdefault((state.cpu, function), [])
            if plus and f"+{offset}" not in seen:
                seen.append(f"+{offset}")
    parts = []
    for cpu in sorted(where):
        found = where[cpu].most_common()
        shown = ", ".join(f"{_with_offsets(function, offsets[cpu, function])} ({count}/{len(samples)} samples)"
                          for function, count in found[:3])
        parts.append(f"vCPU{cpu} in {shown}{f', {len(found) - 3} more functions' if len(found) > 3 else ''}")
    return ", ".join(parts) if parts else "no vCPU in qemu's answer"


def _with_offsets(function: str, offsets: list[str]) -> str:
    name, _, module = function.partition(" ")
    return f"{name}{','.join(offsets[:3])}{',…' if len(offsets) > 3 else ''}{f' {module}' if module else ''}"


def stack_words(memory_dump: str, symbols: Symbols | None, shown: int = 8) -> list[str]:
    """The kernel functions named by the words of a vCPU's stack (qemu's ``x/NNgx``: ``ADDR:
    WORD WORD``), nearest the top first, each once: return addresses mostly, stale ones
    possibly, so a hint at the call chain, not a backtrace."""
    if symbols is None:
        return []
    names: list[str] = []
    for line in memory_dump.splitlines():
        for word in line.partition(":")[2].split():
            try:
                value = int(word, 16)
            except ValueError:
                continue
            name = symbols.name(value) if value >= 2**63 else None
            if name and name not in names and not name.split(" ")[0].endswith("+0x0"):  # +0x0: a pointer
                names.append(name)
    return names[:shown]


class _Qmp:
    """A minimal QMP client on qemu's unix socket (``-qmp unix:PATH,server=on,wait=off``)."""

    def __init__(self, path: Path, timeout_s: float = 10) -> None:
        import socket

        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        self.sock.connect(str(path))
        self.reader = self.sock.makefile("r", encoding="utf-8", errors="replace")
        self._answer()  # the greeting
        self.call("qmp_capabilities")

    def _answer(self) -> dict:
        import json

        while True:
            line = self.reader.readline()
            if not line:
                raise OSError("qemu closed its QMP socket")
            message = json.loads(line)
            if "event" not in message:
                return message

    def call(self, command: str, **arguments: object) -> object:
        import json

        self.sock.sendall(json.dumps({"execute": command, "arguments": arguments}).encode() + b"\n")
        answer = self._answer()
        if "error" in answer:
            raise OSError(f"QMP {command}: {answer['error'].get('desc', answer['error'])}")
        return answer.get("return", answer.get("QMP"))

    def hmp(self, command: str, cpu: int | None = None) -> str:
        arguments: dict[str, object] = {"command-line": command}
        if cpu is not None:
            arguments["cpu-index"] = cpu
        return str(self.call("human-monitor-command", **arguments))

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def _qemu_threads(qmp_path: Path) -> dict[str, float]:
    """CPU seconds (user + system) each thread (``name tid``: ``qemu-system-x86 1234``) of the qemu
    (``qemu-system…`` its argv[0]) whose command line names ``qmp_path`` has used; empty when
    there is no such process."""
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit():
                continue
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if b"qemu-system" not in argv[0] or not any(str(qmp_path).encode() in arg for arg in argv):
                continue  # vng and virtme-run name the socket too
            used = {}
            for task in (proc / "task").iterdir():
                stat = (task / "stat").read_text()
                fields = stat.rpartition(")")[2].split()
                used[f"{stat[stat.index('(') + 1:stat.rindex(')')]} {task.name}"] = \
                    (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            return used
        except (OSError, ValueError, IndexError):
            continue
    return {}


def _host_cpu(before: dict[str, float], after: dict[str, float], elapsed_s: float,
              vcpu_threads: Mapping[int, int] | None = None) -> list[str]:
    """``host CPU of qemu's threads …: vCPU0 thread 1234 95%, …``: the threads that used 5% and
    more (``vcpu_threads``: host thread id → vCPU, from QMP ``query-cpus-fast``)."""
    busy = sorted(((after[name] - before[name]) / elapsed_s, name) for name in before.keys() & after.keys()
                  if elapsed_s > 0)
    vcpu_threads = vcpu_threads or {}

    def named(thread: str) -> str:
        tid = int(thread.rpartition(" ")[2])
        return f"vCPU{vcpu_threads[tid]} thread {tid}" if tid in vcpu_threads else thread

    shown = [f"{named(name)} {100 * share:.0f}%" for share, name in reversed(busy) if share >= 0.05]
    return [f"host CPU of qemu's threads while sampled: {', '.join(shown) or 'none used 5%'}"] if before else []


def sample_vcpus(qmp_path: Path, symbols: Symbols | None, samples: int = VCPU_SAMPLES,
                 interval_s: float = VCPU_SAMPLE_INTERVAL_S) -> list[str]:
    """Where a silent guest's vCPUs are, asked of qemu over QMP before the guest is killed: the
    guest is paused for each of ``samples`` samples (TCG updates a vCPU's RIP only when it leaves
    its translated code: a running vCPU's can be stale), each vCPU's RIP named by ``symbols``;
    then, once, the kernel functions on the stack of each vCPU found in the kernel; and the host
    CPU qemu's threads used meanwhile (from /proc, asked even when QMP does not answer: a qemu
    whose main loop is stuck). Lines for the ``guest stuck`` message; a failure says ``could not
    sample vCPUs: …`` and never raises."""
    before, started = _qemu_threads(qmp_path), time.monotonic()
    try:
        qmp = _Qmp(qmp_path)
    except (OSError, ValueError) as exc:
        time.sleep(interval_s)
        return [f"could not sample vCPUs: {type(exc).__name__}: {exc}",
                *_host_cpu(before, _qemu_threads(qmp_path), time.monotonic() - started)]
    lines: list[str] = []
    vcpu_threads: dict[int, int] = {}
    try:
        vcpu_threads.update({int(cpu["thread-id"]): int(cpu["cpu-index"]) for cpu in qmp.call("query-cpus-fast")})
        taken: list[list[VcpuState]] = []
        stacks: dict[int, list[str]] = {}
        for index in range(samples):
            if index:
                time.sleep(interval_s)
            qmp.call("stop")
            try:
                taken.append(parse_registers(qmp.hmp("info registers -a")))
                if index == samples - 1:
                    for state in taken[-1]:
                        if state.cpl == 0 and state.rip >= 2**63 and not state.halted:
                            stacks[state.cpu] = stack_words(qmp.hmp(f"x/96gx {state.rsp:#x}", cpu=state.cpu),
                                                            symbols)
            finally:
                qmp.call("cont")
        lines.append(summarize_vcpus(taken, symbols))
        for cpu, names in sorted(stacks.items()):
            if names:
                lines.append(f"vCPU{cpu}'s stack names (newest first): {' < '.join(names)}")
        if symbols is None:
            lines.append("no kernel symbols to name kernel addresses (no kallsyms dump, no real System.map)")
    except Exception as exc:  # noqa: BLE001 - a diagnosis never breaks the tier
        lines.append(f"could not sample vCPUs: {type(exc).__name__}: {exc}"
                     f"{' (qemu did not answer QMP: its main loop stuck?)' if isinstance(exc, TimeoutError) else ''}")
    finally:
        qmp.close()
    return lines + _host_cpu(before, _qemu_threads(qmp_path), time.monotonic() - started, vcpu_threads)


def tool_path() -> str:
    """PATH for the tools the tiers run: this venv's bin/ first (vng runs virtme-run, which pip
    put there, through PATH), then the caller's PATH and the system directories (sfdisk,
    mkfs.ext4 and qemu live in sbin, which a non-login PATH may lack)."""
    parts = [str(Path(sys.executable).parent), *os.environ.get("PATH", "").split(":"),
             "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    return ":".join(dict.fromkeys(p for p in parts if p))


def main(argv: list[str]) -> int:
    return boot(argv)


def boot(pytest_args: Sequence[str], *, tests: str = "tests/vm", memory: str = "1G", drives: Sequence[Drive] = (),
         copy_out_to: Path | None = None, timeout_s: float = 1800, label: str = "VM tier",
         guest_env: Mapping[str, str] | None = None) -> int:
    """Boot and run pytest on ``tests`` (a directory of this repository) in the guest; a guest
    stuck (:data:`SILENCE_S`) is booted again, :data:`BOOTS` boots in all.

    ``memory`` is qemu's ``-m`` (``"1G"``, ``"2G"``); ``drives`` are added after the default
    256 MiB disk (which stays ``/dev/vda``); the guest's out dir (``DRFGOV_VM_OUT``) is copied
    to ``copy_out_to`` when the VM has finished, whatever its verdict; ``guest_env`` adds
    environment variables for the guest's pytest. Returns the guest pytest's exit status, or
    :data:`BOOT_FAILED`.
    """
    os.environ["PATH"] = tool_path()
    vng = shutil.which("vng")
    if not vng:
        _boot_failure("virtme-ng (vng) is not installed: pip install virtme-ng")
        return BOOT_FAILED
    if not shutil.which("qemu-system-x86_64"):
        _boot_failure("qemu is not installed: apt-get install qemu-system-x86")
        return BOOT_FAILED
    kernel = newest_kernel()
    statuses: list[int] = []

    def boot_once(attempt: int) -> tuple[str, list[str], list[str]]:
        print(f"{label}: booting {kernel} under TCG (qemu, 2 CPUs, {memory.replace('G', ' GiB')})"
              f"{f', boot {attempt} of {BOOTS}' if attempt > 1 else ''}", flush=True)
        result, lines, status, vcpus = _boot_once(vng, kernel, pytest_args, tests, memory, drives, copy_out_to,
                                                  timeout_s, guest_env)
        statuses.append(status)
        return result, lines, vcpus

    if boot_while_stuck(label, boot_once)[0] == "silent":
        _boot_failure(f"the guest was stuck in each of {BOOTS} boots")
        return BOOT_FAILED
    return statuses[-1]


def boot_while_stuck(label: str, boot_once: Callable[[int], tuple[str, list[str]] | tuple[str, list[str], list[str]]],
                     silence_s: float = SILENCE_S) -> tuple[str, list[str]]:
    """``boot_once(attempt)`` (1, 2…) until a boot is not stuck (:func:`_relay` said
    ``"silent"``), :data:`BOOTS` boots at most; each stuck one is said with ``guest stuck:``,
    which the closing summary shows under the tier, passed or not: where the console stopped,
    where the vCPUs were (the lines :func:`sample_vcpus` gave: ``boot_once``'s optional third
    item) and the kernel's last words (:func:`kernel_said`); ``silence_s``, the silence
    ``boot_once`` gave its guest. Returns the last boot's result and console lines."""
    for attempt in range(1, BOOTS + 1):
        result, lines, *rest = boot_once(attempt)
        if result != "silent":
            break
        print(f"{label}: guest stuck: its console printed nothing for {silence_s / 60:g} minutes (pytest-timeout "
              f"and faulthandler neither; kernel lines do not count), killed; {where_it_stopped(lines)}"
              f"{'; booting again, every test runs again' if attempt < BOOTS else ''}", flush=True)
        said = [f"kernel: {line}" for line in kernel_said(lines)] or ["kernel: its console printed nothing"]
        for line in [*(rest[0] if rest else []), *said]:
            print(f"{label}: guest stuck: {line}", flush=True)
    return result, lines


def _boot_once(vng: str, kernel: str, pytest_args: Sequence[str], tests: str, memory: str, drives: Sequence[Drive],
               copy_out_to: Path | None, timeout_s: float, guest_env: Mapping[str, str] | None
               ) -> tuple[str, list[str], int, list[str]]:
    """One boot of :func:`boot`: what :func:`_relay` said, the console's lines, the guest
    pytest's exit status (:data:`BOOT_FAILED` when it gave none) and, for a silent guest, where
    its vCPUs were (:func:`sample_vcpus`).

    The kernel's console is shown (``--verbose``: virtme-ng's ``--show-boot-console``, else
    /dev/null with ``loglevel=0`` in script mode) at ``loglevel=``:data:`KERNEL_LOGLEVEL`
    (appended, so it wins over the ``loglevel=7`` --verbose adds), with ``nokaslr`` so kernel
    addresses are the same in every boot; the guest first dumps its text symbols
    (/proc/kallsyms, as root) into the out dir, and qemu answers QMP on a socket, for
    :func:`sample_vcpus`."""
    with tempfile.TemporaryDirectory(prefix="drfgov-vm-") as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        disk = make_disk(Path(tmp))
        qmp = Path(tmp) / "qmp.sock"
        qemu_opts: list[str] = ["-qmp", f"unix:{qmp},server=on,wait=off"]
        for index, drive in enumerate(drives):
            image = Path(tmp) / f"extra{index}.img"
            with open(image, "wb") as f:
                f.truncate(drive.size_bytes)
            qemu_opts += drive.qemu_args(image, index)
        guest = " ".join(
            [f"grep ' [tTwW] ' /proc/kallsyms > {out}/{KALLSYMS} 2>/dev/null;",
             f"cd {REPO} &&", "DRFGOV_VM=1", f"DRFGOV_VM_OUT={out}",
             *(f"{k}={_quote(v)}" for k, v in (guest_env or {}).items()), sys.executable, "-m", "pytest",
             "-p", "no:cacheprovider", tests, "-o", f"testpaths={tests}", *map(_quote, pytest_args),
             f"; echo $? > {out}/status"]
        )
        cmd = [vng, "--run", kernel, "--disable-kvm", "--force-9p", "--cpus", "2", "--memory", memory,
               "--disk", str(disk), "--rwdir", str(out), "--verbose", "--append",
               f"loglevel={KERNEL_LOGLEVEL} nokaslr", "--exec", guest,
               "--qemu-opts=" + " ".join(map(_quote, qemu_opts))]  # "=": the value starts with "-"
        lines: list[str] = []
        vcpus: list[str] = []

        def diagnose() -> None:
            vcpus.extend(sample_vcpus(qmp, kernel_symbols(kernel, [out / KALLSYMS])))

        result = _relay(cmd, timeout_s=timeout_s, keep=lines, silence_s=SILENCE_S, on_silent=diagnose)
        save_kernel_symbols(kernel, out / KALLSYMS)
        if copy_out_to is not None:
            _copy_out(out, copy_out_to)
        if result == "silent":
            return result, lines, BOOT_FAILED, vcpus
        if result == "timeout":
            _boot_failure(f"the VM did not finish within {timeout_s / 60:g} minutes; {where_it_stopped(lines)}")
            return result, lines, BOOT_FAILED, vcpus
        status = out / "status"
        if not status.exists():
            _boot_failure("the guest never reported a pytest status (kernel or virtme-ng failed to start it); "
                          + where_it_stopped(lines))
            return result, lines, BOOT_FAILED, vcpus
        return result, lines, int(status.read_text().strip() or BOOT_FAILED), vcpus


def _copy_out(out: Path, to: Path) -> None:
    """The guest's out dir (less its status file and symbol dump) into ``to``, replacing what a
    run left there."""
    to.mkdir(parents=True, exist_ok=True)
    for item in out.iterdir():
        if item.name in ("status", KALLSYMS):
            continue
        target = to / item.name
        if target.is_dir():
            shutil.rmtree(target)
        if item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy2(item, target)
    print(f"VM out dir copied to {to}", flush=True)


def _relay(cmd: list[str], timeout_s: float, keep: list[str] | None = None, silence_s: float | None = None,
           on_silent: Callable[[], object] | None = None) -> str:
    """Run the VM with its console on a pipe, copied to our stdout line by line; returns
    ``"finished"``, ``"timeout"`` (``timeout_s`` ran out) or ``"silent"`` (the console printed
    nothing but kernel lines (:func:`is_kernel_line`) for ``silence_s``: :data:`SILENCE_S`).
    ``on_silent`` is called on a silence before the VM is killed (:func:`sample_vcpus`); what
    it raises is said, not raised.

    qemu would otherwise reopen /dev/stdout and, when that is a file, truncate it. Lines of
    nothing but blanks (console clearing) are dropped; ``keep`` collects the others. On a
    timeout or a silence the whole process group is killed — vng, the virtme-run it starts and
    qemu. (Killing vng alone left qemu running a frozen guest, holding the pipe this reads,
    past the timeout: a run waited 35 minutes on a tier whose limit is 30.)
    """
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    started = last_output = time.monotonic()
    ended, why = threading.Event(), []

    def watch() -> None:
        while not ended.wait(0.2):
            now = time.monotonic()
            if now - started >= timeout_s:
                why.append("timeout")
            elif silence_s is not None and now - last_output >= silence_s:
                why.append("silent")
                if on_silent is not None:
                    try:
                        on_silent()
                    except Exception as exc:  # noqa: BLE001 - a diagnosis never breaks the tier
                        print(f"could not diagnose the silent guest: {type(exc).__name__}: {exc}", flush=True)
            else:
                continue
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        for raw in proc.stdout:
            line = raw.decode(errors="replace")
            if not is_kernel_line(line):
                last_output = time.monotonic()
            if line.strip():
                if keep is not None:
                    keep.append(line)
                sys.stdout.write(line)
                sys.stdout.flush()
        proc.wait()
    finally:
        ended.set()
        watcher.join()
    return why[0] if why else "finished"


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
