"""state.json: the daemon's latest tick, for ``drfgov shares``/``explain`` and for monitoring.

Replaced atomically and world-readable (mode 0644): any user may see the shares. The daemon
writes it every tick while someone reads it, at once when a reader opens it stale, else every
10 s (:mod:`governor.service.statereaders`); :func:`read_state` waits for that replacement.
Shape (version 1; amounts in each resource's unit — ``cpu`` cores, ``memory`` bytes,
``disk:MAJ:MIN`` fraction of the disk's time, ``net:IF:tx``/``net:IF:rx`` bits/s)::

    {"version": 1, "time_unix_s": 1795000000.0, "tick": 42, "interval_s": 1.0,
     "mode": "enforce", "backend": "systemd", "policy_file": "/etc/drfgov/drfgov.yaml",
     "capacity": {"cpu": 1.5, "memory": 1073741824, "disk:254:0": 1.0},
     "saturated": ["cpu"],
     "users": [{"uid": 1001, "name": "alice", "weight": {"cpu": 2.0, ...},
                "dominant_resource": "cpu", "dominant_share": 0.667, "weighted_share": 0.333,
                "usage": {...}, "demand": {...}, "allocation": {...},
                "held": ["cpu"],   # where the kernel held her back this tick (throttled, at a limit, stalled)
                "evidence": {"cpu": {"used": 0.5, "wanted": 0.9, "held": true, "speedup": 1.0}, ...},
                "stall_some_fraction": {"cpu": 0.4, "io": 0.0, "memory": 0.0},   # PSI, share of the interval
                "stall_full_fraction": {...}, "throttled_cores": 0.4,
                "memory_guard_bytes": null,   # memory not contended: memory.high holding growth not yet confirmed
                "limits": {"cpu.max": "100000 100000", "cpu.weight": 200, ...},   # in force (LimitSet.to_json)
                "planned": {...},  # this tick's plan; inside the hysteresis band it is not written
                "reasons": {"cpu.max": "CPU contended: ..."}, "written": ["cpu.max"],
                "classes": {"net:eth0:tx": {"rate_bits_per_s": 250000000, "ceil_bits_per_s": 1000000000}},
                "error": null}],
     "network_error": null}

``evidence`` is what the demand estimate read of each resource this tick (resource units;
``wanted`` null for the network, which is probed; see :mod:`governor.control.demand`).
``capacity`` is what the users share this tick: the CPUs and memory less what the rest of
the host uses right now (see :mod:`governor.control.loop`). ``classes`` are her HTB classes in force (rate: her guaranteed weighted share of the link;
ceil: her DRF allocation when the link is contended, else the link); ``network_error`` is
set when shaping failed this tick.
"""

from __future__ import annotations

import json
import os
import stat
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the readers (drfgov shares, explain) need no model: ~45 ms of imports (issue 16)
    from governor.control.model import TickReport, UserReport

__all__ = ["FUTURE_TOLERANCE_S", "IDLE_EVERY_S", "StateError", "check_document", "read_state", "staleness",
           "state_document", "write_state"]

VERSION = 1
#: Seconds between writes while nobody reads it (:mod:`governor.service.statereaders` watches
#: for readers; here, with the document, so that the views read it without the watch's imports).
IDLE_EVERY_S = 10.0


class StateError(Exception):
    """state.json is missing or unreadable; the message says which and what to do."""


def user_document(r: UserReport, reasons: bool = True) -> dict:
    """One user's entry (see the module docstring); without ``reasons``, her ``reasons`` are
    ``{}`` (wording them costs a plan: for a reader that shows none, the metrics)."""
    return {
        "uid": r.uid, "name": r.name, "weight": r.weight if type(r.weight) is dict else dict(r.weight),
        "dominant_resource": None if r.dominant_resource is None else r.dominant_resource.name,
        "dominant_share": r.dominant_share, "weighted_share": r.weighted_share,
        "usage": _named(r.usage), "demand": _named(r.demand), "allocation": _named(r.allocation),
        "held": [res.name for res in r.held],
        "evidence": {res.name: {"used": ev.used, "wanted": ev.wanted, "held": ev.held, "speedup": ev.speedup}
                     for res, ev in r.evidence.items()},
        "stall_some_fraction": dict(r.stall_some_fraction), "stall_full_fraction": dict(r.stall_full_fraction),
        "throttled_cores": r.throttled_cores, "memory_guard_bytes": r.memory_guard_bytes,
        "limits": r.limits.to_json() if r.limits else None,
        "planned": r.planned.to_json() if r.planned else None,
        "reasons": {k.name: why for k, why in r.reasons.items()} if r.planned and reasons else {},
        "written": [k.name for k in r.written], "error": r.error,
        "classes": {res.name: {"rate_bits_per_s": c.rate_bits_per_s, "ceil_bits_per_s": c.ceil_bits_per_s}
                    for res, c in r.classes.items()},
    }


def _named(amounts) -> dict[str, float]:
    return {resource.name: value for resource, value in amounts.items()}


#: Users encoded at a time when state.json is written from a document whose users are an
#: iterator: the file's bytes in memory are a chunk's, not the whole document's.
CHUNK_USERS = 256


def state_document(report: TickReport, *, tick: int, time_unix_s: float, interval_s: float, mode: str,
                   backend: str, policy_file: str, users_once: bool = False, reasons: bool = True) -> dict:
    """The whole state.json document for one tick. With ``users_once`` its ``users`` is an
    iterator that builds each user's entry as it is read — once: for one :func:`write_state`
    or one history record, so the document is never whole in memory (~3 KiB a user). Without
    ``reasons``, every user's ``reasons`` is ``{}`` (:func:`user_document`)."""
    entries = map(partial(user_document, reasons=reasons), (r for _, r in sorted(report.users.items())))
    return {
        "version": VERSION, "time_unix_s": time_unix_s, "tick": tick, "interval_s": interval_s,
        "mode": mode, "backend": backend, "policy_file": policy_file,
        "capacity": _named(report.capacity), "saturated": [r.name for r in report.saturated],
        "users": entries if users_once else list(entries),
        "network_error": report.network_error,
    }


def write_state(path: str | Path, document: dict, written: tuple[int, int] | None = None) -> tuple[int, int]:
    """Replace state.json atomically, mode 0644, compact JSON. A document whose ``users`` is an
    iterator (``state_document(..., users_once=True)``) is encoded :data:`CHUNK_USERS` users at a
    time, into the same bytes (but where orjson refuses a chunk, below: that chunk alone is
    spelled by the standard encoder).

    Encoded by orjson: 6.4 µs a user against 16.4 for the standard library's C encoder
    (``benchmarks/bench_daemon.py``'s host, 1,000 users; issue 16) — the same document for any
    JSON reader (floats in their shortest round-trip form, UTF-8). What orjson refuses — a name
    that is not UTF-8 (a passwd entry's bytes, surrogate-escaped), an integer past 64 bits —
    the standard encoder writes (``\\udce9``).

    Nothing is replaced but a drfgov state document (or an empty file): whatever else is at
    ``path`` — the policy file, an admin's document — is left as it is
    (:func:`governor.service.ownfiles.check_ours`, its first bytes read before a write) —
    unless the file there is still the one this process wrote last, ``written`` (what the last
    call returned: its ``(st_dev, st_ino)``; only root writes in the state directory, so the same
    inode is the same document). That read is an open(2) of state.json, which its readers'
    watch (:mod:`governor.service.statereaders`) took for a reader: state.json was written
    every tick, read by nobody but the daemon (the service audit of 2026-11-27). Returns the
    identity of the file written.

    Raises:
        ForeignFile (an OSError): the file at ``path`` is not a state document (nothing written);
            OSError: the file cannot be written; ValueError: a non-finite number (no field holds one).
    """
    # here: the readers (shares, explain, top) need none of it (tempfile, the ownership rules)
    from governor.service.atomic import file_identity, write_atomic
    from governor.service.ownfiles import check_ours

    if written is None or file_identity(path) != written:
        check_ours("state", path)
    users = document.get("users")
    if isinstance(users, (list, type(None))):
        return write_atomic(path, _encoded(document) + b"\n", mode=0o644)
    keys = list(document)
    at = keys.index("users")
    head, tail = _encoded({k: document[k] for k in keys[:at]}), _encoded({k: document[k] for k in keys[at + 1:]})
    return write_atomic(path, _streamed(head, users, tail), mode=0o644)


def _streamed(head: bytes, users, tail: bytes):
    """The bytes of ``{**head, "users": [*users], **tail}`` (each an encoded object), a chunk
    of users at a time."""
    yield head[:-1] + (b',"users":[' if len(head) > 2 else b'"users":[')
    chunk, first = [], True
    for entry in users:
        chunk.append(entry)
        if len(chunk) == CHUNK_USERS:
            yield (b"" if first else b",") + _encoded(chunk)[1:-1]
            chunk, first = [], False
    if chunk:
        yield (b"" if first else b",") + _encoded(chunk)[1:-1]
    yield (b"]," + tail[1:] if len(tail) > 2 else b"]}") + b"\n"


def _encoded(value) -> bytes:
    """``value`` as compact JSON (orjson, or the standard encoder where orjson refuses)."""
    import orjson  # here: the readers (shares, explain, top) need not load it

    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


#: How far ahead of the reader's clock a tick's time may be before its document is stale: on
#: one host the daemon's wall clock at the tick is never ahead of a later reading of the same
#: clock, unless the clock was stepped back since (NTP's step, ``date -s``, a VM restored from a
#: snapshot) or the file is another host's whose clock runs ahead. Its age is then unknown — a
#: tick ago or a day — so the views cannot vouch for it and flag it, as a document too old. A
#: few seconds allow for clocks of two hosts kept by NTP (and match the 5 s allowed the other way).
FUTURE_TOLERANCE_S = 5.0


def staleness(doc: dict, now_unix_s: float | None = None) -> tuple[float, bool]:
    """``(age_s, stale)`` of a state document (checked: :func:`check_document`) at
    ``now_unix_s`` (default: now): its age in seconds (negative when its tick's time is ahead of
    this clock), and whether the views flag it — older than three ticks plus 5 s (the daemon is
    stopped or stuck: a running one replaces it at least every 10 s, and at once for a reader),
    or more than :data:`FUTURE_TOLERANCE_S` ahead of this clock (see there: its age is unknown)."""
    age_s = (time.time() if now_unix_s is None else now_unix_s) - doc["time_unix_s"]
    return age_s, age_s > 3 * doc["interval_s"] + 5 or age_s < -FUTURE_TOLERANCE_S


def read_state(path: str | Path, *, fresh: bool = True) -> dict:
    """The document at ``path``. With ``fresh``, a document more than 1.5 ticks old (the daemon
    writes every 10 s while nobody reads it) is read again once the daemon has replaced it —
    it does at once, seeing this open — waiting at most ``2 × interval_s + 1`` s (30 s at most);
    one older than a writing daemon leaves it (10 s + that wait) is returned at once: the
    daemon is stopped or stuck, and the views show the document's age. One whose tick is more
    than :data:`FUTURE_TOLERANCE_S` ahead of this clock (the clock was stepped back) is waited
    for too: a running daemon writes its latest tick, of the clock as it is now, on this open.
    A fresh document may be a tick behind the daemon.

    Raises:
        StateError: no file (the daemon is not running, or has not finished a tick), or not a
            state document.
    """
    path = Path(path)
    before = _replaced_key(path)
    doc = _load(path)
    if not fresh:
        return doc
    interval_s = doc.get("interval_s")
    time_unix_s = doc.get("time_unix_s")
    if not isinstance(interval_s, (int, float)) or not isinstance(time_unix_s, (int, float)):
        return doc
    age_s, wait_s = time.time() - time_unix_s, min(2 * interval_s + 1, 30.0)
    if -FUTURE_TOLERANCE_S <= age_s <= 1.5 * interval_s + 0.5 or age_s > IDLE_EVERY_S + wait_s + 1:
        return doc
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(0.02)
        if _replaced_key(path) != before:
            try:
                return _load(path)
            except StateError:
                return doc
    return doc


def _replaced_key(path: Path) -> tuple[int, int] | None:
    """(inode, mtime ns) of ``path``, or None: what changes when it is replaced."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


#: The largest state file read (~3 KiB a user: 100,000 users fit).
MAX_STATE_BYTES = 1 << 30


def _load(path: Path) -> dict:
    """The document at ``path``: a regular file (a FIFO or a device would hang or fill memory),
    of JSON in the shape the views read (:func:`_check_shape`). Raises :class:`StateError`."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), "rb", buffering=0) as f:
            _check_regular(f.fileno(), path)  # before a byte is read
            text = f.read(MAX_STATE_BYTES + 1)
        doc = json.loads(text.decode())
    except FileNotFoundError:
        raise StateError(f"{path}: no such file: drfgov run is not running here, or has not finished its "
                         "first ticks (see: systemctl status drfgov)") from None
    except UnicodeDecodeError as exc:
        raise StateError(f"{path}: not UTF-8 text (byte {exc.start}): not a drfgov state document") from None
    except json.JSONDecodeError as exc:
        raise StateError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}): "
                         "not a drfgov state document") from None
    except ValueError:  # the one other ValueError of json.loads: int()'s digit limit
        raise StateError(f"{path}: a number of over 4,300 digits: not a drfgov state document") from None
    except RecursionError:
        raise StateError(f"{path}: JSON nested too deep: not a drfgov state document") from None
    except OSError as exc:
        raise StateError(f"{path}: unreadable state: {exc.strerror or exc}") from None
    problem = _check_top(doc)
    if problem:
        raise StateError(f"{path}: not a drfgov state document (version {VERSION}): {problem}")
    return doc


def _check_top(doc) -> str | None:
    """What of ``doc``'s top level is not a state document's — an object of this
    :data:`VERSION` with a list of ``users`` — naming the field and what was expected; or None."""
    if not isinstance(doc, dict):
        return f"expected a JSON object, got {_shown(doc)}"
    if doc.get("version") != VERSION:
        return f"version: expected {VERSION}, got {_shown(doc['version']) if 'version' in doc else 'nothing'}"
    if not isinstance(doc.get("users"), list):
        return f"users: expected a list of users, got {_shown(doc['users']) if 'users' in doc else 'nothing'}"
    return None


def _shown(value) -> str:
    """A JSON value in a message: a number, true/false or null as written, a string's first 40
    characters, else its kind (a whole object may be a GiB)."""
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    return json.dumps(value[:40]) if isinstance(value, str) else json.dumps(value)[:40]


def _check_regular(fd: int, path: Path) -> None:
    """Raise :class:`StateError` unless ``fd`` is a regular file of at most
    :data:`MAX_STATE_BYTES` (a FIFO or a device would hang or fill memory; a directory fails
    its open: IsADirectoryError)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise StateError(f"{path}: not a regular file: not a drfgov state document")
    if st.st_size > MAX_STATE_BYTES:
        raise StateError(f"{path}: {st.st_size} bytes, over {MAX_STATE_BYTES}: not a drfgov state document")


def check_document(doc: dict, path: str | Path) -> dict:
    """``doc`` (read from ``path``) when it holds every field the views read, of its type
    (the shape in the module docstring) and of a value the daemon could have written
    (:func:`_check_values`), so that a file given with ``--state`` is refused in one line
    rather than failing in a view.

    Raises:
        StateError: naming the first field at fault (``users[3].weighted_share``).
    """
    problem = _check_shape(doc) or _check_values(doc)
    if problem:
        raise StateError(f"{path}: not a drfgov state document (version {VERSION}): {problem}")
    return doc


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _amounts(v) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and _number(x) for k, x in v.items())


def _optional(check):
    return lambda v: v is None or check(v)


_TEXT = lambda v: isinstance(v, str)  # noqa: E731
_TEXTS = lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)  # noqa: E731
_MAPPING = lambda v: isinstance(v, dict)  # noqa: E731
#: What the views read of a document, and of each of its users: field → check.
_DOCUMENT_FIELDS = {"time_unix_s": _number, "tick": _number, "interval_s": _number, "mode": _TEXT, "backend": _TEXT,
                    "capacity": _amounts, "saturated": _TEXTS, "network_error": _optional(_TEXT)}
_USER_FIELDS = {"uid": lambda v: isinstance(v, int) and not isinstance(v, bool), "name": _TEXT, "weight": _amounts,
                "dominant_resource": _optional(_TEXT), "dominant_share": _number, "weighted_share": _number,
                "demand": _amounts, "allocation": _amounts}
#: What the views read of a user when it is there: field → check.
_USER_OPTIONAL = {"held": _TEXTS, "limits": _optional(_MAPPING), "planned": _optional(_MAPPING),
                  "reasons": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
                  "written": _TEXTS, "error": _optional(_TEXT), "classes": _MAPPING,
                  "memory_guard_bytes": _optional(_number)}


def _check_shape(doc: dict) -> str | None:
    """The first field of ``doc`` the views would fail on ("users[3].weighted_share: …"), or None."""
    for key, check in _DOCUMENT_FIELDS.items():
        if not check(doc.get(key)):
            return f"{key}: missing or of the wrong type"
    for i, user in enumerate(doc["users"]):
        if not isinstance(user, dict):
            return f"users[{i}]: not an object"
        for key, check in _USER_FIELDS.items():
            if not check(user.get(key)):
                return f"users[{i}].{key}: missing or of the wrong type"
        for key, check in _USER_OPTIONAL.items():
            if key in user and not check(user[key]):
                return f"users[{i}].{key}: of the wrong type"
        if user.get("reasons") and not isinstance(user.get("planned"), dict):
            return f"users[{i}].planned: missing beside her reasons"
    return None


#: The latest time a document may be of: the end of year 9999 (time.localtime's range on
#: every platform; 1e300 was an OverflowError in the views).
TIME_MAX_UNIX_S = 253_402_300_799


def _check_values(doc: dict) -> str | None:
    """The first field of ``doc`` (of the right shape, :func:`_check_shape`) whose value the
    daemon could not have written, or None: numbers finite and in range (the one number rule,
    :func:`~governor.config.numbers.check_number`; ``interval_s`` by the policy's own rule),
    resource ids that parse (:meth:`~governor.control.resources.Resource.parse`), limits the
    kernel would hold (:meth:`~governor.enforce.model.LimitSet.from_json`: cpu.max two tokens
    and so on), her HTB classes on links with their rates."""
    from governor.config.numbers import check_interval, check_number  # no PyYAML: a view loads none
    from governor.control.resources import Resource
    from governor.enforce.model import LimitSet

    def problem(key: str, check, value) -> str | None:
        try:
            check(value)
        except ValueError as exc:
            return f"{key}: {exc}"
        return None

    def amounts(value: dict) -> None:
        for resource, x in value.items():
            Resource.parse(resource)
            try:
                check_number(x)
            except ValueError as exc:
                raise ValueError(f"{resource}: {exc}") from None

    def classes(value: dict) -> None:
        for resource, cls in value.items():
            if Resource.parse(resource).kind != "net":
                raise ValueError(f"{resource}: expected a link (net:IF:tx or net:IF:rx)")
            if not isinstance(cls, dict):
                raise ValueError(f"{resource}: expected an object")
            for key in ("rate_bits_per_s", "ceil_bits_per_s"):
                try:
                    check_number(cls.get(key))
                except ValueError as exc:
                    raise ValueError(f"{resource}.{key}: {exc}") from None

    def limits(value) -> None:
        if value is None:
            return
        cpu_max = value.get("cpu.max")
        if not isinstance(cpu_max, str) or len(cpu_max.split()) != 2:
            raise ValueError(f"cpu.max: expected 'QUOTA PERIOD' such as 'max 100000', got {cpu_max!r:.60}")
        LimitSet.from_json(value)

    def share(value) -> None:
        check_number(value)

    for key, check in (("time_unix_s", lambda v: check_number(v, maximum=TIME_MAX_UNIX_S)),
                       ("tick", lambda v: check_number(v, whole=True, maximum=2**63 - 1)),
                       ("interval_s", check_interval), ("capacity", amounts)):
        found = problem(key, check, doc[key])
        if found:
            return found
    for i, user in enumerate(doc["users"]):
        checks = [("uid", lambda v: check_number(v, whole=True, maximum=2**32 - 1)),
                  ("weight", lambda w: [check_number(x, strict=True) for x in w.values()]),
                  ("dominant_resource", lambda v: v is None or Resource.parse(v)),
                  ("dominant_share", share), ("weighted_share", share),
                  ("demand", amounts), ("allocation", amounts)]
        checks += [(key, check) for key, check in (("limits", limits), ("planned", limits), ("classes", classes))
                   if key in user]
        for key, check in checks:
            found = problem(f"users[{i}].{key}", check, user[key])
            if found:
                return found
    return None
