"""What shaping is about, as values (pure): links, class rates, counters, the error.

The control loop and :mod:`governor.control.netplan` import these; the modules that talk to
the kernel (htb, ingress, nft, classbatch, shaper) produce and consume them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from governor.control.resources import Resource

__all__ = ["HANDLE_MAJOR", "ClassRate", "ClassStats", "InterfaceGone", "Link", "NetSample", "ShapingError",
           "link_resources"]

HANDLE_MAJOR = 0xD7F0  # the governor's qdisc handle d7f0: on every tree it owns


class ShapingError(Exception):
    """A tc or nftables operation failed; the message names the interface and the cause."""


class InterfaceGone(ShapingError):
    """The interface is not there (now): a VPN down, an adapter out — not a mistake in the policy."""


@dataclass(frozen=True)
class ClassRate:
    """One class's HTB rate (guaranteed) and ceil (borrowing limit), bits/s."""

    rate_bits_per_s: int
    ceil_bits_per_s: int


@dataclass(frozen=True)
class ClassStats:
    """A class's cumulative counters (TCA_STATS2 basic and queue): bytes and packets it sent,
    packets dropped, and how often it was over its rate/ceil (``overlimits``)."""

    bytes: int
    packets: int
    drops: int
    overlimits: int


@dataclass(frozen=True)
class Link:
    """One shaped direction of one interface: a DRF resource of ``capacity_bits_per_s``."""

    resource: Resource  # net:IF:tx or net:IF:rx
    capacity_bits_per_s: float

    @property
    def ifname(self) -> str:
        return self.resource.ifname

    @property
    def direction(self) -> str:
        return self.resource.direction


@dataclass(frozen=True)
class NetSample:
    """Cumulative counters per resource and uid: bytes through her class, and the times HTB held
    her class back (``overlimits``). ``time_s`` from the loop's clock."""

    time_s: float
    bytes: Mapping[Resource, Mapping[int, int]]
    overlimits: Mapping[Resource, Mapping[int, int]]


def link_resources(nics: Mapping[str, float], ingress: Mapping[str, bool]) -> dict[Resource, Link]:
    """resource → :class:`Link` for interfaces ``nics`` (name → bits/s), rx where ``ingress``.

    Raises:
        ValueError: a name that cannot be an interface.
    """
    out = {}
    for name, bits in nics.items():
        directions = ("tx", "rx") if ingress.get(name, False) else ("tx",)
        for direction in directions:
            resource = Resource.link(name, direction)
            out[resource] = Link(resource, bits)
    return out
