"""The governor's policy file: YAML → validated, frozen dataclasses.

``configs/drfgov.yaml`` documents every key; :data:`DEFAULT_POLICY` is what applies with no
file. Validation is strict: an unknown key, a wrong type, a zero or negative weight is an
:class:`~governor.config.source.InputError` naming file, line and field. Users and groups that do
not exist on this host are *warnings* (they may be created later), returned with the policy.

Byte amounts accept whole numbers or IEC strings (``"512MiB"``, ``"2GiB"``; ``K``/``M``/``G``/
``T`` are read as KiB/MiB/GiB/TiB). Bandwidths are numbers in bytes/s (disks) or bits/s (NICs).
"""

from __future__ import annotations

import grp
import pwd
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cgroups.limits import PAGE_SIZE
from governor.control.model import LoopSettings
from governor.control.resources import WEIGHT_KINDS
from governor.enforce.model import BACKENDS
from governor.config.source import InputError, Located, check_keys, load, loads, mapping, number

__all__ = [
    "DEFAULT_POLICY", "DiskOverride", "Governed", "InputError", "MemorySafety", "Policy", "Reserve", "Weight",
    "load_policy", "parse_bytes", "parse_policy", "policy_from_text", "weight_of",
]

RESOURCE_KINDS = WEIGHT_KINDS  # what `enforce` and per-resource weights name: cpu, memory, io (disks), net (links)
MODES = ("enforce", "dry-run")
Weight = float | Mapping[str, float]  # scalar, or per resource kind (cpu, memory, io, net)

_IEC = {"": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30, "t": 2**40, "tib": 2**40}
_BYTES = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt](?:ib)?)?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Governed:
    """Who is governed: uids ≥ ``min_uid``, except the exempt users and members of exempt groups."""

    min_uid: int = 1000
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


def load_policy(path: str | Path | None) -> tuple[Policy, list[str]]:
    """Read and validate a policy file (None: the defaults). Returns the policy and warnings.

    Raises:
        InputError: unreadable file, bad YAML, or an invalid field (file, line, field named).
    """
    if path is None:
        return DEFAULT_POLICY, []
    return parse_policy(load(path))


_TOP = ("interval_s", "mode", "backend", "enforce", "weights", "governed", "reserve", "capacity", "memory",
        "hysteresis", "state_path", "history")


def parse_policy(src: Located) -> tuple[Policy, list[str]]:
    """Validate loaded policy data; see :func:`load_policy`."""
    top = mapping(src, (), src.data, "a mapping of policy settings")
    check_keys(src, (), top, _TOP)
    warnings: list[str] = []
    weights = mapping(src, ("weights",), top.get("weights"))
    check_keys(src, ("weights",), weights, ("default", "users", "groups"))
    users = {str(k): _weight(src, ("weights", "users", k), v)
             for k, v in mapping(src, ("weights", "users"), weights.get("users")).items()}
    groups = {str(k): _weight(src, ("weights", "groups", k), v)
              for k, v in mapping(src, ("weights", "groups"), weights.get("groups")).items()}
    warnings += _unknown(src, ("weights", "users"), users, _user_exists, "user")
    warnings += _unknown(src, ("weights", "groups"), groups, _group_exists, "group")
    governed = _governed(src, top.get("governed"), warnings)
    capacity = mapping(src, ("capacity",), top.get("capacity"))
    check_keys(src, ("capacity",), capacity, ("disks", "nics"))
    history = mapping(src, ("history",), top.get("history"))
    check_keys(src, ("history",), history, ("path", "retention_days", "every_s"))
    policy = Policy(
        interval_s=number(src, ("interval_s",), top.get("interval_s", 1.0), minimum=0.1),
        mode=_choice(src, ("mode",), top.get("mode", "enforce"), MODES),
        backend=_choice(src, ("backend",), top.get("backend", "auto"), BACKENDS),
        enforce=_kinds(src, ("enforce",), top.get("enforce", ["cpu", "memory", "io"])),
        default_weight=_weight(src, ("weights", "default"), weights.get("default", 1.0)),
        user_weights=users,
        group_weights=groups,
        governed=governed,
        reserve=_reserve(src, top.get("reserve")),
        disks=_disks(src, capacity.get("disks")),
        nics_bits_per_s=_nics(src, capacity.get("nics")),
        nics_ingress=_nics_ingress(src, capacity.get("nics")),
        memory=_memory(src, top.get("memory")),
        hysteresis=number(src, ("hysteresis",), top.get("hysteresis", 0.05)),
        state_path=_text(src, ("state_path",), top.get("state_path", DEFAULT_POLICY.state_path)),
        history_path=_text(src, ("history", "path"), history.get("path", DEFAULT_POLICY.history_path)),
        history_retention_days=number(src, ("history", "retention_days"), history.get("retention_days", 14.0), strict=True),
        history_every_s=number(src, ("history", "every_s"), history.get("every_s", 60.0)),
        source=src.file,
    )
    return policy, warnings


def parse_bytes(src: Located, path: tuple, value: Any) -> int:
    """A byte amount: a whole number ≥ 0 or an IEC string such as ``"512MiB"``."""
    if isinstance(value, str):
        match = _BYTES.match(value)
        if match:
            return int(float(match.group(1)) * _IEC[(match.group(2) or "").lower()])
        raise src.error(path, f"expected bytes (a number or e.g. '512MiB', '2GiB'), got {value!r}")
    x = number(src, path, value)
    if x != int(x):
        raise src.error(path, f"expected whole bytes, got {value!r}")
    return int(x)


def _weight(src: Located, path: tuple, value: Any) -> Weight:
    if isinstance(value, dict):
        out = {}
        for kind, w in value.items():
            if kind not in RESOURCE_KINDS:
                raise src.error(path + (kind,), f"unknown resource; expected one of: {', '.join(RESOURCE_KINDS)}")
            out[kind] = number(src, path + (kind,), w, strict=True)
        return out
    return number(src, path, value, strict=True)


def _choice(src: Located, path: tuple, value: Any, options: tuple[str, ...]) -> str:
    if value not in options:
        raise src.error(path, f"expected one of: {', '.join(options)}, got {value!r}")
    return value


def _text(src: Located, path: tuple, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise src.error(path, f"expected a path, got {value!r}")
    return value


def _kinds(src: Located, path: tuple, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise src.error(path, f"expected a list drawn from: {', '.join(RESOURCE_KINDS)}")
    for i, kind in enumerate(value):
        if kind not in RESOURCE_KINDS:
            raise src.error(path + (i,), f"unknown resource {kind!r}; expected one of: {', '.join(RESOURCE_KINDS)}")
    return tuple(value)


def _names(src: Located, path: tuple, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise src.error(path, "expected a list of names")
    return tuple(str(v) for v in value)


def _governed(src: Located, value: Any, warnings: list[str]) -> Governed:
    path = ("governed",)
    body = mapping(src, path, value)
    check_keys(src, path, body, ("min_uid", "exempt_users", "exempt_groups"))
    min_uid = number(src, path + ("min_uid",), body.get("min_uid", 1000))
    if min_uid != int(min_uid):
        raise src.error(path + ("min_uid",), f"expected a whole uid, got {body['min_uid']!r}")
    users = _names(src, path + ("exempt_users",), body.get("exempt_users"))
    groups = _names(src, path + ("exempt_groups",), body.get("exempt_groups"))
    warnings += _unknown(src, path + ("exempt_users",), {u: 0 for u in users}, _user_exists, "user", listed=True)
    warnings += _unknown(src, path + ("exempt_groups",), {g: 0 for g in groups}, _group_exists, "group", listed=True)
    return Governed(int(min_uid), users, groups)


def _reserve(src: Located, value: Any) -> Reserve:
    body = mapping(src, ("reserve",), value)
    check_keys(src, ("reserve",), body, ("cpu_cores", "memory_bytes"))
    return Reserve(number(src, ("reserve", "cpu_cores"), body.get("cpu_cores", 0.0)),
                   parse_bytes(src, ("reserve", "memory_bytes"), body.get("memory_bytes", 0)))


def _disks(src: Located, value: Any) -> dict[str, DiskOverride]:
    out = {}
    for name, entry in mapping(src, ("capacity", "disks"), value).items():
        path = ("capacity", "disks", name)
        fields = mapping(src, path, entry, "a mapping with read_bytes_per_s and write_bytes_per_s")
        check_keys(src, path, fields, ("read_bytes_per_s", "write_bytes_per_s"))
        for key in ("read_bytes_per_s", "write_bytes_per_s"):
            if key not in fields:
                raise src.error(path + (key,), "missing; expected bytes per second (see drfgov calibrate io)")
        out[str(name)] = DiskOverride(number(src, path + ("read_bytes_per_s",), fields["read_bytes_per_s"], strict=True),
                                      number(src, path + ("write_bytes_per_s",), fields["write_bytes_per_s"], strict=True))
    return out


def _nics(src: Located, value: Any) -> dict[str, float]:
    out = {}
    for name, entry in mapping(src, ("capacity", "nics"), value).items():
        path = ("capacity", "nics", name)
        fields = mapping(src, path, entry, "a mapping with bits_per_s")
        check_keys(src, path, fields, ("bits_per_s", "ingress"))
        out[str(name)] = number(src, path + ("bits_per_s",), fields.get("bits_per_s"), strict=True)
    return out


def _nics_ingress(src: Located, value: Any) -> dict[str, bool]:
    out = {}
    for name, entry in mapping(src, ("capacity", "nics"), value).items():
        flag = entry.get("ingress", True)
        if not isinstance(flag, bool):
            raise src.error(("capacity", "nics", name, "ingress"), f"expected true or false, got {flag!r}")
        out[str(name)] = flag
    return out


def _memory(src: Located, value: Any) -> MemorySafety:
    body = mapping(src, ("memory",), value)
    check_keys(src, ("memory",), body, ("margin_bytes", "high_step_bytes"))
    margin = parse_bytes(src, ("memory", "margin_bytes"), body.get("margin_bytes", MemorySafety.margin_bytes))
    step = parse_bytes(src, ("memory", "high_step_bytes"), body.get("high_step_bytes", MemorySafety.high_step_bytes))
    if step < PAGE_SIZE:
        raise src.error(("memory", "high_step_bytes"), f"expected at least one page ({PAGE_SIZE} bytes): "
                        "memory.high could never come down")
    return MemorySafety(margin, step)


def _exists(lookup, name: str) -> bool:
    """Whether the password or group database knows ``name``."""
    try:
        lookup(name)
        return True
    except KeyError:
        return False


def _user_exists(name: str) -> bool:
    return _exists(pwd.getpwnam, name)


def _group_exists(name: str) -> bool:
    return _exists(grp.getgrnam, name)


def _unknown(src: Located, path: tuple, names: Mapping[str, Any], exists, what: str, listed: bool = False) -> list[str]:
    out = []
    for i, name in enumerate(names):
        if not exists(name):
            where = path + ((i,) if listed else (name,))
            field_name = ".".join(map(str, path + (() if listed else (name,))))
            out.append(f"{src.file}:{src.line(where)}: {field_name}: no {what} {name!r} on this host (yet)")
    return out


def policy_from_text(text: str, name: str = "<string>") -> tuple[Policy, list[str]]:
    """Parse policy YAML text (tests, reload)."""
    return parse_policy(loads(text, name))

