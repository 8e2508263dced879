"""Boot Debian's kernel under qemu (TCG) with virtme-ng and run the real-kernel tier inside.

    python -m tests.vm.boot [PYTEST ARGS...]

One boot runs every test in tests/vm: the guest sees this machine's files (copy-on-write),
has cgroup2 mounted at /sys/fs/cgroup with the cpu, memory and io controllers, 2 CPUs,
1 GiB of memory, and a 256 MiB virtual disk /dev/vda with two partitions (for io.max).
/dev/kvm hangs on these machines, so the VM always runs under TCG (--disable-kvm).

Other tiers reuse :func:`boot` with their own test directory, memory size, extra disks
(:class:`Drive`, optionally throttled by qemu) and a host directory that receives the guest's
out dir (``DRFGOV_VM_OUT``) when the VM is done; ``python -m tests.scenarios.boot`` does.

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
#: Boots a VM tier gets: a stuck guest (:data:`SILENCE_S`) is booted once more and every test
#: runs again, said on the console and in the closing summary (``guest stuck:``).
BOOTS = 2
DISK_SIZE_BYTES = 256 * 2**20


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

    def boot_once(attempt: int) -> tuple[str, list[str]]:
        print(f"{label}: booting {kernel} under TCG (qemu, 2 CPUs, {memory.replace('G', ' GiB')})"
              f"{f', boot {attempt} of {BOOTS}' if attempt > 1 else ''}", flush=True)
        result, lines, status = _boot_once(vng, kernel, pytest_args, tests, memory, drives, copy_out_to, timeout_s,
                                           guest_env)
        statuses.append(status)
        return result, lines

    if boot_while_stuck(label, boot_once)[0] == "silent":
        _boot_failure(f"the guest was stuck in each of {BOOTS} boots")
        return BOOT_FAILED
    return statuses[-1]


def boot_while_stuck(label: str, boot_once: Callable[[int], tuple[str, list[str]]]) -> tuple[str, list[str]]:
    """``boot_once(attempt)`` (1, 2…) until a boot is not stuck (:func:`_relay` said
    ``"silent"``), :data:`BOOTS` boots at most; each stuck one is said with ``guest stuck:``,
    which the closing summary shows under the tier, passed or not. Returns the last boot's
    result and console lines."""
    for attempt in range(1, BOOTS + 1):
        result, lines = boot_once(attempt)
        if result != "silent":
            break
        print(f"{label}: guest stuck: its console printed nothing for {SILENCE_S / 60:g} minutes (pytest-timeout "
              f"and faulthandler neither), killed; {where_it_stopped(lines)}"
              f"{'; booting again, every test runs again' if attempt < BOOTS else ''}", flush=True)
    return result, lines


def _boot_once(vng: str, kernel: str, pytest_args: Sequence[str], tests: str, memory: str, drives: Sequence[Drive],
               copy_out_to: Path | None, timeout_s: float, guest_env: Mapping[str, str] | None
               ) -> tuple[str, list[str], int]:
    """One boot of :func:`boot`: what :func:`_relay` said, the console's lines, and the guest
    pytest's exit status (:data:`BOOT_FAILED` when it gave none)."""
    with tempfile.TemporaryDirectory(prefix="drfgov-vm-") as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        disk = make_disk(Path(tmp))
        qemu_opts: list[str] = []
        for index, drive in enumerate(drives):
            image = Path(tmp) / f"extra{index}.img"
            with open(image, "wb") as f:
                f.truncate(drive.size_bytes)
            qemu_opts += drive.qemu_args(image, index)
        guest = " ".join(
            [f"cd {REPO} &&", "DRFGOV_VM=1", f"DRFGOV_VM_OUT={out}",
             *(f"{k}={_quote(v)}" for k, v in (guest_env or {}).items()), sys.executable, "-m", "pytest",
             "-p", "no:cacheprovider", tests, "-o", f"testpaths={tests}", *map(_quote, pytest_args),
             f"; echo $? > {out}/status"]
        )
        cmd = [vng, "--run", kernel, "--disable-kvm", "--force-9p", "--cpus", "2", "--memory", memory,
               "--disk", str(disk), "--rwdir", str(out), "--exec", guest]
        if qemu_opts:
            cmd.append("--qemu-opts=" + " ".join(map(_quote, qemu_opts)))  # "=": the value starts with "-"
        lines: list[str] = []
        result = _relay(cmd, timeout_s=timeout_s, keep=lines, silence_s=SILENCE_S)
        if copy_out_to is not None:
            _copy_out(out, copy_out_to)
        if result == "silent":
            return result, lines, BOOT_FAILED
        if result == "timeout":
            _boot_failure(f"the VM did not finish within {timeout_s / 60:g} minutes; {where_it_stopped(lines)}")
            return result, lines, BOOT_FAILED
        status = out / "status"
        if not status.exists():
            _boot_failure("the guest never reported a pytest status (kernel or virtme-ng failed to start it); "
                          + where_it_stopped(lines))
            return result, lines, BOOT_FAILED
        return result, lines, int(status.read_text().strip() or BOOT_FAILED)


def _copy_out(out: Path, to: Path) -> None:
    """The guest's out dir (less its status file) into ``to``, replacing what a run left there."""
    to.mkdir(parents=True, exist_ok=True)
    for item in out.iterdir():
        if item.name == "status":
            continue
        target = to / item.name
        if target.is_dir():
            shutil.rmtree(target)
        if item.is_dir():
            shutil.copytree(item, target)
        else:
            shutil.copy2(item, target)
    print(f"VM out dir copied to {to}", flush=True)


def _relay(cmd: list[str], timeout_s: float, keep: list[str] | None = None, silence_s: float | None = None) -> str:
    """Run the VM with its console on a pipe, copied to our stdout line by line; returns
    ``"finished"``, ``"timeout"`` (``timeout_s`` ran out) or ``"silent"`` (the console printed
    nothing for ``silence_s``: :data:`SILENCE_S`).

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
            last_output = time.monotonic()
            line = raw.decode(errors="replace")
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
