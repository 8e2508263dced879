"""Two network namespaces joined by a veth pair, and timed TCP flows between them.

drfgov-a (va, 10.77.0.1) ↔ drfgov-b (vb, 10.77.0.2). A flow belongs to a uid: it is her
sending socket (egress tests: the sender runs as her in drfgov-a) or her receiving socket
(ingress tests: the sink runs as her in drfgov-a). Rates are TCP payload in bits/s over a
window of :data:`SECONDS` that opens :data:`SKIP` after the *last* flow's first byte
(:class:`Flows`): a sender that starts late — under TCG on a busy host a Python start takes
seconds, and two of them rarely finish together — delays the window instead of being measured
half-idle. Used by tests/netns (host) and tests/vm (the VM's kernel).
"""

import json
import math
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

A, B = "drfgov-a", "drfgov-b"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
# The helper runs as other uids, who may not be able to read this checkout (a clone in a 0700
# directory): its source goes on the command line, and it starts in /.
TRAFFIC_SOURCE = (Path(__file__).with_name("traffic.py")).read_text()
SECONDS, SKIP = 4.0, 1.5
# HTB shapes frames; the sink counts TCP payload: 1448 bytes (MSS with timestamps) of every
# 1514-byte frame at MTU 1500 (14 Ethernet + 20 IP + 32 TCP header bytes).
PAYLOAD_PER_WIRE = 1448 / 1514


def payload(wire_bits_per_s: float) -> float:
    """The TCP payload rate a flow shaped to ``wire_bits_per_s`` delivers."""
    return wire_bits_per_s * PAYLOAD_PER_WIRE


def sh(*args: str, input: str | None = None) -> str:
    """``args`` run, their standard output (``input`` on their standard input); fails the test
    with their standard error when they fail."""
    out = subprocess.run(args, input=input, capture_output=True, text=True)
    if out.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def make_pair() -> tuple[str, str]:
    drop_pair()
    for ns in (A, B):
        sh("ip", "netns", "add", ns)
    sh("ip", "-n", A, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", B)
    sh("ip", "-n", A, "addr", "add", "10.77.0.1/24", "dev", "va")
    sh("ip", "-n", B, "addr", "add", "10.77.0.2/24", "dev", "vb")
    for ns, dev in ((A, "va"), (B, "vb")):
        sh("ip", "-n", ns, "link", "set", dev, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    return A, B


def drop_pair() -> None:
    for ns in (A, B):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def make_host_pair() -> None:
    """va (10.77.0.1) in *this* network namespace ↔ vb (10.77.0.2) in drfgov-b: the pair a
    daemon running here shapes (it shapes the interfaces of its own namespace)."""
    drop_host_pair()
    sh("ip", "netns", "add", B)
    sh("ip", "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", B)
    sh("ip", "addr", "add", "10.77.0.1/24", "dev", "va")
    sh("ip", "-n", B, "addr", "add", "10.77.0.2/24", "dev", "vb")
    sh("ip", "link", "set", "va", "up")
    sh("ip", "-n", B, "link", "set", "vb", "up")


def drop_host_pair() -> None:
    subprocess.run(["ip", "link", "del", "va"], capture_output=True)
    subprocess.run(["ip", "netns", "del", B], capture_output=True)


def conntrack_entries(netns: str) -> list[tuple[str, int, bool]]:
    """Every connection conntrack has in ``netns``: (protocol, its mark, whether it is TCP
    tracked liberally both ways), read through ctnetlink, IPv4 and IPv6."""
    import socket

    from pyroute2 import NFCTSocket

    from governor.shaping.conntrack import BE_LIBERAL

    out = []
    for family in (socket.AF_INET, socket.AF_INET6):
        with NFCTSocket(nfgen_family=family, netns=netns) as ct:
            for entry in ct.dump():
                proto = entry.get_attr("CTA_TUPLE_ORIG").get_attr("CTA_TUPLE_PROTO").get_attr("CTA_PROTO_NUM")
                info = entry.get_attr("CTA_PROTOINFO")
                tcp = info.get_attr("CTA_PROTOINFO_TCP") if info is not None else None
                liberal = tcp is not None and all(
                    tcp.get_attr(f"CTA_PROTOINFO_TCP_FLAGS_{side}")[0] & BE_LIBERAL for side in ("ORIGINAL", "REPLY"))
                out.append(({6: "tcp", 17: "udp"}.get(proto, str(proto)), entry.get_attr("CTA_MARK") or 0, liberal))
    return sorted(out)


def classify(tree, netns: str, link_bits_per_s: int, weights: dict[int, float],
             allocation: dict[int, float] | None = None, ingress: bool = False):
    """Give each uid her class in ``tree`` (planned as the daemon plans them) and her entry in
    the nftables maps; returns ``(NftClassifier, uid → minor)``."""
    from governor.shaping.classes import MinorAllocator, plan_classes
    from governor.shaping.nft import NftClassifier

    minors = MinorAllocator().assign(weights)
    tree.apply({minors[u]: r for u, r in plan_classes(link_bits_per_s, weights, allocation).items()}, {})
    nft = NftClassifier(netns, ingress=ingress)
    nft.install()
    nft.apply(minors, {})
    return nft, minors


def nft_uid_classes(netns: str) -> dict[int, int]:
    """The ``inet drfgov`` uid → class minor map as the kernel has it (the test's own reading,
    through ``nft -j``, independent of the classifier under test)."""
    listed = json.loads(sh("ip", "netns", "exec", netns, "nft", "-j", "list", "map", "inet", "drfgov", "uid_class"))
    for entry in listed.get("nftables", []):
        if "map" in entry:
            return {int(uid): int(cls.split(":")[1], 16) for uid, cls in entry["map"].get("elem", [])}
    return {}


def as_user(uid: int | None) -> list[str]:
    """The argv prefix that runs a command as ``uid`` alone (no groups); nothing for None (root)."""
    return [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]


def traffic_command(*args: str) -> list[str]:
    """The argv that runs :mod:`tests.netns.traffic` with ``args``, readable by any uid: the
    source is passed with ``-c``, so it needs no access to the checkout."""
    return [PYTHON, "-c", TRAFFIC_SOURCE, *args]


def spawn_traffic(ns: str, uid: int | None, *args: str, **popen) -> subprocess.Popen:
    """:func:`traffic_command` ``ARGS`` in network namespace ``ns``, as ``uid`` (None: root), from /."""
    return subprocess.Popen(["ip", "netns", "exec", ns, *as_user(uid), *traffic_command(*args)], cwd="/", **popen)


@dataclass(frozen=True)
class Window:
    """``[start_s, end_s)`` on the host's monotonic clock (``time.monotonic()``)."""

    start_s: float
    end_s: float


Recorded = dict[int, tuple[float, float, dict[int, int]]]  # port → (base s, slot s, {slot: bytes})


def window_rates(recorded: Recorded, ports: dict[int, int], window: Window) -> dict[int, float]:
    """uid → TCP payload bits/s over the recorder's slots that lie wholly inside ``window``
    (``ports``: uid → port); 0.0 for a window that holds no whole slot."""
    out = {}
    for uid, port in ports.items():
        base, slot_s, slots = recorded[port]
        first, end = math.ceil((window.start_s - base) / slot_s), math.floor((window.end_s - base) / slot_s)
        counted = 8 * sum(slots.get(k, 0) for k in range(first, end))
        out[uid] = counted / ((end - first) * slot_s) if end > first else 0.0
    return out


class Flows:
    """One TCP flow per uid (uid → port), from drfgov-b to drfgov-a or the other way, started
    when asked and measured over windows chosen while they run.

    ``user_side="sender"``: her sender runs as her in drfgov-a, one recorder (root) in
    drfgov-b counts every port. ``"receiver"``: her recorder runs as her in drfgov-a (her
    receiving socket), the senders run as root in drfgov-b. Recorders report each flow's first
    byte and the bytes of every 50 ms slot (``traffic.py record``); senders send until their
    recorder stops. Use as a context manager (everything is stopped and reaped on exit)::

        with Flows(PORTS, "receiver") as flows:
            window = flows.window(flows.start(*PORTS), seconds=8, skip=3)
            rates = flows.rates(window)   # uid → TCP payload bits/s
    """

    START_TIMEOUT_S = 180.0  # a Python start on a loaded TCG guest takes seconds; minutes are a failure

    def __init__(self, ports: dict[int, int], user_side: str = "sender",
                 spawn_sender: Callable[[int], subprocess.Popen] | None = None):
        """``spawn_sender(uid)``: start her sender another way (``user_side="sender"``: in her
        slice, to the recorder at 10.77.0.2); it must send until the recorder stops."""
        if user_side not in ("sender", "receiver") or (spawn_sender is not None and user_side != "sender"):
            raise ValueError(f"user_side {user_side!r}{' with spawn_sender' if spawn_sender else ''}")
        self.ports, self.user_side, self.spawn_sender = dict(ports), user_side, spawn_sender
        self.lines: queue.Queue = queue.Queue()
        self.started: dict[int, float] = {}  # port → first byte (monotonic)
        self.senders: dict[int, subprocess.Popen] = {}
        self.recorded: dict[int, tuple[float, float, dict[int, int]]] | None = None  # port → (base, slot, bytes)
        if user_side == "sender":
            self.recorders = {None: self._recorder(B, None, list(self.ports.values()))}
        else:
            self.recorders = {uid: self._recorder(A, uid, [port]) for uid, port in self.ports.items()}
        for _ in self.recorders:
            self._expect("ready", self.START_TIMEOUT_S)

    def _recorder(self, ns: str, uid: int | None, ports: list[int]) -> subprocess.Popen:
        proc = spawn_traffic(ns, uid, "record", *map(str, ports), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()
        return proc

    def _read(self, proc: subprocess.Popen) -> None:
        delivered = False
        for line in proc.stdout:
            line = line.strip()
            delivered = delivered or line.startswith("{")
            self.lines.put(line)
        if not delivered:  # ended before its result; after it, ending is what ``stop`` asked for
            # (marked then, with two recorders, the first one's end could come before the
            # second one's result and fail ``stop``: a tier-2 run did on 2026-11-26)
            self.lines.put(None)

    def _take(self, deadline_s: float) -> str | None:
        """The next recorder line before ``deadline_s`` (None: none came); ``start`` lines are noted."""
        try:
            line = self.lines.get(timeout=max(0.0, deadline_s - time.monotonic()))
        except queue.Empty:
            return None
        if line is None:
            raise AssertionError("traffic: a recorder ended unexpectedly")
        if line.startswith("start "):
            _, port, t = line.split()
            self.started[int(port)] = float(t)
        return line

    def _expect(self, what: str, timeout_s: float) -> str:
        """The next recorder line that starts with ``what``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            line = self._take(deadline)
            if line is not None and line.startswith(what):
                return line
        raise AssertionError(f"traffic: no {what!r} from a recorder within {timeout_s:.0f} s")

    def start(self, *uids: int) -> float:
        """Start the flows of ``uids``; returns when each has delivered its first byte: the time
        (monotonic) the last of them did."""
        for uid in uids:
            port = self.ports[uid]
            if self.spawn_sender is not None:
                self.senders[uid] = self.spawn_sender(uid)
            elif self.user_side == "sender":
                self.senders[uid] = spawn_traffic(A, uid, "send", "10.77.0.2", str(port))
            else:
                self.senders[uid] = spawn_traffic(B, None, "send", "10.77.0.1", str(port))
        return self.wait_started(*uids)

    def wait_started(self, *uids: int, senders: dict[int, subprocess.Popen] | None = None) -> float:
        """Wait for the flows of ``uids`` (started by :meth:`start`, or by the caller with
        ``senders``: uid → her sender) to deliver their first byte; the time (monotonic) the last did."""
        senders = self.senders if senders is None else senders
        deadline = time.monotonic() + self.START_TIMEOUT_S
        while not all(self.ports[u] in self.started for u in uids):
            gone = [u for u in uids
                    if self.ports[u] not in self.started and u in senders and senders[u].poll() is not None]
            assert not gone, f"traffic: the sender of uid {gone} exited before its first byte arrived"
            assert time.monotonic() < deadline, f"traffic: flows of {uids} did not start within {self.START_TIMEOUT_S:.0f} s"
            self._take(time.monotonic() + 1.0)
        return max(self.started[self.ports[u]] for u in uids)

    @staticmethod
    def wait_until(t_s: float) -> None:
        time.sleep(max(0.0, t_s - time.monotonic()))

    def window(self, after_s: float, seconds: float = SECONDS, skip: float = SKIP) -> Window:
        """The window ``[after_s + skip, after_s + skip + seconds)``, returned once it has passed."""
        window = Window(after_s + skip, after_s + skip + seconds)
        self.wait_until(window.end_s)
        return window

    def stop(self) -> None:
        """Stop the recorders (their senders then stop too) and collect what they counted."""
        if self.recorded is not None:
            return
        self.recorded = {}
        for proc in self.recorders.values():
            try:
                proc.stdin.write("stop\n")
                proc.stdin.close()
            except OSError:
                pass
        for _ in self.recorders:
            got = json.loads(self._expect("{", 60))
            for port, slots in got["ports"].items():
                self.recorded[int(port)] = (got["base"], got["bucket_s"], {int(k): n for k, n in slots.items()})
        self.close()

    def counted(self) -> Recorded:
        """What the recorders have counted so far (``traffic.py record``'s ``peek``), the flows
        running on: measure windows that have passed with :func:`window_rates`. Not after :meth:`stop`."""
        if self.recorded is not None:
            raise RuntimeError("traffic: the recorders have stopped")
        out: Recorded = {}
        for proc in self.recorders.values():
            proc.stdin.write("peek\n")
            proc.stdin.flush()
        for _ in self.recorders:
            got = json.loads(self._expect("counted ", 60).removeprefix("counted "))
            for port, slots in got["ports"].items():
                out[int(port)] = (got["base"], got["bucket_s"], {int(k): n for k, n in slots.items()})
        return out

    def rates(self, window: Window) -> dict[int, float]:
        """uid → TCP payload bits/s over the recorder's 50 ms slots that lie wholly inside ``window``."""
        self.stop()
        return window_rates(self.recorded, self.ports, window)

    def series(self, window: Window, step_s: float = 1.0) -> dict[int, list[float]]:
        """uid → her rate in Mbit/s over each ``step_s`` of ``window`` (for the log: a flow that
        stalls shows as a dip, not only as a lower average)."""
        steps = int((window.end_s - window.start_s) / step_s)
        parts = [Window(window.start_s + i * step_s, window.start_s + (i + 1) * step_s) for i in range(steps)]
        per = [self.rates(part) for part in parts]
        return {uid: [round(p[uid] / 1e6, 1) for p in per] for uid in self.ports}

    def close(self) -> None:
        for proc in [*self.senders.values(), *self.recorders.values()]:
            if proc.poll() is None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    def __enter__(self) -> "Flows":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop()
        finally:
            for proc in [*self.senders.values(), *self.recorders.values()]:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


def measure(ports: dict[int, int], user_side: str = "sender", seconds: float = SECONDS,
            skip: float = SKIP) -> dict[int, float]:
    """Run one flow per uid (uid → TCP port) from drfgov-a to drfgov-b (``user_side="sender"``)
    or from drfgov-b to drfgov-a (``"receiver"``); returns uid → payload bits/s over ``seconds``
    that begin ``skip`` after the last flow's first byte (TCP's slow start, see :class:`Flows`)."""
    with Flows(ports, user_side) as flows:
        return flows.rates(flows.window(flows.start(*ports), seconds, skip))
