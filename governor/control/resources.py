"""The resources DRF shares on a host, as one typed id (pure).

A resource id names one capacity of the host and the unit its amounts are in:

=====================  ===============================  ======================================
id (``str(r)``)         what                             amounts in
=====================  ===============================  ======================================
``cpu``                 the CPUs users may use           cores
``memory``              the memory users may use         bytes
``disk:MAJ:MIN``        one whole disk (io.max's key)    fraction of the disk's time (read/R + write/W)
``net:IF:tx``           what leaves interface IF         bits/s
``net:IF:rx``           what arrives on IF (via an IFB)  bits/s
=====================  ===============================  ======================================

The string form is what state.json, ``drfgov shares`` and the logs show; it is parsed back
(:meth:`Resource.parse`) only where a document is read, never inside the loop. Each resource
takes its weight from one of the policy's weight kinds (:attr:`Resource.weight_kind`):
``cpu``, ``memory``, ``io`` (every disk) or ``net`` (every link).
"""

from __future__ import annotations

import re

from governor.control.interned import Interned

__all__ = ["CPU", "KINDS", "MEMORY", "Resource", "WEIGHT_KINDS", "resource_set"]

KINDS = ("cpu", "memory", "disk", "net")
WEIGHT_KINDS = ("cpu", "memory", "io", "net")  # the policy file's per-resource weight keys
_WEIGHT_KIND = {"cpu": "cpu", "memory": "memory", "disk": "io", "net": "net"}
_DEVICE = re.compile(r"^\d+:\d+$")
_IFNAME = re.compile(r"^[^\s:/]{1,15}$")  # IFNAMSIZ − 1; no colon (our separator), slash or blank


class Resource:
    """One resource id, compared and hashed by identity: one instance per name (interned), so
    the loop's many dict lookups keyed by resources cost what a plain object's do.

    Use :data:`CPU`, :data:`MEMORY`, :meth:`disk` and :meth:`link`; :meth:`parse` for text.

    Raises:
        ValueError: a malformed device (``MAJ:MIN``), interface name or direction.
    """

    __slots__ = ("kind", "device", "ifname", "direction", "name")
    _interned: dict[str, Resource] = {}

    def __new__(cls, kind: str, device: str | None = None, ifname: str | None = None,
                direction: str | None = None) -> Resource:
        if kind == "disk":
            if device is None or not _DEVICE.match(device):
                raise ValueError(f"disk resource: expected a device MAJ:MIN, got {device!r}")
            name = f"disk:{device}"
        elif kind == "net":
            if ifname is None or not _IFNAME.match(ifname):
                raise ValueError(f"net resource: expected an interface name, got {ifname!r}")
            if direction not in ("tx", "rx"):
                raise ValueError(f"net resource: expected direction tx or rx, got {direction!r}")
            name = f"net:{ifname}:{direction}"
        elif kind in ("cpu", "memory"):
            name = kind
        else:
            raise ValueError(f"unknown resource kind {kind!r}; expected one of: {', '.join(KINDS)}")
        found = cls._interned.get(name)
        if found is None:
            made = object.__new__(cls)
            made.kind, made.device, made.ifname, made.direction = kind, device, ifname, direction
            made.name = name
            found = cls._interned.setdefault(name, made)  # atomic: two threads get one instance
        return found

    def __reduce__(self):
        return Resource.parse, (self.name,)  # a copy or an unpickled one is the interned instance

    @classmethod
    def disk(cls, device: str) -> Resource:
        """The whole disk ``MAJ:MIN``."""
        return cls("disk", device=device)

    @classmethod
    def link(cls, ifname: str, direction: str) -> Resource:
        """One direction (``tx`` or ``rx``) of interface ``ifname``."""
        return cls("net", ifname=ifname, direction=direction)

    @classmethod
    def parse(cls, text: str) -> Resource:
        """The resource named ``text`` (``cpu``, ``memory``, ``disk:8:0``, ``net:eth0:tx``).

        Raises:
            ValueError: not a resource id.
        """
        kind, _, rest = str(text).partition(":")
        if kind == "disk":
            return cls.disk(rest)
        if kind == "net":
            ifname, _, direction = rest.rpartition(":")
            return cls.link(ifname, direction)
        if rest:
            raise ValueError(f"not a resource id: {text!r}")
        return cls(kind)

    @property
    def weight_kind(self) -> str:
        """The policy weight that applies: ``cpu``, ``memory``, ``io`` (a disk) or ``net`` (a link)."""
        return _WEIGHT_KIND[self.kind]

    def __lt__(self, other: Resource) -> bool:
        return self.name < other.name

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Resource({self.name!r})"


CPU = Resource("cpu")
MEMORY = Resource("memory")


_SETS: Interned[frozenset[Resource]] = Interned()


def resource_set(resources) -> frozenset[Resource]:
    """``frozenset(resources)``, one instance per content (:class:`Interned`): the loop keeps a
    few such sets per user per tick (held, starting), mostly the same few, where each new one is
    a 216 B object (10,000 users: 4 MiB of copies; issue 16)."""
    made = frozenset(resources)
    return _SETS(made, made)
