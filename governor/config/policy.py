"""The governor's policy file: YAML → validated, frozen dataclasses.

``configs/drfgov.yaml`` documents every key; :data:`DEFAULT_POLICY` is what applies with no
file. Validation is strict: an unknown key, a wrong type, a zero or negative weight is an
:class:`~governor.config.source.InputError` naming file, line and field. Users and groups that do
not exist on this host are *warnings* (they may be created later), returned with the policy.

Byte amounts accept whole numbers or IEC strings (``"512MiB"``, ``"2GiB"``; ``K``/``M``/``G``/
``T`` are read as KiB/MiB/GiB/TiB, as systemd.resource-control(5) reads ``MemoryMax=2G``).
Decimal-looking units (``KB``, ``MB``, ``GB``, ``TB``) are refused: whether ``1GB`` is 10^9 or
2^30 bytes depends on who wrote it, and the error says to write ``GiB``. A disk's bandwidth
(bytes/s) is a number or such a string (``read_bytes_per_s: 500MiB``); a NIC's (bits/s) is a number.

**Bounds.** Every number has an upper bound that the kernel, systemd and the daemon can take,
so that a file ``check-config`` accepts cannot fail at run time (see :data:`BOUNDS`):

==========================  =====================  ==============================================
field                       range                  why
==========================  =====================  ==============================================
``interval_s``              0.1 … 86,400 s         a tick a day is no longer governing; keeps every
                                                   deadline and wait far inside float and
                                                   ``time.sleep`` range
``hysteresis``              0 … < 1                at 1 or above a limit could never come down
weights                     10^-6 … 10^6           :data:`~governor.config.source.WEIGHT_MIN`
``governed.min_uid``        0 … 2^32 − 2           uid_t is 32 bits; 2^32 − 1 is "no uid"
                                                   (:data:`monitors.model.LAST_UID`)
``governed.max_uid``        min_uid … 2^32 − 2     ditto; below min_uid nobody would be governed
``reserve.cpu_cores``       0 … 2^20               ≥ Linux's largest NR_CPUS (8,192) by far;
                                                   on this host: fewer than its CPUs
``reserve.memory_bytes``    0 … 2^63 − 1           :data:`~governor.config.source.BYTES_MAX`;
                                                   on this host: less than its memory
``memory.*_bytes``          0 … 2^62               added to a user's use, which is below 2^52
                                                   (x86-64's physical limit): the sum stays below
                                                   2^63, the kernel's int64 page counters
disk bandwidth              > 0 … 2^63 − 1 B/s     ``io.max`` is u64; systemd's uint64
NIC ``bits_per_s``          > 0 … 10^15 b/s        1 Pbit/s, 1,000× the fastest NIC; HTB's 64-bit
                                                   rates (bytes/s) and bursts stay in range
``history.retention_days``  > 0 … 36,500           a century; days × 86,400 s stays exact
``history.every_s``         0 … 86,400 s           a row a day at least
paths                       ≤ 4,095 bytes, no NUL  PATH_MAX; the kernel ends paths at NUL
``metrics.listen`` port     1 … 65,535             a TCP port; the host is an IP address
                                                   (:mod:`governor.config.metrics`)
==========================  =====================  ==============================================

**Who is governed.** Uids ``governed.min_uid`` … ``governed.max_uid``, by default 1000 and
up (systemd's UIDS-GIDS.md and Debian's login.defs UID_MIN; no upper bound, for LDAP and AD
users: :data:`monitors.model.DEFAULT_MAX_UID`), never nobody (65534:
:data:`monitors.model.OVERFLOW_UID`). ``max_uid: 60000`` (login.defs UID_MAX) also leaves out
systemd's DynamicUser= services (61184–65519) and container ranges where every user is local.
A ``max_uid`` below ``min_uid`` is an error, and so is ``min_uid`` = ``max_uid`` = 65534: no
uid would be governed either way. A weight that can never apply is a warning: for a user whose
uid is never governed (``root``, ``daemon``, ``nobody``, below ``min_uid`` or above ``max_uid``),
who is exempt (``exempt_users``, or a member of an ``exempt_groups`` group), or for a group
that is exempt; so is a name listed twice in an exempt list.

**Names.** User and group names are checked as :func:`governor.config.names.name_problem` says
(1–255 bytes, no control or unprintable character, no ``:`` or ``/``, …): an error naming the
field. A number where a name goes (``exempt_users: [1000]``) is an error naming whose uid it is
here, and so is text of digits that names no one on this host but is a uid (gid) of it: either
would be compared with login names, never match, and do nothing. A user literally named
``1000`` stays valid. Every lookup in the user and group databases goes through
:data:`~governor.config.names.USERS` and :data:`~governor.config.names.GROUPS`.

**Files.** No two of ``state_path``, ``history.path`` and ``metrics.textfile`` may be one file,
nor any of them the policy file itself: compared after a lexical normalisation
(:func:`check_distinct_files`), and again with symlinks resolved by :func:`load_policy`.

**On this host.** :func:`load_policy` with ``host`` (``drfgov check-config`` passes this host's
CPUs, memory, disks and network interfaces: :meth:`HostFacts.this_host`) also refuses a reserve
that would leave users no CPU or no memory — what ``drfgov run`` would refuse at start — and
warns of a disk or NIC in ``capacity`` that the host does not have, in the words ``drfgov run``
logs (:func:`absent_devices`).

**Who may write it.** :func:`load_policy` refuses a file that anyone but root (or the invoking
user, when not root) could change, as sshd's StrictModes does
(:func:`~governor.config.source.check_trusted_file`); ``trusted_uids=None`` skips that check,
for tests that say so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from cgroups.limits import PAGE_SIZE
from governor.control.model import LoopSettings
from governor.control.resources import WEIGHT_KINDS
from governor.enforce.model import BACKENDS
from governor.config import names as userdb
from governor.config.metrics import MetricsExport, parse_metrics
from governor.config.names import Database, Entry, name_problem
from governor.config.numbers import _EXPONENT, INTERVAL_MAX_S, check_interval
from governor.config.source import (
    BYTES_MAX, InputError, Located, check_keys, check_trusted_file, describe, loads, mapping, number,
    read_text, weight,
)
from monitors.model import DEFAULT_MAX_UID, DEFAULT_MIN_UID, LAST_UID, OVERFLOW_UID, uid_never_governed

__all__ = [
    "BOUNDS", "DEFAULT_POLICY", "DiskOverride", "Governed", "HostFacts", "InputError", "MemorySafety", "Policy",
    "Reserve", "TRUSTED", "Weight", "absent_devices", "check_interval", "load_policy", "parse_bytes", "parse_policy",
    "policy_from_text", "weight_of",
]

RESOURCE_KINDS = WEIGHT_KINDS  # what `enforce` and per-resource weights name: cpu, memory, io (disks), net (links)
MODES = ("enforce", "dry-run")
Weight = float | Mapping[str, float]  # scalar, or per resource kind (cpu, memory, io, net)

#: Upper bounds of the policy's numbers (the table in the module's docstring says why).
BOUNDS = {
    "interval_s": INTERVAL_MAX_S,
    "hysteresis": 1.0,  # exclusive
    "uid": LAST_UID,  # min_uid and max_uid
    "cpu_cores": 2**20,
    "bytes": BYTES_MAX,
    "margin_bytes": 2**62,  # added to a user's use: use + margin stays below 2^63
    "disk_bytes_per_s": BYTES_MAX,
    "nic_bits_per_s": 1e15,
    "retention_days": 36_500,
    "every_s": 86_400,
    "path_bytes": 4095,
}
#: Names of users or groups looked up one by one in the user database per list (each lookup
#: can cost a round trip to LDAP or systemd-userdb); beyond that, one summary warning.
LOOKUPS = 1000

_IEC = {"": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30, "t": 2**40, "tib": 2**40}
_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt](?:ib)?)?\s*$", re.IGNORECASE)
_DECIMAL_UNIT = re.compile(r"^\s*\d+(?:\.\d+)?\s*(([kmgt])b)\s*$", re.IGNORECASE)  # 1GB: 10^9 or 2^30?


@dataclass(frozen=True)
class Governed:
    """Who is governed: uids ``min_uid`` … ``max_uid``, except the exempt users and members of
    exempt groups (:func:`monitors.users.governed`)."""

    min_uid: int = DEFAULT_MIN_UID
    max_uid: int = DEFAULT_MAX_UID
    exempt_users: tuple[str, ...] = ()
    exempt_groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reserve:
    """Capacity kept back for the system (not shared among users)."""

    cpu_cores: float = 0.0
    memory_bytes: int = 0


@dataclass(frozen=True)
class DiskOverride:
    """A disk's bandwidth (bytes/s) when sysfs cannot tell it (see ``drfgov calibrate io``)."""

    read_bytes_per_s: float
    write_bytes_per_s: float


@dataclass(frozen=True)
class MemorySafety:
    """Memory limits never cause an OOM kill: memory.max stays ``margin_bytes`` above use,
    and memory.high moves down at most ``high_step_bytes`` per tick."""

    margin_bytes: int = 256 * 2**20
    high_step_bytes: int = 256 * 2**20


@dataclass(frozen=True)
class Policy:
    """Everything the daemon needs from the admin. See configs/drfgov.yaml."""

    interval_s: float = 1.0
    mode: str = "enforce"
    backend: str = "auto"
    enforce: tuple[str, ...] = ("cpu", "memory", "io")
    default_weight: Weight = 1.0
    user_weights: Mapping[str, Weight] = field(default_factory=dict)
    group_weights: Mapping[str, Weight] = field(default_factory=dict)
    governed: Governed = Governed()
    reserve: Reserve = Reserve()
    disks: Mapping[str, DiskOverride] = field(default_factory=dict)
    nics_bits_per_s: Mapping[str, float] = field(default_factory=dict)
    nics_ingress: Mapping[str, bool] = field(default_factory=dict)  # shape arriving traffic (default: yes)
    memory: MemorySafety = MemorySafety()
    hysteresis: float = 0.05
    state_path: str = "/run/drfgov/state.json"
    history_path: str = "/var/lib/drfgov/history.db"
    history_retention_days: float = 14.0
    history_every_s: float = 60.0
    metrics: MetricsExport = MetricsExport()  # off unless the policy says where
    cgroup_v1_parent: str = ""  # v1 hosts: PARENT/user.slice in each hierarchy ("" = the hierarchy root)
    source: str = "<defaults>"

    def loop_settings(self) -> LoopSettings:
        """What the control loop takes from this policy."""
        return LoopSettings(frozenset(self.enforce), self.hysteresis, self.memory.margin_bytes,
                            self.memory.high_step_bytes)


DEFAULT_POLICY = Policy()


def weight_of(policy: Policy, user: str, groups: list[str]) -> Weight:
    """Her weight: her own entry, else the largest of her groups' entries, else the default.

    "Largest" compares scalar weights, and per-resource weights by their largest entry.
    """
    if user in policy.user_weights:
        return policy.user_weights[user]
    candidates = [policy.group_weights[g] for g in groups if g in policy.group_weights]
    if candidates:
        return max(candidates, key=lambda w: max(w.values()) if isinstance(w, Mapping) else w)
    return policy.default_weight


@dataclass(frozen=True)
class HostFacts:
    """What ``check-config`` knows of the host the policy is checked on: its CPUs and memory,
    and its disks and network interfaces (None: not known, nothing checked)."""

    cpu_cores: float
    memory_bytes: int
    disks: tuple[str, ...] | None = None  # whole disks (monitors.capacity.disks), as drfgov run finds them
    interfaces: tuple[str, ...] | None = None  # every network interface (/sys/class/net)
    nics: tuple[str, ...] = ()  # the interfaces backed by a device (monitors.capacity.nics): named in warnings
    loopbacks: tuple[str, ...] = ()  # the loopback interfaces (monitors.capacity.loopbacks): never shaped

    @classmethod
    def this_host(cls, procfs: str = "/proc", sysfs: str = "/sys") -> HostFacts | None:
        """This host's CPUs and ``MemTotal`` (None when /proc does not tell), and its disks and
        interfaces as ``drfgov run`` finds them (:mod:`monitors.capacity`; None when /sys does not tell)."""
        from monitors import capacity

        try:
            memory = next(int(line.split()[1]) * 1024 for line in Path(procfs, "meminfo").read_text().splitlines()
                          if line.startswith("MemTotal:"))
        except (OSError, ValueError, IndexError, StopIteration):
            return None
        try:
            disks = tuple(d.name for d in capacity.disks(sysfs))
        except OSError:
            disks = None
        try:
            interfaces, nics = tuple(capacity.interfaces(sysfs)), tuple(n.name for n in capacity.nics(sysfs))
            loopbacks = tuple(capacity.loopbacks(sysfs))
        except OSError:
            interfaces, nics, loopbacks = None, (), ()
        return cls(float(os.cpu_count() or 1), memory, disks, interfaces, nics, loopbacks)


def absent_devices(policy: Policy, disks: Collection[str] | None, interfaces: Collection[str] | None,
                   nics: Iterable[str] = (), loopbacks: Collection[str] = ()) -> dict[tuple[str, str, str], str]:
    """The disks and interfaces ``capacity`` names that this host does not have, or that are
    loopback devices (never shaped: what leaves through them stays on the host), field path →
    what becomes of each: the one wording of ``check-config``'s warning and ``drfgov run``'s
    note (each puts the file, and the line when it knows it, before it).

    A disk is one of ``disks`` (whole, non-removable, backed by a device:
    :func:`monitors.capacity.disks`), an interface one of ``interfaces`` (any kind: a bond,
    bridge or veth is shaped too) but ``loopbacks``, and only while ``net`` is enforced, as
    ``drfgov run`` shapes then alone; ``nics`` are named as what the host has. None: not
    known, nothing said.
    """
    out = {}
    if disks is not None:
        for name in policy.disks:
            if name not in disks:
                out[("capacity", "disks", name)] = (f"capacity.disks.{name}: no such disk here (have: "
                                                    f"{', '.join(disks) or 'none'}); its I/O is not governed")
    if interfaces is not None and "net" in policy.enforce:  # unshaped, a NIC's capacity is never used
        for name in policy.nics_bits_per_s:
            if name in loopbacks:
                out[("capacity", "nics", name)] = (f"capacity.nics.{name}: a loopback device: traffic between local "
                                                   "users stays on the host and is never shaped; it is not shaped")
            elif name not in interfaces:
                out[("capacity", "nics", name)] = (f"capacity.nics.{name}: no such interface here (NICs: "
                                                   f"{', '.join(nics) or 'none'}); it is not shaped")
    return out


TRUSTED = "root or the invoking user"  # the default of load_policy's trusted_uids


def load_policy(path: str | Path | None, *, trusted_uids: Iterable[int] | str | None = TRUSTED,
                host: HostFacts | None = None) -> tuple[Policy, list[str]]:
    """Read and validate a policy file (None: the defaults). Returns the policy and warnings.

    ``trusted_uids``: who may own the file and the directories above it (default: root and
    this process's effective uid); None skips the check (tests that say so). ``host``: also
    refuse what this host could not run (a reserve of all its CPUs or memory), and warn of
    the disks and NICs in ``capacity`` it does not have (:func:`absent_devices`).

    Raises:
        InputError: unreadable file, a file others could change, bad YAML, or an invalid field
            (file, line, field named).
    """
    if path is None:
        return DEFAULT_POLICY, []
    if trusted_uids is not None:
        check_trusted_file(path, {0, os.geteuid()} if trusted_uids == TRUSTED else trusted_uids)
    src = loads(read_text(path, what="policy files"), str(path))
    own = os.path.abspath(path)
    policy, warnings = parse_policy(src, host, policy_file=own)
    check_distinct_files(src, policy, own, os.path.realpath)  # the same files through symlinks (/var/run → /run)
    return policy, warnings


_TOP = ("interval_s", "mode", "backend", "enforce", "weights", "governed", "reserve", "capacity", "memory",
        "hysteresis", "state_path", "history", "metrics", "cgroup_v1")


def parse_policy(src: Located, host: HostFacts | None = None, *,
                 policy_file: str | None = None) -> tuple[Policy, list[str]]:
    """Validate loaded policy data; see :func:`load_policy`. ``policy_file``: the file's own
    absolute path, when it is one (no file the daemon writes may be it)."""
    top = mapping(src, (), src.data, "a mapping of policy settings")
    check_keys(src, (), top, _TOP)
    warnings: list[str] = []
    weights = mapping(src, ("weights",), top.get("weights"))
    check_keys(src, ("weights",), weights, ("default", "users", "groups"))
    users = {_name(src, ("weights", "users", k), k, userdb.USERS): _weight(src, ("weights", "users", k), v)
             for k, v in mapping(src, ("weights", "users"), weights.get("users")).items()}
    groups = {_name(src, ("weights", "groups", k), k, userdb.GROUPS): _weight(src, ("weights", "groups", k), v)
              for k, v in mapping(src, ("weights", "groups"), weights.get("groups")).items()}
    governed = _governed(src, top.get("governed"))
    warnings += _name_warnings(src, users, groups, governed)
    capacity = mapping(src, ("capacity",), top.get("capacity"))
    check_keys(src, ("capacity",), capacity, ("disks", "nics"))
    history = mapping(src, ("history",), top.get("history"))
    check_keys(src, ("history",), history, ("path", "retention_days", "every_s"))
    cgroup_v1 = mapping(src, ("cgroup_v1",), top.get("cgroup_v1"))
    check_keys(src, ("cgroup_v1",), cgroup_v1, ("parent",))
    metrics, metrics_warnings = parse_metrics(src, top.get("metrics"), _text)
    warnings += metrics_warnings
    policy = Policy(
        interval_s=_interval(src, ("interval_s",), top.get("interval_s", 1.0)),
        mode=_choice(src, ("mode",), top.get("mode", "enforce"), MODES),
        backend=_choice(src, ("backend",), top.get("backend", "auto"), BACKENDS),
        enforce=_kinds(src, ("enforce",), top.get("enforce", ["cpu", "memory", "io"])),
        default_weight=_weight(src, ("weights", "default"), weights.get("default", 1.0)),
        user_weights=users,
        group_weights=groups,
        governed=governed,
        reserve=_reserve(src, top.get("reserve"), host),
        disks=_disks(src, capacity.get("disks")),
        nics_bits_per_s=_nics(src, capacity.get("nics")),
        nics_ingress=_nics_ingress(src, capacity.get("nics")),
        memory=_memory(src, top.get("memory")),
        hysteresis=number(src, ("hysteresis",), top.get("hysteresis", 0.05), maximum=BOUNDS["hysteresis"], below=True),
        state_path=_file_path(src, ("state_path",), top.get("state_path", DEFAULT_POLICY.state_path)),
        history_path=_file_path(src, ("history", "path"), history.get("path", DEFAULT_POLICY.history_path)),
        history_retention_days=number(src, ("history", "retention_days"), history.get("retention_days", 14.0), strict=True,
                                      maximum=BOUNDS["retention_days"]),
        history_every_s=number(src, ("history", "every_s"), history.get("every_s", 60.0), maximum=BOUNDS["every_s"]),
        metrics=metrics,
        cgroup_v1_parent=_v1_parent(src, ("cgroup_v1", "parent"), cgroup_v1.get("parent", "")),
        source=src.file,
    )
    check_distinct_files(src, policy, policy_file)
    if host is not None:
        warnings += [f"{src.file}:{src.line(path)}: {why}"
                     for path, why in absent_devices(policy, host.disks, host.interfaces, host.nics,
                                                     host.loopbacks).items()]
    return policy, warnings


#: The files the daemon writes, as (field path, what it is): no two may be one file, nor the policy.
WRITTEN_FILES = ((("state_path",), "state_path"), (("history", "path"), "history.path"),
                 (("metrics", "textfile"), "metrics.textfile"))


def check_distinct_files(src: Located, policy: Policy, policy_file: str | None = None,
                         same: Callable[[str], str] | None = None) -> None:
    """Refuse two of ``state_path``, ``history.path`` and ``metrics.textfile`` that are one
    file, or one that is the policy file itself (``policy_file``, absolute; None: not a file).

    ``same`` maps a path to what identifies its file; by default a pure normalisation
    (:func:`_lexical`: ``.``, ``..`` and repeated slashes, symlinks *not* resolved — the daemon
    would follow them); :func:`load_policy` calls it again with :func:`os.path.realpath`.

    Raises:
        InputError: naming the later field of the two (the one the file sets, when only one
            is set there), the other one and the path.
    """
    same = same or _lexical
    files = [(None, "the policy file itself", policy_file)] if policy_file else []
    files += [(path, name, value) for (path, name), value in
              zip(WRITTEN_FILES, (policy.state_path, policy.history_path, policy.metrics.textfile)) if value]
    seen: dict[str, tuple[tuple | None, str, str]] = {}
    for entry in files:
        key = same(entry[2])
        if key not in seen:
            seen[key] = entry
            continue
        first, later = seen[key], entry
        if first[0] is not None and later[0] not in src.lines and first[0] in src.lines:  # blame what the file sets
            first, later = later, first
        why = "the daemon would write over its own policy" if first[0] is None else "the daemon writes each of them"
        if _lexical(first[2]) != _lexical(later[2]):
            why += f" (both are {_quote(key)} once symlinks are followed)"
        shown = "" if first[0] is None else f" ({_quote(first[2])})"
        raise src.error(later[0], f"expected another file than {first[1]}{shown}, got {_quote(later[2])}: {why}")


def _lexical(path: str) -> str:
    """``path`` normalised without the file system: ``os.path.normpath``, and a leading ``//``
    (which POSIX leaves to the system, and Linux reads as ``/``) made ``/``."""
    out = os.path.normpath(path)
    return "/" + out.lstrip("/") if out.startswith("//") else out


def parse_bytes(src: Located, path: tuple, value: Any, maximum: int = BYTES_MAX, what: str = "bytes") -> int:
    """A byte amount: a whole number ``0 … maximum``, or a string such as ``"512MiB"``: with a
    unit it is rounded down to whole bytes (``"1.3GiB"`` is 1,395,864,371), without one it
    must be whole (``"0.5"`` is refused, as the number 0.5 is: a fraction of a byte is a
    mistake; a fraction of a GiB is not). Units are binary: ``K``, ``M``, ``G``, ``T`` or
    ``KiB`` … ``TiB`` (2^10 … 2^40, as systemd.resource-control(5) reads them); ``KB`` … ``TB``
    are refused as ambiguous, the error saying what to write. ``what``: the amount's unit in
    messages (``"bytes per second"`` for a bandwidth).

    Raises:
        InputError: not a byte amount, above ``maximum``, or a fraction of a byte.
    """
    if isinstance(value, str) and not _EXPONENT.match(value):
        match = _BYTES.match(value) if len(value) <= 64 else None
        if not match:
            number_ = "a whole number" if what == "bytes" else "a number"  # a rate may be a fraction (123.5 B/s)
            raise src.error(path, f"expected {what}: {number_} or a size like 512M, 512MiB or 2GiB (binary units: "
                                  f"K, M, G, T are KiB, MiB, GiB, TiB), got {describe(value)}{_ambiguous(value)}")
        unit = (match.group(2) or "").lower()
        amount = Decimal(match.group(1)) * _IEC[unit]  # exact, then rounded down with a unit
        if amount > maximum:
            raise src.error(path, f"expected at most {maximum} {what}, got {describe(value)}")
        if not unit and amount != amount.to_integral_value():
            raise src.error(path, f"expected whole bytes, got {describe(value)} ({amount.normalize():f} bytes)")
        return int(amount)
    x = number(src, path, value, maximum=maximum)
    if x != int(x):
        raise src.error(path, f"expected whole bytes, got {describe(value)}")
    return value if type(value) is int else min(int(x), maximum)  # an int exactly; a float near 2^63 rounds to it


def _ambiguous(value: str) -> str:
    """What to write for a decimal-looking unit (``1GB``: 10^9 or 2^30 bytes?); "" for anything else."""
    decimal = _DECIMAL_UNIT.match(value) if len(value) <= 64 else None
    if decimal is None:
        return ""
    unit, power = decimal.group(1), " kmgt".index(decimal.group(2).lower())
    return f": {unit!r} is ambiguous (10^{3 * power} or 2^{10 * power} bytes?), write {unit[0].upper()}iB"


def _interval(src: Located, path: tuple, value: Any) -> float:
    try:
        return check_interval(value)
    except ValueError as exc:
        raise src.error(path, str(exc)) from None


def _weight(src: Located, path: tuple, value: Any) -> Weight:
    if isinstance(value, dict):
        out = {}
        for kind, w in value.items():
            if kind not in RESOURCE_KINDS:
                raise src.error(path + (kind,), f"unknown resource; expected one of: {', '.join(RESOURCE_KINDS)}")
            out[kind] = weight(src, path + (kind,), w)
        return out
    return weight(src, path, value)


_V1_PARENT_PART = re.compile(r"^[A-Za-z0-9_.@:+-]{1,255}$")


def _v1_parent(src: Located, path: tuple, value: Any) -> str:
    """``cgroup_v1.parent``: where ``user.slice`` lies in each v1 hierarchy, relative to its
    root ("" = the root, as systemd has it): names of letters, digits and ``_.@:+-``, joined by
    ``/``; no ``.``/``..``, no leading ``/``, at most 8 levels."""
    if not isinstance(value, str):
        raise src.error(path, f"expected a relative cgroup path such as 'drfgov-test/sub' or '', got {_quote(value)}")
    if value == "":
        return value
    parts = value.split("/")
    if len(parts) > 8 or any(p in (".", "..") or not _V1_PARENT_PART.match(p) for p in parts):
        raise src.error(path, f"expected a relative cgroup path (names of letters, digits and _.@:+-, joined by '/', "
                              f"no '.' or '..', at most 8 levels), got {_quote(value)}")
    return value


def _choice(src: Located, path: tuple, value: Any, options: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in options:
        raise src.error(path, f"expected one of: {', '.join(options)}, got {_quote(value)}")
    return value


def _quote(value: Any) -> str:
    """A short text as Python writes it ('enforcing'); anything else as :func:`describe` says it."""
    return repr(value) if isinstance(value, str) and len(value) <= 60 else describe(value)


def _text(src: Located, path: tuple, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise src.error(path, f"expected a path, got {_quote(value)}")
    if "\0" in value:
        raise src.error(path, f"expected a path, got text with a NUL character at {value.index(chr(0))}: "
                              "the kernel would end the path there")
    if len(value.encode("utf-8", "surrogateescape")) > BOUNDS["path_bytes"]:
        raise src.error(path, f"expected a path of at most {BOUNDS['path_bytes']} bytes (PATH_MAX), "
                              f"got {len(value.encode('utf-8', 'surrogateescape'))}")
    return value


def _file_path(src: Located, path: tuple, value: Any) -> str:
    """A file the daemon writes: an absolute path (:func:`_text`) that is not a directory."""
    value = _text(src, path, value)
    if not value.startswith("/"):
        raise src.error(path, f"expected an absolute path, got {_quote(value)}: a relative one would depend on "
                              "the directory the daemon starts in")
    if os.path.isdir(value):
        raise src.error(path, f"expected a file's path, got the directory {_quote(value)}")
    return value


def _ifname(src: Located, path: tuple, name: Any) -> str:
    """An interface name as the kernel takes one (``dev_valid_name``, net/core/dev.c): 1–15
    bytes, not ``.`` or ``..``, no ``/``, ``:`` or white space."""
    text = str(name)
    if not 0 < len(text.encode("utf-8", "surrogateescape")) < 16 or text in (".", "..") \
            or any(c in "/:" or c.isspace() for c in text):
        raise src.error(path, f"expected an interface name (1–15 bytes, no '/', ':' or space), got {_quote(text)}")
    return text


def _kinds(src: Located, path: tuple, value: Any) -> tuple[str, ...]:
    """``enforce``: the resources capped when contended (cpu.max, memory.high and memory.max,
    io.max; net: traffic shaping), each once, at least one. cpu.weight and memory.low are
    written whatever it says (the control loop's ``_capped``): no list means "write nothing",
    so an empty one is refused with the setting that does (``mode: dry-run``)."""
    if not isinstance(value, list):
        raise src.error(path, f"expected a list drawn from: {', '.join(RESOURCE_KINDS)}")
    if not value:
        raise src.error(path, f"expected at least one of: {', '.join(RESOURCE_KINDS)}: cpu.weight and memory.low are "
                              "written whatever enforce lists; to write nothing, set mode: dry-run")
    for i, kind in enumerate(value):
        if kind not in RESOURCE_KINDS:
            raise src.error(path + (i,), f"unknown resource {_quote(kind)}; expected one of: {', '.join(RESOURCE_KINDS)}")
        if kind in value[:i]:
            raise src.error(path + (i,), f"{kind} listed twice (first as item {value.index(kind)}); expected each once")
    return tuple(value)


def _name(src: Located, path: tuple, value: Any, db: Database) -> str:
    """A user (group) name as :func:`~governor.config.names.name_problem` has one. A number is
    refused, naming whom it is the uid (gid) of here: it would be compared with names, never
    match and leave that user as if it were not written (the audit: ``exempt_users: [1000]``)."""
    noun = "a login name" if db.what == "user" else "a group name"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 64:
        owner = db.named(value)
        held = (f"{db.id_word} {value} is {owner.name} on this host" if owner is not None
                else f"no {db.what} has {db.id_word} {value} on this host")
        raise src.error(path, f"expected {noun}, got the number {value} ({held}); a name of digits goes in quotes")
    if not isinstance(value, str):
        raise src.error(path, f"expected {noun}, got {describe(value)}")
    problem = name_problem(value)
    if problem is not None:
        raise src.error(path, f"expected {noun}, got {_quote(value)}: {problem}")
    return value


def _names(src: Located, path: tuple, value: Any, db: Database) -> tuple[str, ...]:
    """A list of user (group) names (:func:`_name`); None is none."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise src.error(path, f"expected a list of {db.what} names, got {describe(value)}")
    return tuple(_name(src, path + (i,), v, db) for i, v in enumerate(value))


def _governed(src: Located, value: Any) -> Governed:
    path = ("governed",)
    body = mapping(src, path, value)
    check_keys(src, path, body, ("min_uid", "max_uid", "exempt_users", "exempt_groups"))
    min_uid = _uid(src, path + ("min_uid",), body.get("min_uid", DEFAULT_MIN_UID))
    max_uid = _uid(src, path + ("max_uid",), body.get("max_uid", DEFAULT_MAX_UID))
    if max_uid < min_uid:  # only when max_uid is set: its default is the largest uid
        raise src.error(path + ("max_uid",), f"expected a uid ≥ governed.min_uid ({min_uid}), got {max_uid}: "
                                             "no uid would be governed")
    if min_uid == max_uid and uid_never_governed(min_uid, min_uid, max_uid) is not None:  # its one uid: nobody
        raise src.error(path + ("max_uid",), f"expected a range with a uid other than {OVERFLOW_UID} (nobody, never "
                                             f"governed), got {min_uid} … {max_uid}: no uid would be governed")
    users = _names(src, path + ("exempt_users",), body.get("exempt_users"), userdb.USERS)
    groups = _names(src, path + ("exempt_groups",), body.get("exempt_groups"), userdb.GROUPS)
    return Governed(min_uid, max_uid, users, groups)


def _uid(src: Located, path: tuple, value: Any) -> int:
    """A uid: a whole number 0 … :data:`~monitors.model.LAST_UID`."""
    x = number(src, path, value, maximum=BOUNDS["uid"])
    if x != int(x):
        raise src.error(path, f"expected a whole uid, got {describe(value)}")
    return int(x)


def _reserve(src: Located, value: Any, host: HostFacts | None) -> Reserve:
    body = mapping(src, ("reserve",), value)
    check_keys(src, ("reserve",), body, ("cpu_cores", "memory_bytes"))
    cores = number(src, ("reserve", "cpu_cores"), body.get("cpu_cores", 0.0), maximum=BOUNDS["cpu_cores"])
    memory = parse_bytes(src, ("reserve", "memory_bytes"), body.get("memory_bytes", 0))
    if host is not None and cores >= host.cpu_cores:
        raise src.error(("reserve", "cpu_cores"), f"expected less than this host's {host.cpu_cores:g} CPUs, got {cores:g}: "
                                                  "it would leave users no CPU (drfgov run would refuse to start)")
    if host is not None and memory >= host.memory_bytes:
        raise src.error(("reserve", "memory_bytes"), f"expected less than this host's memory ({host.memory_bytes} bytes, "
                                                     f"{host.memory_bytes / 2**30:.1f} GiB), got {memory}: it would leave "
                                                     "users no memory (drfgov run would refuse to start)")
    return Reserve(cores, memory)


def _disks(src: Located, value: Any) -> dict[str, DiskOverride]:
    out = {}
    for name, entry in mapping(src, ("capacity", "disks"), value).items():
        path = ("capacity", "disks", name)
        fields = mapping(src, path, entry, "a mapping with read_bytes_per_s and write_bytes_per_s")
        check_keys(src, path, fields, ("read_bytes_per_s", "write_bytes_per_s"))
        for key in ("read_bytes_per_s", "write_bytes_per_s"):
            if key not in fields:
                raise src.error(path + (key,), "missing; expected bytes per second (see drfgov calibrate io)")
        out[str(name)] = DiskOverride(_byte_rate(src, path + ("read_bytes_per_s",), fields["read_bytes_per_s"]),
                                      _byte_rate(src, path + ("write_bytes_per_s",), fields["write_bytes_per_s"]))
    return out


def _byte_rate(src: Located, path: tuple, value: Any) -> float:
    """A disk's bandwidth, bytes/s: a number > 0 (a fraction of a byte per second is fine), or
    text as :func:`parse_bytes` reads a byte amount (``"500MiB"``, ``"1G"``), per second, > 0;
    at most ``BOUNDS["disk_bytes_per_s"]``.

    Raises:
        InputError: not a number or a size, 0 or less, above the bound.
    """
    top = BOUNDS["disk_bytes_per_s"]
    if isinstance(value, str) and not _EXPONENT.match(value):
        rate = parse_bytes(src, path, value, top, what="bytes per second")
        if rate == 0:
            raise src.error(path, f"expected bytes per second > 0, got {describe(value)}")
        return float(rate)
    return number(src, path, value, strict=True, maximum=top)


def _nics(src: Located, value: Any) -> dict[str, float]:
    out = {}
    for name, entry in mapping(src, ("capacity", "nics"), value).items():
        path = ("capacity", "nics", name)
        _ifname(src, path, name)
        fields = mapping(src, path, entry, "a mapping with bits_per_s")
        check_keys(src, path, fields, ("bits_per_s", "ingress"))
        out[str(name)] = number(src, path + ("bits_per_s",), fields.get("bits_per_s"), strict=True,
                                maximum=BOUNDS["nic_bits_per_s"])
    return out


def _nics_ingress(src: Located, value: Any) -> dict[str, bool]:
    out = {}
    for name, entry in mapping(src, ("capacity", "nics"), value).items():
        flag = entry.get("ingress", True)
        if not isinstance(flag, bool):
            raise src.error(("capacity", "nics", name, "ingress"), f"expected true or false, got {_quote(flag)}")
        out[str(name)] = flag
    return out


def _memory(src: Located, value: Any) -> MemorySafety:
    body = mapping(src, ("memory",), value)
    check_keys(src, ("memory",), body, ("margin_bytes", "high_step_bytes"))
    top = BOUNDS["margin_bytes"]
    margin = parse_bytes(src, ("memory", "margin_bytes"), body.get("margin_bytes", MemorySafety.margin_bytes), top)
    step = parse_bytes(src, ("memory", "high_step_bytes"), body.get("high_step_bytes", MemorySafety.high_step_bytes), top)
    if step < PAGE_SIZE:
        raise src.error(("memory", "high_step_bytes"), f"expected at least one page ({PAGE_SIZE} bytes): "
                        "memory.high could never come down")
    return MemorySafety(margin, step)


def _name_warnings(src: Located, users: Mapping[str, Weight], groups: Mapping[str, Weight],
                   governed: Governed) -> list[str]:
    """What the user and group databases say of the policy's names, in the file's order of
    sections: a name this host does not know (it may be created later), a weight that can never
    apply (her uid is never governed, or she is exempt), a name listed twice in an exempt list.

    Raises:
        InputError: a name of digits that names no one here but is a uid (gid) of this host
            (:func:`_look_up`).
    """
    user_paths = {name: ("weights", "users", name) for name in users}
    group_paths = {name: ("weights", "groups", name) for name in groups}
    exempt_users, exempt_groups = ("governed", "exempt_users"), ("governed", "exempt_groups")
    exempt_user_paths = _first_items(exempt_users, governed.exempt_users)
    exempt_group_paths = _first_items(exempt_groups, governed.exempt_groups)
    weighted, unknown_users = _look_up(src, ("weights", "users"), user_paths, userdb.USERS, listed=False)
    weighted_groups, unknown_groups = _look_up(src, ("weights", "groups"), group_paths, userdb.GROUPS, listed=False)
    _, unknown_exempt_users = _look_up(src, exempt_users, exempt_user_paths, userdb.USERS, listed=True)
    exempt_entries, unknown_exempt_groups = _look_up(src, exempt_groups, exempt_group_paths, userdb.GROUPS, listed=True)
    out = []
    for name in users:  # in the file's order: each name's warning where it stands, the summary last
        entry = weighted.get(name)
        why = _never_governed(entry, governed, exempt_entries) if entry is not None else None
        out += [unknown_users[name]] if name in unknown_users else []
        if why is not None:
            out.append(f"{src.file}:{src.line(user_paths[name])}: weights.users.{name}: {why}: "
                       "this weight never applies")
    out += [unknown_users[None]] if None in unknown_users else []
    for name in groups:
        out += [unknown_groups[name]] if name in unknown_groups else []
        if name in governed.exempt_groups:
            out.append(f"{src.file}:{src.line(group_paths[name])}: weights.groups.{name}: {name!r} is in "
                       "governed.exempt_groups: its members are never governed, so this weight never applies")
    out += [unknown_groups[None]] if None in unknown_groups else []
    out += [*unknown_exempt_users.values(), *_repeats(src, exempt_users, governed.exempt_users)]
    out += [*unknown_exempt_groups.values(), *_repeats(src, exempt_groups, governed.exempt_groups)]
    return out


def _first_items(path: tuple, names: tuple[str, ...]) -> dict[str, tuple]:
    """Each name of a list → the field path of its first item (a repeat is looked up once)."""
    out: dict[str, tuple] = {}
    for i, name in enumerate(names):
        out.setdefault(name, path + (i,))
    return out


def _never_governed(user: Entry, governed: Governed, exempt_groups: Mapping[str, Entry | None]) -> str | None:
    """Why ``user`` is never governed under ``governed``, or None: the rule of
    :func:`monitors.users.is_governed` (a uid :func:`monitors.model.uid_never_governed` lets in,
    not exempt), exempt groups read as :func:`governor.config.identity.exempt_names` reads them
    (listed members and primary group)."""
    name, uid = user.name, user.id
    why = uid_never_governed(uid, governed.min_uid, governed.max_uid)
    if why == "below":
        return f"{name!r} is uid {uid}, below governed.min_uid ({governed.min_uid}), so never governed"
    if why == "above":
        return f"{name!r} is uid {uid}, above governed.max_uid ({governed.max_uid}), so never governed"
    if why == "nobody":
        return f"{name!r} is uid {uid}, the overflow uid (nobody), which is never governed"
    if name in governed.exempt_users:
        return f"{name!r} is in governed.exempt_users"
    for group, entry in exempt_groups.items():
        if entry is not None and (name in entry.members or user.gid == entry.id):
            return f"{name!r} is in exempt group {group!r} (governed.exempt_groups)"
    return None


def _repeats(src: Located, path: tuple, names: tuple[str, ...]) -> list[str]:
    """A warning for each name listed again in the list at ``path``."""
    out, first = [], {}
    for i, name in enumerate(names):
        if name in first:
            out.append(f"{src.file}:{src.line(path + (i,))}: {'.'.join(path)}: {name!r} listed twice "
                       f"(items {first[name]} and {i})")
        else:
            first[name] = i
    return out


def _look_up(src: Located, path: tuple, names: Mapping[str, tuple], db: Database,
             listed: bool) -> tuple[dict[str, Entry | None], dict[str | None, str]]:
    """The entries of ``names`` (name → its field path) in ``db`` (None: not on this host;
    left out: not looked up), and the warnings by name, in the order of ``names``: one for each
    name ``db`` does not know (it may be created later), and last, under None, one for the names
    not looked up. A long list is first matched against one enumeration of the database, and
    at most :data:`LOOKUPS` names are looked up one by one (LDAP users need not be enumerable).
    ``listed``: the names are items of a list (the warnings name the list).

    Raises:
        InputError: a name of digits alone that is no name here but a uid (gid) of this host:
            it would never match (a user literally named so is a name, and passes).
    """
    found: dict[str, Entry | None] = {}
    warnings: dict[str | None, str] = {}
    known = db.all() if len(names) > LOOKUPS else {}
    lookups = unchecked = 0
    for name, where in names.items():
        entry = known.get(name)
        if entry is None:
            if lookups >= LOOKUPS:
                unchecked += 1
                continue
            lookups += 1
            entry = db.find(name)
        if entry is None and name.isascii() and name.isdigit() and len(name) <= 10:
            owner = db.named(int(name))
            if owner is not None:
                noun = "a login name" if db.what == "user" else "a group name"
                raise src.error(where, f"expected {noun}, got {name!r} ({db.id_word} {int(name)} is {owner.name} "
                                       f"on this host; no {db.what} is named {name!r})")
        found[name] = entry
        if entry is None:
            field_name = ".".join(map(str, path if listed else where))
            warnings[name] = f"{src.file}:{src.line(where)}: {field_name}: no {db.what} {name!r} on this host (yet)"
    if unchecked:
        warnings[None] = (f"{src.file}:{src.line(path)}: {'.'.join(map(str, path))}: {unchecked} more {db.what} names "
                          f"not looked up (at most {LOOKUPS} lookups a list): not in this host's {db.what} list")
    return found, warnings


def policy_from_text(text: str, name: str = "<string>") -> tuple[Policy, list[str]]:
    """Parse policy YAML text (tests, reload)."""
    return parse_policy(loads(text, name))

