"""Where a stuck guest is (tests/vm/boot.py): its vCPUs' RIPs named from kernel symbols, a hint
at the call chain from the words on its stack, the kernel's last words; and the closing
summary (scripts/tier_summary.py) showing them under the tier, bounded."""

import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.vm.boot import (Symbols, VcpuState, kernel_said, kernel_symbols, parse_registers, sample_vcpus,
                           stack_words, summarize_vcpus, where_vcpu_is)

KALLSYMS = """\
ffffffff81000000 T _stext
ffffffff810a1000 T native_queued_spin_lock_slowpath
ffffffff810a1200 t do_idle
ffffffff810a1300 D a_variable
ffffffff810a1400 T schedule
ffffffff810a1400 T __schedule_alias
ffffffffc0001000 t virtblk_poll\t[virtio_blk]
"""

# qemu 7.2's `info registers -a`, cut: CPU#0 spinning in the kernel, CPU#1 in user space
REGISTERS = """
CPU#0
RAX=0000000000000000 RBX=ffff888003a1c000 RCX=0000000000000001 RDX=0000000000000000
RSI=0000000000000000 RDI=ffff888003a1c000 RBP=ffffc90000013e10 RSP=ffffc90000013df0
RIP=ffffffff810a101a RFL=00000202 [-------] CPL=0 II=0 A20=1 SMM=0 HLT=0
ES =0000 0000000000000000 00000000 00000000
CPU#1
RAX=0000000000000026 RBX=00007f184d867020 RCX=0000000000000000 RDX=0000000000000002
RSI=000000004d438d26 RDI=000000000000008c RBP=00007f184d867020 RSP=00007ffd304b4ef0
RIP=000000000052b89a RFL=00000246 [---Z-P-] CPL=3 II=0 A20=1 SMM=0 HLT=0
"""


def test_text_symbols_name_addresses_and_nothing_else_does():
    symbols = Symbols.parse(KALLSYMS)
    assert symbols.name(0xffffffff810a101a) == "native_queued_spin_lock_slowpath+0x1a"
    assert symbols.name(0xffffffff810a1200) == "do_idle+0x0"
    assert symbols.name(0xffffffff810a1310) == "do_idle+0x110"  # data symbols are not functions
    assert symbols.name(0xffffffff810a1401) == "schedule+0x1"  # the first name of an address
    assert symbols.name(0xffffffffc0001008) == "virtblk_poll+0x8 [virtio_blk]"
    assert symbols.name(0xffffffff80000000) is None  # below every symbol
    assert symbols.name(0xffffffffc0001000 + 0x10000) is None  # past any function's length


def test_debians_stub_system_map_is_no_symbol_table(tmp_path):
    stub = tmp_path / "System.map"
    stub.write_text("ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n")
    assert Symbols.parse(stub.read_text()).addresses == ()
    real = tmp_path / "kallsyms"
    real.write_text("".join(f"{0xffffffff81000000 + 16 * i:016x} T f{i}\n" for i in range(2000)))
    found = kernel_symbols(str(tmp_path / "vmlinuz-0.0-no-such-version"), [stub, tmp_path / "missing", real])
    assert found is not None and found.name(0xffffffff81000021) == "f2+0x1"
    assert kernel_symbols(str(tmp_path / "vmlinuz-0.0-no-such-version"), [stub]) is None


def test_registers_of_every_vcpu_are_read_from_qemus_answer():
    assert parse_registers(REGISTERS) == [VcpuState(0, 0xffffffff810a101a, 0xffffc90000013df0, 0, False),
                                          VcpuState(1, 0x52b89a, 0x7ffd304b4ef0, 3, False)]
    assert parse_registers("Error: something went wrong\n") == []


def test_where_each_vcpu_was_most_often_first():
    symbols = Symbols.parse(KALLSYMS)
    spin, user = parse_registers(REGISTERS)
    halted = VcpuState(1, 0xffffffff810a1230, 0, 0, True)
    inside = VcpuState(0, 0xffffffff810a1002, 0, 0, False)
    assert where_vcpu_is(user, symbols) == "user space" and where_vcpu_is(halted, symbols) == "idle (hlt)"
    assert where_vcpu_is(spin, None) == "kernel 0xffffffff810a101a"
    samples = [[spin, user], [spin, user], [inside, halted], [spin, user], [spin, user]]
    assert summarize_vcpus(samples, symbols) == (
        "vCPU0 in native_queued_spin_lock_slowpath+0x1a,+0x2 (5/5 samples), "
        "vCPU1 in user space (4/5 samples), idle (hlt) (1/5 samples)")
    module = VcpuState(0, 0xffffffffc0001010, 0, 0, False)
    assert summarize_vcpus([[module]], symbols) == "vCPU0 in virtblk_poll+0x10 [virtio_blk] (1/1 samples)"
    assert summarize_vcpus([], symbols) == "no vCPU in qemu's answer"


def test_the_words_on_a_stack_that_are_kernel_functions_newest_first_each_once():
    dump = ("ffffc90000013df0: 0x0000000000000001 0xffffffff810a1410\n"
            "ffffc90000013e00: 0xffffffff810a1300 0xffff888003a1c000\n"  # an offset in a function, a heap pointer
            "ffffc90000013e10: 0xffffffff810a1410 0xffffffff810a1200\n")  # seen again; a function's start
    assert stack_words(dump, Symbols.parse(KALLSYMS)) == ["schedule+0x10", "do_idle+0x100"]
    assert stack_words(dump, None) == []


def test_the_kernels_last_words_prefer_its_alarms_and_skip_the_boot():
    boot = [f"[    0.000000] BIOS-e820: [mem {i:#x}] usable\n" for i in range(10)]
    assert kernel_said(boot) == []
    errors = boot + [f"[  {100 + i}.000000] ata1: error {i}\n" for i in range(10)]
    assert kernel_said(errors, shown=3) == [f"[  {100 + i}.000000] ata1: error {i}" for i in (7, 8, 9)]
    stall = errors + ["tests/vm/test_a.py::test_b [  700.123456] rcu: INFO: rcu_preempt detected stalls\n",
                      "[  700.200000] " + "x" * 500 + "\n"]
    assert kernel_said(stall) == ["[  700.123456] rcu: INFO: rcu_preempt detected stalls"]
    long_alarm = kernel_said(["[  701.000000] watchdog: BUG: soft lockup - CPU#1 stuck for 26s! " + "y" * 500])
    assert len(long_alarm[0]) == 200


class FakeQemu:
    """A QMP server on a unix socket answering as qemu 7.2 does, with an event in the way."""

    def __init__(self, path: Path) -> None:
        self.asked: list[str] = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(1)
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self) -> None:
        conn, _ = self.server.accept()
        stream = conn.makefile("rw")
        stream.write(json.dumps({"QMP": {"version": {}, "capabilities": []}}) + "\n")
        stream.flush()
        for line in stream:
            command = json.loads(line)
            name, arguments = command["execute"], command.get("arguments", {})
            self.asked.append(name if name != "human-monitor-command" else
                              f"{arguments['command-line']}@{arguments.get('cpu-index')}")
            if name == "query-cpus-fast":
                answer = [{"cpu-index": 0, "thread-id": 1}, {"cpu-index": 1, "thread-id": 2}]
            elif name == "human-monitor-command" and arguments["command-line"] == "info registers -a":
                answer = REGISTERS
            elif name == "human-monitor-command":
                answer = "ffffc90000013df0: 0x0000000000000001 0xffffffff810a1410\n"
            else:
                answer = {}
            if name == "stop":
                stream.write(json.dumps({"event": "STOP", "data": {}}) + "\n")
            stream.write(json.dumps({"return": answer}) + "\n")
            stream.flush()


def test_a_silent_guests_vcpus_are_sampled_over_qmp_paused_each_time():
    folder = Path(tempfile.mkdtemp(prefix="qmp"))
    qemu = FakeQemu(folder / "qmp.sock")
    said = sample_vcpus(folder / "qmp.sock", Symbols.parse(KALLSYMS), samples=3, interval_s=0.01)
    assert said[0] == "vCPU0 in native_queued_spin_lock_slowpath+0x1a (3/3 samples), vCPU1 in user space (3/3 samples)"
    assert said[1] == "vCPU0's stack names (newest first): schedule+0x10"
    assert len(said) == 2  # no qemu process: no host CPU line
    assert qemu.asked == ["qmp_capabilities", "query-cpus-fast",
                          *["stop", "info registers -a@None", "cont"] * 2,
                          "stop", "info registers -a@None", "x/96gx 0xffffc90000013df0@0", "cont"]


def test_the_host_cpu_of_qemus_threads_is_measured_while_sampling_even_without_qmp():
    """qemu found by its argv[0] and the socket on its command line (vng and virtme-run name the
    socket too): here a busy python posing as qemu, QMP not answering."""
    folder = Path(tempfile.mkdtemp(prefix="qmp"))
    posing = subprocess.Popen(["qemu-system-fake", "-c", "while 1: pass", "-qmp", f"unix:{folder}/qmp.sock"],
                              executable=sys.executable)
    bystander = subprocess.Popen(["vng", "-c", "import time; time.sleep(30)", f"{folder}/qmp.sock"],
                                 executable=sys.executable)
    try:
        time.sleep(0.5)
        said = sample_vcpus(folder / "qmp.sock", None, interval_s=1.0)
    finally:
        posing.kill()
        bystander.kill()
    assert said[0].startswith("could not sample vCPUs: FileNotFoundError")
    busy = re.fullmatch(r"host CPU of qemu's threads while sampled: \S+ (\d+) (\d+)%", said[1])
    assert busy and int(busy.group(1)) == posing.pid and int(busy.group(2)) >= 10, said


def test_vcpus_that_cannot_be_sampled_are_said_so_never_raised():
    assert sample_vcpus(Path("/nonexistent/qmp.sock"), None)[0].startswith("could not sample vCPUs: ")
    folder = Path(tempfile.mkdtemp(prefix="qmp"))
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / "qmp.sock"))
    server.listen(1)

    def garbage() -> None:
        conn, _ = server.accept()
        conn.sendall(b"not json\n")

    threading.Thread(target=garbage, daemon=True).start()
    assert sample_vcpus(folder / "qmp.sock", None)[0].startswith("could not sample vCPUs: ")


def test_the_closing_summary_shows_a_stuck_guests_diagnosis_bounded(tmp_path, capsys):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from tier_summary import STUCK_SHOWN, WIDTH, main, why

    stuck = ("VM tier: guest stuck: its console printed nothing for 13 minutes, killed\n"
             "VM tier: guest stuck: vCPU0 in native_queued_spin_lock_slowpath+0x1a (5/5 samples)\n"
             "VM tier: guest stuck: kernel: [  700.123456] rcu: INFO: rcu_preempt detected stalls " + "z" * 400 + "\n")
    log = tmp_path / "tier2.log"
    log.write_text(stuck + "==== 9 passed in 600.00s ====\n")
    assert main([f"tier 2=0:{log}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line[:50] for line in out[1:4]] == [f"    {line[:46]}" for line in stuck.splitlines()]
    assert len(out[3]) == 4 + WIDTH
    failed = stuck * 20 + "".join(f"FAILED tests/vm/test_a.py::test_{i}\n" for i in range(3))
    shown = why(failed)
    assert len(shown) == STUCK_SHOWN + 3
    assert shown[STUCK_SHOWN - 1] == f"... and {60 - STUCK_SHOWN + 1} more guest stuck lines"
    assert shown[-3:] == [f"FAILED tests/vm/test_a.py::test_{i}" for i in range(3)]


def test_qemus_vcpu_threads_are_named_by_the_vcpu_they_run():
    from tests.vm.boot import _host_cpu

    before = {"qemu-system-x86 10": 1.0, "qemu-system-x86 11": 5.0, "qemu-system-x86 12": 7.0}
    after = {"qemu-system-x86 10": 1.01, "qemu-system-x86 11": 6.9, "qemu-system-x86 12": 8.8}
    assert _host_cpu(before, after, 2.0, {11: 0, 12: 1}) == [
        "host CPU of qemu's threads while sampled: vCPU0 thread 11 95%, vCPU1 thread 12 90%"]
    assert _host_cpu({}, after, 2.0) == []
