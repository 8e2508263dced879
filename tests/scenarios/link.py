"""The scenario tier's network link, and each user's rate on it in the governor's units.

The link is tier 2's (tests/vm/test_kernel_daemon_net.py): a veth pair, ``va`` (10.77.0.1) in
the guest's namespace, where the daemon shapes it, ↔ ``vb`` (10.77.0.2) in netns drfgov-b
(:func:`tests.netns.flows.make_host_pair`). Its capacity is the policy's
(:data:`CAPACITY_BITS_PER_S`): the veth itself runs at whatever the CPU allows, and the daemon's
HTB link class is what holds the link to its capacity — alone too (an ungoverned user's traffic
goes through the default class, which may borrow the whole link), so a sender's demand alone
is the link, as a reader's is the throttled disk.

Only the scenarios that send enforce ``net`` (:data:`NET_POLICY`, merged over the base policy
and given to the daemon by SIGHUP): the others run as before, with no shaping at all.

A user's flow goes to the port that is her uid (:func:`port`); one recorder
(:class:`tests.netns.flows.Flows`, ``traffic.py record``, root, in drfgov-b) counts every port.
Her rate is what arrived on her port — independent of the daemon's classification — as TCP
payload, converted to what HTB counts (frames: :data:`tests.netns.flows.PAYLOAD_PER_WIRE`), in
bits/s: the governor's ``net:va:tx`` (its class byte counters × 8). Windows and the daemon's
tick intervals are measured after they have passed, from the recorder's 50 ms slots
(:meth:`LinkMeter.counted`), on the monotonic clock every process shares.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from tests.netns.flows import PAYLOAD_PER_WIRE, Flows, Recorded, Window, make_host_pair, traffic_command, window_rates
from tests.scenarios.basepolicy import ENFORCE

__all__ = ["CAPACITY_BITS_PER_S", "IFNAME", "NET_POLICY", "RESOURCE", "LinkCounts", "LinkMeter", "make_link", "port",
           "sender_argv"]

IFNAME = "va"
FAR_ADDRESS = "10.77.0.2"  # vb, in drfgov-b: where the senders send
CAPACITY_BITS_PER_S = 20_000_000  # tier 2's link: 20 Mbit/s
RESOURCE = f"net:{IFNAME}:tx"  # what the senders use; ingress is off (their ACKs, ~2% of the link, are not a resource)
NET_POLICY = {"enforce": [*ENFORCE, "net"],
              "capacity": {"nics": {IFNAME: {"bits_per_s": CAPACITY_BITS_PER_S, "ingress": False}}}}

make_link = make_host_pair


def port(uid: int) -> int:
    """Her flow's TCP port: her uid (the scenarios' uids are below 65536)."""
    if not 1024 <= uid <= 65535:
        raise ValueError(f"uid {uid}: her flow's port is her uid, which must be a TCP port above 1023")
    return uid


def sender_argv(uid: int) -> list[str]:
    """One TCP flow from her to her port on the far end, as fast as TCP allows, until the
    recorder closes it (``traffic.py send``)."""
    return traffic_command("send", FAR_ADDRESS, str(port(uid)))


@dataclass(frozen=True)
class LinkCounts:
    """What the recorder had counted when asked; ``uids``: key (a user's name, ``alone``) → uid."""

    recorded: Recorded
    uids: Mapping[str, int]

    def use(self, key: str, start_s: float, end_s: float) -> dict[str, float]:
        """``{RESOURCE: bits/s}`` of ``key``'s flow over ``[start_s, end_s)`` (monotonic s), in HTB's
        count (frames); ``{}`` for a key without a flow."""
        uid = self.uids.get(key)
        if uid is None:
            return {}
        payload = window_rates(self.recorded, {uid: port(uid)}, Window(start_s, end_s))[uid]
        return {RESOURCE: payload / PAYLOAD_PER_WIRE}


class LinkMeter:
    """The recorder of the flows of ``uids`` (key → uid), running from construction to
    :meth:`close`; use as a context manager. Their senders are the workloads', started by the
    runner in their cgroups (:func:`sender_argv`)."""

    def __init__(self, uids: Mapping[str, int]):
        self.uids = dict(uids)
        self.flows = Flows({uid: port(uid) for uid in self.uids.values()})

    def wait_started(self, senders: Mapping[str, subprocess.Popen]) -> float:
        """Wait until the flows of ``senders`` (key → her sender) have delivered their first byte
        (Python's start under TCG takes seconds); the time (monotonic s) the last of them did.

        Raises:
            AssertionError: a sender exited first, or one did not within :attr:`Flows.START_TIMEOUT_S`.
        """
        return self.flows.wait_started(*(self.uids[k] for k in senders),
                                       senders={self.uids[k]: p for k, p in senders.items()})

    def counted(self) -> LinkCounts:
        """Everything counted so far: windows that have passed can be measured from it."""
        return LinkCounts(self.flows.counted(), self.uids)

    def close(self) -> None:
        self.flows.stop()

    def __enter__(self) -> LinkMeter:
        return self

    def __exit__(self, *exc) -> None:
        self.flows.__exit__(*exc)
