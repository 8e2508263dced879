"""Simulation traces: jobs of tasks submitted by users, in JSON lines or CSV.

**JSON lines** (``.jsonl``/``.json``): one object per line; blank lines and lines starting
with ``#`` are ignored. An optional first-line *header* sets the cluster and defaults::

    {"cluster": {"machines": 48, "capacity": {"cpu": 8, "memory": 6}},
     "duration_s": 600, "policies": ["drf", "slots:3", "cpu-fair"], "weights": {"small1": 2}}

and every other line is a *job*::

    {"submit_s": 0, "user": "small1", "tasks": 80, "duration_s": 30,
     "demand": {"cpu": 1, "memory": 0.5}, "repeat": true}

``tasks`` tasks, each needing ``demand`` (per resource; names as in the cluster capacity)
for ``duration_s`` seconds at full speed. ``repeat: true`` makes the user submit the same job
again the moment it completes (a closed loop, as in the paper's §7.2 experiment).

**CSV** (``.csv``): a header row ``submit_s,user,tasks,duration_s,repeat,RES1,RES2,…`` — every
column after ``repeat`` is a resource's per-task demand; the cluster comes from the command
line (``--machines``, ``--capacity``).

Errors name the file, line and field (:class:`governor.config.source.InputError`).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

from governor.config.source import InputError, check_number

__all__ = ["Cluster", "Job", "Trace", "load_trace"]


@dataclass(frozen=True)
class Cluster:
    """``machines`` identical machines of ``capacity`` (resource → amount)."""

    machines: int
    capacity: dict[str, float]


@dataclass(frozen=True)
class Job:
    submit_s: float
    user: str
    tasks: int
    duration_s: float
    demand: tuple[float, ...]  # per resource, in the cluster's resource order
    repeat: bool = False


@dataclass
class Trace:
    jobs: list[Job]
    resources: list[str]
    cluster: Cluster | None = None
    duration_s: float | None = None
    policies: list[str] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)


JOB_KEYS = ("submit_s", "user", "tasks", "duration_s", "demand", "repeat")
HEADER_KEYS = ("cluster", "duration_s", "policies", "weights")


def load_trace(path: str | Path) -> Trace:
    """Read a trace (format by extension: ``.csv``, else JSON lines).

    Raises:
        InputError: unreadable file or a bad line (file, line and field named).
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(str(path), None, "", f"cannot read: {exc.strerror or exc}") from None
    return _csv(path, text) if path.suffix.lower() == ".csv" else _jsonl(path, text)


def _err(path: Path, line: int, field_name: str, expected: str) -> InputError:
    return InputError(str(path), line, field_name, expected)


def _number(path, line, name, value, minimum=0.0, strict=False, whole=False) -> float:
    try:
        return check_number(value, minimum=minimum, strict=strict, whole=whole)
    except ValueError as exc:
        raise _err(path, line, name, str(exc)) from None


def _jsonl(path: Path, text: str) -> Trace:
    trace = Trace([], [])
    pending: list[tuple[int, dict]] = []
    for no, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise InputError(str(path), no, "", f"not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise InputError(str(path), no, "", "expected a JSON object per line")
        if "cluster" in record or not ({"user", "tasks"} & record.keys()):
            if pending or trace.cluster is not None:
                raise InputError(str(path), no, "", "the header (cluster, duration_s, policies) must be the first line")
            _header(path, no, record, trace)
        else:
            pending.append((no, record))
    if trace.cluster is not None:
        trace.resources = list(trace.cluster.capacity)
    for no, record in pending:
        trace.jobs.append(_job(path, no, record, trace))
    if not trace.jobs:
        raise InputError(str(path), None, "", "no jobs in the trace")
    return trace


def _header(path: Path, no: int, record: dict, trace: Trace) -> None:
    for key in record:
        if key not in HEADER_KEYS:
            raise _err(path, no, key, f"unknown header key; expected one of: {', '.join(HEADER_KEYS)}")
    cluster = record.get("cluster")
    if cluster is not None:
        if not isinstance(cluster, dict) or not isinstance(cluster.get("capacity"), dict) or not cluster["capacity"]:
            raise _err(path, no, "cluster", "expected {machines: N, capacity: {RES: amount, ...}}")
        machines = int(_number(path, no, "cluster.machines", cluster.get("machines"), 0, strict=True, whole=True))
        capacity = {str(r): _number(path, no, f"cluster.capacity.{r}", v, strict=True) for r, v in cluster["capacity"].items()}
        trace.cluster = Cluster(machines, capacity)
    if "duration_s" in record:
        trace.duration_s = _number(path, no, "duration_s", record["duration_s"], strict=True)
    policies = record.get("policies", [])
    if not isinstance(policies, list) or not all(isinstance(p, str) for p in policies):
        raise _err(path, no, "policies", "expected a list of policy names")
    trace.policies = list(policies)
    weights = record.get("weights", {})
    if not isinstance(weights, dict):
        raise _err(path, no, "weights", "expected {user: weight}")
    trace.weights = {str(u): _number(path, no, f"weights.{u}", w, strict=True) for u, w in weights.items()}


def _job(path: Path, no: int, record: dict, trace: Trace) -> Job:
    for key in record:
        if key not in JOB_KEYS:
            raise _err(path, no, key, f"unknown job key; expected one of: {', '.join(JOB_KEYS)}")
    demand = record.get("demand")
    if not isinstance(demand, dict) or not demand:
        raise _err(path, no, "demand", "expected {RES: amount per task, ...}")
    if not trace.resources:
        trace.resources = list(demand)  # no header: the first job names the resources
    unknown = [r for r in demand if r not in trace.resources]
    if unknown:
        raise _err(path, no, f"demand.{unknown[0]}", f"unknown resource; the cluster has: {', '.join(trace.resources)}")
    user = record.get("user")
    if not isinstance(user, str) or not user:
        raise _err(path, no, "user", f"expected a user name, got {user!r}")
    repeat = record.get("repeat", False)
    if not isinstance(repeat, bool):
        raise _err(path, no, "repeat", f"expected true or false, got {repeat!r}")
    return Job(
        submit_s=_number(path, no, "submit_s", record.get("submit_s", 0.0)),
        user=user,
        tasks=int(_number(path, no, "tasks", record.get("tasks"), 0, strict=True, whole=True)),
        duration_s=_number(path, no, "duration_s", record.get("duration_s"), strict=True),
        demand=tuple(_number(path, no, f"demand.{r}", demand.get(r, 0.0)) for r in trace.resources),
        repeat=repeat,
    )


CSV_COLUMNS = ("submit_s", "user", "tasks", "duration_s", "repeat")


def _csv(path: Path, text: str) -> Trace:
    rows = list(csv.reader(text.splitlines()))
    if not rows or tuple(c.strip() for c in rows[0][:5]) != CSV_COLUMNS or len(rows[0]) < 6:
        raise InputError(str(path), 1, "", f"expected the header {','.join(CSV_COLUMNS)},RES1[,RES2…]")
    header = [c.strip() for c in rows[0]]  # "submit_s, user, …" with blanks after the commas is fine
    resources = header[5:]
    trace = Trace([], resources)
    for no, row in enumerate(rows[1:], 2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(header):
            raise InputError(str(path), no, "", f"expected {len(header)} columns, got {len(row)}")
        values = dict(zip(header, row))
        record = {"user": row[1].strip(), "repeat": row[4].strip().lower() in ("1", "true", "yes"),
                  "demand": {r: _csv_number(path, no, r, values[r]) for r in resources}}
        for key in ("submit_s", "tasks", "duration_s"):
            record[key] = _csv_number(path, no, key, values[key])
        trace.jobs.append(_job(path, no, record, trace))
    if not trace.jobs:
        raise InputError(str(path), None, "", "no jobs in the trace")
    return trace


def _csv_number(path: Path, no: int, name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _err(path, no, name, f"expected a number, got {text!r}") from None
