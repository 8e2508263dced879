"""Simulation traces: jobs of tasks submitted by users, in JSON lines or CSV.

**JSON lines** (``.jsonl``/``.json``): one object per line; blank lines and lines starting
with ``#`` are ignored. An optional first-line *header* sets the cluster and defaults::

    {"cluster": {"machines": 48, "capacity": {"cpu": 8, "memory": 6}},
     "duration_s": 600, "policies": ["drf", "slots:3", "cpu-fair"], "weights": {"small1": 2}}

and every other line is a *job*::

    {"submit_s": 0, "user": "small1", "tasks": 80, "duration_s": 30,
     "demand": {"cpu": 1, "memory": 0.5}, "repeat": true}

``tasks`` tasks, each needing ``demand`` (per resource) for ``duration_s`` seconds at full
speed. ``repeat: true`` makes the user submit the same job again the moment it completes (a
closed loop, as in the paper's §7.2 experiment).

**CSV** (``.csv``): a header row ``submit_s,user,tasks,duration_s,repeat,RES1,RES2,…`` — every
column after ``repeat`` is a resource's per-task demand, each column named once; the cluster
comes from the command line (``--machines``, ``--capacity``).

**The trace's resources** (:attr:`Trace.resources`) are the header cluster's capacity, else
(JSON lines without one) every resource a job names, in the order first named, else (CSV) the
resource columns. A job's demand for a resource it does not name is 0. A cluster given on the
command line must have exactly these resources, in any order.

Errors name the file, line and field (:class:`governor.config.source.InputError`).

**Bounds.** A trace is read within the bounds of every input file
(:func:`governor.config.source.read_text`: a regular UTF-8 file of at most 16 MiB) and each
line within the number bounds below; :func:`check_work` then refuses a simulation that could
not finish in bounded time and memory, before any work:

=============================  ===============  =============================================
what                           at most          why
=============================  ===============  =============================================
machines                       100,000          per-machine state; first-fit scans them
machines × resources           1,000,000        per-machine, per-resource state (~100 B each)
resources                      100              every task start and finish is O(resources)
distinct users                 10,000           a share series per user; CEEI over users
tasks of one job               10^7             as all task runs (below)
task runs (repeats counted)    10^7             ≈ 2·10^7 task events: minutes per policy at the
                                                engine's 10^4–10^5 events/s
task runs × machines           10^10            a first-fit scan costs ~10 ns per machine
times (submit, task, horizon)  10^9 s           ~32 years; samples are thinned to ≤ 1,000
amounts (capacity, demand)     10^18            as problem files'
weights                        10^-6 … 10^6     as everywhere
names (users, policies)        256 characters   printable text
=============================  ===============  =============================================

Task runs count a ``repeat`` job as ``tasks × (1 + ⌊(horizon − submit_s) / duration_s⌋)``:
no task can run faster than ``duration_s``, so no job can complete more often.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from governor.config.source import HugeNumber, InputError, check_number, check_weight, read_text

__all__ = ["Cluster", "Job", "Trace", "check_work", "load_trace"]

MAX_MACHINES = 100_000
MAX_CELLS = 1_000_000  # machines × resources
MAX_RESOURCES = 100
MAX_USERS = 10_000
MAX_TASK_RUNS = 10_000_000
MAX_SCAN = 10**10  # task runs × machines
MAX_TIME_S = 1e9
AMOUNT_MAX = 1e18
MAX_NAME = 256


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
    line: int | None = field(default=None, compare=False, repr=False)  # where the trace gives it


@dataclass
class Trace:
    jobs: list[Job]
    resources: list[str]  # the header cluster's, else those the jobs name (JSON lines), else the CSV columns
    cluster: Cluster | None = None
    duration_s: float | None = None
    policies: list[str] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)
    file: str = ""
    cluster_line: int | None = None  # the header's line


JOB_KEYS = ("submit_s", "user", "tasks", "duration_s", "demand", "repeat")
HEADER_KEYS = ("cluster", "duration_s", "policies", "weights")
CLUSTER_KEYS = ("machines", "capacity")


def load_trace(path: str | Path) -> Trace:
    """Read a trace (format by extension: ``.csv``, else JSON lines).

    Raises:
        InputError: unreadable file or a bad line (file, line and field named): among them a job
            naming a resource the header's cluster does not have, more than 100 resources, or a
            CSV column named twice.
    """
    path = Path(path)
    text = read_text(path, what="traces")
    trace = _csv(path, text) if path.suffix.lower() == ".csv" else _jsonl(path, text)
    trace.file = str(path)
    users: set[str] = set()
    for job in trace.jobs:
        users.add(job.user)
        if len(users) > MAX_USERS:
            raise InputError(str(path), job.line, "user", f"the {MAX_USERS + 1:,}th distinct user: expected at most "
                                                          f"{MAX_USERS:,} users in a trace")
    return trace


def _err(path: Path, line: int, field_name: str, expected: str) -> InputError:
    return InputError(str(path), line, field_name, expected)


def _number(path, line, name, value, minimum=0.0, strict=False, whole=False, maximum=math.inf) -> float:
    try:
        return check_number(value, minimum=minimum, strict=strict, whole=whole, maximum=maximum)
    except ValueError as exc:
        raise _err(path, line, name, str(exc)) from None


def _weight(path, line, name, value) -> float:
    try:
        return check_weight(value)
    except ValueError as exc:
        raise _err(path, line, name, str(exc)) from None


def _name(path, line, field_name, value, what) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME or not value.isprintable():
        shown = repr(value) if isinstance(value, str) and len(value) <= 60 else f"{type(value).__name__} of " \
            f"{len(value):,} characters" if isinstance(value, str) else repr(value)[:60]
        raise _err(path, line, field_name, f"expected {what} (printable text of 1–{MAX_NAME} characters), got {shown}")
    return value


class _Duplicate(Exception):
    def __init__(self, key):
        self.key = key


def _pairs(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return out


def _huge_int(digits: str) -> int | HugeNumber:
    return HugeNumber(len(digits.lstrip("-")), digits.startswith("-")) if len(digits) > 4300 else int(digits)


def _json_line(path: Path, no: int, raw: str):
    try:
        return json.loads(raw, object_pairs_hook=_pairs)
    except _Duplicate as exc:
        raise _err(path, no, str(exc.key)[:200], "duplicate key") from None
    except RecursionError:
        raise InputError(str(path), no, "", "not JSON we read: nested too deep") from None
    except json.JSONDecodeError as exc:
        raise InputError(str(path), no, "", f"not JSON: {exc}") from None
    except ValueError:  # an integer beyond Python's conversion limit: the field's check refuses it
        return json.loads(raw, object_pairs_hook=_pairs, parse_int=_huge_int)


def _jsonl(path: Path, text: str) -> Trace:
    trace = Trace([], [])
    pending: list[tuple[int, dict]] = []
    for no, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        record = _json_line(path, no, raw)
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
        if trace.cluster is None:
            _named_resources(path, no, record.get("demand"), trace.resources)
        trace.jobs.append(_job(path, no, record, trace))
    if not trace.jobs:
        raise InputError(str(path), None, "", "no jobs in the trace")
    if trace.cluster is None:  # a job read before a later one named more resources needs none of those
        width = len(trace.resources)
        trace.jobs = [replace(j, demand=j.demand + (0.0,) * (width - len(j.demand))) for j in trace.jobs]
    return trace


def _named_resources(path: Path, no: int, demand, resources: list[str]) -> None:
    """No cluster in the header: add the resources line ``no``'s ``demand`` names first to
    ``resources`` (the trace's: every resource a job names, in the order first named).

    Raises:
        InputError: a name that is not printable text of 1–256 characters, or more than
            :data:`MAX_RESOURCES` resources in the trace.
    """
    if not isinstance(demand, dict):
        return  # _job refuses it
    for r in demand:
        if r not in resources:
            if len(resources) == MAX_RESOURCES:
                raise _err(path, no, f"demand.{r}", f"one resource too many: expected at most {MAX_RESOURCES} in a trace")
            resources.append(_name(path, no, "demand", r, "a resource name"))


def _header(path: Path, no: int, record: dict, trace: Trace) -> None:
    for key in record:
        if key not in HEADER_KEYS:
            raise _err(path, no, key, f"unknown header key; expected one of: {', '.join(HEADER_KEYS)}")
    trace.cluster_line = no
    cluster = record.get("cluster")
    if cluster is not None:
        if not isinstance(cluster, dict) or not isinstance(cluster.get("capacity"), dict) or not cluster["capacity"]:
            raise _err(path, no, "cluster", "expected {machines: N, capacity: {RES: amount, ...}}")
        for key in cluster:
            if key not in CLUSTER_KEYS:
                raise _err(path, no, f"cluster.{key}",
                           f"unknown cluster key; expected one of: {', '.join(CLUSTER_KEYS)}")
        machines = int(_number(path, no, "cluster.machines", cluster.get("machines"), 0, strict=True, whole=True,
                               maximum=MAX_MACHINES))
        if len(cluster["capacity"]) > MAX_RESOURCES:
            raise _err(path, no, "cluster.capacity", f"expected at most {MAX_RESOURCES} resources, "
                                                     f"got {len(cluster['capacity']):,}")
        capacity = {_name(path, no, "cluster.capacity", str(r), "a resource name"):
                    _number(path, no, f"cluster.capacity.{r}", v, strict=True, maximum=AMOUNT_MAX)
                    for r, v in cluster["capacity"].items()}
        trace.cluster = Cluster(machines, capacity)
    if "duration_s" in record:
        trace.duration_s = _number(path, no, "duration_s", record["duration_s"], strict=True, maximum=MAX_TIME_S)
    policies = record.get("policies", [])
    if not isinstance(policies, list) or len(policies) > MAX_RESOURCES:
        raise _err(path, no, "policies", f"expected a list of at most {MAX_RESOURCES} policy names")
    trace.policies = [_name(path, no, f"policies.{i}", p, "a policy name") for i, p in enumerate(policies)]
    weights = record.get("weights", {})
    if not isinstance(weights, dict) or len(weights) > MAX_USERS:
        raise _err(path, no, "weights", f"expected {{user: weight}} for at most {MAX_USERS:,} users")
    trace.weights = {str(u): _weight(path, no, f"weights.{u}", w) for u, w in weights.items()}


def _job(path: Path, no: int, record: dict, trace: Trace) -> Job:
    for key in record:
        if key not in JOB_KEYS:
            raise _err(path, no, key, f"unknown job key; expected one of: {', '.join(JOB_KEYS)}")
    demand = record.get("demand")
    if not isinstance(demand, dict) or not demand:
        raise _err(path, no, "demand", "expected {RES: amount per task, ...}")
    unknown = [r for r in demand if r not in trace.resources]
    if unknown:
        raise _err(path, no, f"demand.{unknown[0]}", f"unknown resource; the cluster has: {', '.join(trace.resources)}")
    user = _name(path, no, "user", record.get("user"), "a user name")
    repeat = record.get("repeat", False)
    if not isinstance(repeat, bool):
        raise _err(path, no, "repeat", f"expected true or false, got {repeat!r}"[:200])
    return Job(
        submit_s=_number(path, no, "submit_s", record.get("submit_s", 0.0), maximum=MAX_TIME_S),
        user=user,
        tasks=int(_number(path, no, "tasks", record.get("tasks"), 0, strict=True, whole=True, maximum=MAX_TASK_RUNS)),
        duration_s=_number(path, no, "duration_s", record.get("duration_s"), strict=True, maximum=MAX_TIME_S),
        demand=tuple(_number(path, no, f"demand.{r}", demand.get(r, 0.0), maximum=AMOUNT_MAX) for r in trace.resources),
        repeat=repeat,
        line=no,
    )


CSV_COLUMNS = ("submit_s", "user", "tasks", "duration_s", "repeat")


def _csv(path: Path, text: str) -> Trace:
    lines = text.splitlines()
    reader = csv.reader(lines)
    rows = []
    try:
        for row in reader:
            rows.append(row)
    except csv.Error as exc:
        raise InputError(str(path), reader.line_num, "", f"not valid CSV: {exc}") from None
    if not rows or tuple(c.strip() for c in rows[0][:5]) != CSV_COLUMNS or len(rows[0]) < 6:
        raise InputError(str(path), 1, "", f"expected the header {','.join(CSV_COLUMNS)},RES1[,RES2…]")
    header = [c.strip() for c in rows[0]]  # "submit_s, user, …" with blanks after the commas is fine
    resources = header[5:]
    if len(resources) > MAX_RESOURCES:
        raise InputError(str(path), 1, "", f"expected at most {MAX_RESOURCES} resource columns, got {len(resources):,}")
    first: dict[str, int] = {}
    for column, name in enumerate(header, 1):
        if column > len(CSV_COLUMNS):
            _name(path, 1, f"column {column}", name, "a resource name")
        if name in first:
            raise _err(path, 1, name, f"column {column}: listed twice (first as column {first[name]}); "
                                      f"expected each column once")
        first[name] = column
    trace = Trace([], resources)
    for no, row in enumerate(rows[1:], 2):
        if not row or not "".join(row).strip():
            continue
        if len(row) != len(header):
            raise InputError(str(path), no, "", f"expected {len(header)} columns, got {len(row)}")
        values = dict(zip(header, row))
        record = {"user": row[1].strip(), "repeat": _csv_flag(path, no, "repeat", 5, row[4]),
                  "demand": {r: _csv_number(path, no, r, values[r]) for r in resources}}
        for key in ("submit_s", "tasks", "duration_s"):
            record[key] = _csv_number(path, no, key, values[key])
        trace.jobs.append(_job(path, no, record, trace))
    if not trace.jobs:
        raise InputError(str(path), None, "", "no jobs in the trace")
    return trace


#: What a CSV flag column reads as (case and surrounding blanks aside); anything else is refused.
CSV_FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def _csv_flag(path: Path, no: int, name: str, column: int, text: str) -> bool:
    """A yes/no column: one of :data:`CSV_FLAGS` (a typo such as ``ture`` is not read as false)."""
    flag = CSV_FLAGS.get(text.strip().lower())
    if flag is None:
        shown = repr(text) if len(text) <= 60 else f"text of {len(text):,} characters"
        raise _err(path, no, name, f"column {column}: expected one of 1, 0, true, false, yes, no, got {shown}")
    return flag


def _csv_number(path: Path, no: int, name: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        shown = repr(text) if len(text) <= 60 else f"text of {len(text):,} characters"
        raise _err(path, no, name, f"expected a number, got {shown}") from None


def check_work(trace: Trace, cluster: Cluster, horizon_s: float | None, *, machines_from: str = "cluster.machines",
               capacity_from: str = "cluster.capacity", horizon_from: str = "duration_s") -> None:
    """Refuse a simulation of ``trace`` on ``cluster`` until ``horizon_s`` that would not finish
    in bounded time and memory (the module's table of bounds). ``*_from`` name where each value
    came from (a header field, or an option such as ``--machines``).

    Raises:
        InputError: naming the file, and the line and field at fault; or, for a value from an
            option, the option alone (``--machines: …``: the mistake is not the file's).
    """
    file = trace.file or "<trace>"

    def fail(line, field_name, message):
        return InputError("" if field_name.startswith("--") else file, line, field_name, message)

    header_line = trace.cluster_line if machines_from.startswith("cluster") else None
    try:
        check_number(cluster.machines, minimum=1, whole=True, maximum=MAX_MACHINES)
    except ValueError as exc:
        raise fail(header_line, machines_from, str(exc)) from None
    resources = len(cluster.capacity)
    if resources > MAX_RESOURCES or cluster.machines * resources > MAX_CELLS:
        raise fail(header_line, machines_from, f"{cluster.machines:,} machines × {resources} resources: expected at most "
                                               f"{MAX_CELLS:,} (and {MAX_RESOURCES} resources)")
    for r, amount in cluster.capacity.items():
        try:
            check_number(amount, strict=True, maximum=AMOUNT_MAX)
        except ValueError as exc:
            raise fail(header_line if capacity_from.startswith("cluster") else None, f"{capacity_from}.{r}", str(exc)) \
                from None
    users = {job.user for job in trace.jobs}
    for user in trace.weights:
        if user not in users:  # a weight nobody can use: a misspelt name, most likely
            raise fail(trace.cluster_line, f"weights.{user}", f"no job of user {user!r} in the trace; its users: "
                                                               f"{', '.join(sorted(users)[:10])}"
                                                               f"{', …' if len(users) > 10 else ''}")
    if horizon_s is not None:
        try:
            check_number(horizon_s, strict=True, maximum=MAX_TIME_S)
        except ValueError as exc:
            raise fail(trace.cluster_line if horizon_from == "duration_s" else None, horizon_from, str(exc)) from None
    runs, worst, worst_runs = 0.0, None, -1.0
    for job in trace.jobs:
        if horizon_s is not None and job.submit_s > horizon_s:
            continue
        n = float(job.tasks)
        if job.repeat and horizon_s is not None:
            n *= 1.0 + math.floor((horizon_s - job.submit_s) / job.duration_s)
        runs += n
        if n > worst_runs:
            worst, worst_runs = job, n
    if runs > MAX_TASK_RUNS:
        why = " (tasks × repeats within the horizon)" if worst is not None and worst.repeat else ""
        raise fail(worst.line, "tasks", f"the trace would run up to {runs:.3g} tasks, this job {worst_runs:.3g}{why}: "
                                        f"expected at most {MAX_TASK_RUNS:,} in all")
    if runs * cluster.machines > MAX_SCAN:
        raise fail(header_line, machines_from, f"{runs:.3g} task runs × {cluster.machines:,} machines: expected at most "
                                               f"{MAX_SCAN:.0e} (each placement may scan every machine)")
