"""A corpus of hostile input files, and a runner that feeds each to the installed ``drfgov``.

The project's rule for bad input: one line on stderr, ``drfgov: error: FILE:LINE: FIELD: …``
(or ``drfgov: error: FILE: …`` when no line applies), exit status 2, within bounded time —
never a traceback, a hang, or a file accepted that would fail later. Each :class:`Case` builds
its files in a scratch directory and returns the command's arguments; ``expect`` is a piece of
text the one error line must contain (what the case is about).

Run as a script for the table of issue 15 (command, cases, clean exit 2, accepted, traceback,
hang, other)::

    .venv/bin/python tests/cli/hostile.py [--drfgov PATH] [-v]

``tests/cli/test_hostile.py`` runs every case through the installed command with a 10 s timeout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 10.0
MAX_LINE = 1000  # characters in the one error line: a message quotes at most a bounded part of the input
NOBODY = 65534


@dataclass(frozen=True)
class Case:
    command: str  # check-config | allocate | compare | simulate
    name: str
    build: Callable[[Path], list[str]]  # scratch dir → arguments after the command name
    expect: str  # text the error line must contain
    needs_root: bool = False  # chown to another user


def _write(directory: Path, name: str, content: str | bytes) -> Path:
    path = directory / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _file(name: str, content: str | bytes, *extra: str) -> Callable[[Path], list[str]]:
    """A case whose input is one file with ``content``."""
    return lambda d: [str(_write(d, name, content)), *extra]


def _fifo(name: str) -> Callable[[Path], list[str]]:
    def build(d: Path) -> list[str]:
        path = d / name
        os.mkfifo(path)
        return [str(path)]
    return build


def _big(name: str, size: int) -> Callable[[Path], list[str]]:
    """A file of ``size`` bytes of comments (YAML and JSON-lines skip them)."""
    def build(d: Path) -> list[str]:
        path = d / name
        line = b"# " + b"x" * 1021 + b"\n"
        with path.open("wb") as f:
            for _ in range(size // len(line) + 1):
                f.write(line)
        return [str(path)]
    return build


# -- YAML/JSON documents shared by the policy and problem cases ----------------------------------------

def _laughs(levels: int = 9, where: str = "x") -> str:
    """A billion-laughs alias bomb: 9 lists of 9 aliases of the level below, 9^9 leaves."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + f"\n{where}: *a{levels - 1}\n"


DEEP = 50_000
BIGNUM = "1" * 400
HUGENUM = "1" * 5000  # beyond Python's 4,300-digit int conversion limit

POLICY_BAD_TEXT = [  # (name, text, what the error must mention)
    ("billion-laughs alias bomb", _laughs(), "alias"),
    ("recursive anchor", "governed:\n  exempt_users: &a [alice, *a]\n", "alias"),
    ("50,000-deep flow nesting", "governed: {exempt_users: " + "[" * DEEP + "]" * DEEP + "}\n", "nest"),
    ("50,000-deep mapping nesting", "weights: " + "{a: " * DEEP + "1" + "}" * DEEP + "\n", "nest"),
    ("<< merge key", "weights:\n  users: &u {alice: 2}\n  groups:\n    <<: *u\n", "merge"),
    ("bad !!binary", "state_path: !!binary 'not base64 @@@'\n", "tag"),
    ("!!python/object/apply", "mode: !!python/object/apply:os.system ['true']\n", "tag"),
    ("custom !vault tag", "mode: !vault abc\n", "tag"),
    ("!!float on text", "interval_s: !!float abc\n", "interval_s"),
    ("!!set", "governed:\n  exempt_users: !!set {alice, bob}\n", "tag"),
    ("0x_ integer", "interval_s: 0x_\n", "interval_s"),
    ("._ float", "interval_s: ._\n", "interval_s"),
    ("timestamp 2001-13-45", "interval_s: 2001-13-45\n", "interval_s"),
    # the key stays the text as written (and a ':' in a user name is refused since the policy audit)
    ("timestamp key 2001-13-45", "weights:\n  users:\n    2001-13-45 12:00:00: 2\n  default: 0\n",
     "got '2001-13-45 12:00:00'"),
    ("valid date where a number goes", "interval_s: 2001-12-14\n", "interval_s"),
    ("400-digit interval_s", f"interval_s: {BIGNUM}\n", "interval_s"),
    ("400-digit IEC bytes", f"memory:\n  margin_bytes: {BIGNUM}MiB\n", "memory.margin_bytes"),
    ("5,000-digit integer", f"interval_s: {HUGENUM}\n", "interval_s"),
    ("non-UTF-8 byte", b"mode: enforce\n# caf\xe9\ninterval_s: 1\n", "UTF-8"),
    ("UTF-16 file", "mode: enforce\n".encode("utf-16"), "UTF-8"),
    ("duplicate key", "interval_s: 1\nmode: enforce\ninterval_s: 2\n", "duplicate"),
    ("margin_bytes above 2^64", f"memory:\n  margin_bytes: {2**64 + 1}\n", "memory.margin_bytes"),
    ("high_step_bytes 2^70", f"memory:\n  high_step_bytes: {2**70}\n", "memory.high_step_bytes"),
    ("interval_s 1e300", "interval_s: 1e300\n", "interval_s"),
    ("reserve.memory_bytes above this host's memory", "reserve:\n  memory_bytes: 1048576TiB\n", "reserve.memory_bytes"),
    ("reserve.cpu_cores 1e300", "reserve:\n  cpu_cores: 1e300\n", "reserve.cpu_cores"),
    ("weight 1e300", "weights:\n  users:\n    alice: 1e300\n", "weights.users.alice"),
    ("subnormal weight 1e-320", "weights:\n  default: 1.0e-320\n", "weights.default"),
    ("per-resource weight 1e300", "weights:\n  users:\n    alice: {cpu: 1e300}\n", "weights.users.alice.cpu"),
    ("hysteresis 1e300", "hysteresis: 1e300\n", "hysteresis"),
    ("min_uid 1e30", "governed:\n  min_uid: 1e30\n", "governed.min_uid"),
    ("retention_days 1e300", "history:\n  retention_days: 1e300\n", "history.retention_days"),
    ("every_s 1e300", "history:\n  every_s: 1e300\n", "history.every_s"),
    ("disk bandwidth 1e300", "capacity:\n  disks:\n    sda: {read_bytes_per_s: 1e300, write_bytes_per_s: 1}\n",
     "capacity.disks.sda.read_bytes_per_s"),
    ("NIC bits_per_s 1e300", "capacity:\n  nics:\n    eth0: {bits_per_s: 1e300}\n", "capacity.nics.eth0.bits_per_s"),
    ("NUL in state_path", 'state_path: "/run/drfgov/\\0state.json"\n', "state_path"),
    ("100,000-character mode", "mode: " + "x" * 100_000 + "\n", "mode"),
    ("YAML syntax error", "weights: {users: [}\n", "YAML"),
    ("two documents", "mode: enforce\n---\nmode: dry-run\n", "document"),
    # names (the policy audit: a NUL in a name was a traceback, ValueError: embedded null byte)
    ("NUL in weights.users", 'weights:\n  users:\n    "a\\u0000b": 2\n', "weights.users.a\\x00b"),
    ("NUL in weights.groups", 'weights:\n  groups:\n    "a\\0b": 2\n', "weights.groups.a\\x00b"),
    ("NUL in governed.exempt_users", 'governed:\n  exempt_users: ["a\\0b"]\n', "governed.exempt_users.0"),
    ("NUL in governed.exempt_groups", 'governed:\n  exempt_groups: ["a\\0b"]\n', "governed.exempt_groups.0"),
    ("newline in a group name", 'weights:\n  groups:\n    "staff\\nroot": 2\n', "U+000A"),
    ("ESC sequence in a user name", 'governed:\n  exempt_users: ["x\\e[2J"]\n', "U+001B"),
    ("'/' in a user name", "governed:\n  exempt_users: [../../etc/passwd]\n", "'/'"),
    ("':' in a user name", "weights:\n  users:\n    'root:x:0': 2\n", "':'"),
    ("100,000-byte user name", "governed:\n  exempt_users: [" + "u" * 100_000 + "]\n", "LOGIN_NAME_MAX"),
    ("uid 0 where a login name goes", "governed:\n  exempt_users: [0]\n", "got the number 0 (uid 0 is root"),
    ("5,000-digit number where a login name goes", f"governed:\n  exempt_users: [{HUGENUM}]\n",
     "governed.exempt_users.0"),
    # raw characters YAML does not allow (were: no line, a literal \n, a byte offset)
    ("raw BEL", b"interval_s: 1\nmode: dry-run\x07\n", "U+0007 at column 14"),
    ("raw NUL byte", b"interval_s: 1\x00\n", "U+0000 at column 14"),
    ("raw ESC after UTF-8 text", "mode: enforce # café\x1b[2J\n".encode(), "U+001B at column 21"),
    # files the daemon writes, one file twice
    ("state_path is metrics.textfile", "state_path: /run/drfgov/m.prom\nmetrics: {textfile: /run/drfgov/m.prom}\n",
     "metrics.textfile"),
    ("history.path is metrics.textfile",
     "history: {path: /var/lib/drfgov/m.prom}\nmetrics: {textfile: /var/lib/drfgov/./m.prom}\n", "metrics.textfile"),
    ("uid range of nobody alone", "governed:\n  min_uid: 65534\n  max_uid: 65534\n", "governed.max_uid"),
]

PROBLEM_OK = '{"capacity": {"cpu": 9, "memory": 18}, "users": {"A": {"demand": {"cpu": 1, "memory": 4}}}}\n'


def _wide(resources: int, users: int) -> str:
    cap = ", ".join(f'"r{j}": 1' for j in range(resources))
    return '{"capacity": {' + cap + '}, "users": {' + ", ".join(f'"u{i}": {{"demand": {{}}}}' for i in range(users)) + "}}\n"


def _users(users: int, resources: int = 3) -> str:
    """A problem every user of which demands every resource: fine for allocate, too big for compare."""
    names = [f"r{j}" for j in range(resources)]
    cap = ", ".join(f'"{r}": 1000' for r in names)
    demand = "{" + ", ".join(f'"{r}": 1' for r in names) + "}"
    return '{"capacity": {' + cap + '}, "users": {' + ", ".join(f'"u{i}": {{"demand": {demand}}}' for i in range(users)) + "}}\n"


PROBLEM_BAD_TEXT = [  # (name, file name, text, extra args, what the error must mention)
    ("billion-laughs alias bomb", "p.yaml", "capacity: {cpu: 1}\n" + _laughs(where="users"), (), "alias"),
    ("recursive anchor", "p.yaml", "capacity: {cpu: 1}\nusers: &u {A: {demand: *u}}\n", (), "alias"),
    ("50,000-deep JSON", "p.json", '{"capacity": ' + "[" * DEEP + "]" * DEEP + "}\n", (), "nest"),
    ("50,000-deep YAML", "p.yaml", "capacity: " + "[" * DEEP + "]" * DEEP + "\n", (), "nest"),
    ("<< merge key", "p.yaml", "capacity: &c {cpu: 9}\nusers:\n  A:\n    demand:\n      <<: *c\n", (), "merge"),
    ("bad !!binary", "p.yaml", "capacity: {cpu: !!binary '@@@'}\nusers: {}\n", (), "tag"),
    ("timestamp 2001-13-45", "p.yaml", "capacity: {cpu: 2001-13-45}\nusers: {}\n", (), "capacity.cpu"),
    ("400-digit capacity", "p.json", f'{{"capacity": {{"cpu": {BIGNUM}}}, "users": {{}}}}\n', (), "capacity.cpu"),
    ("5,000-digit capacity", "p.json", f'{{"capacity": {{"cpu": {HUGENUM}}}, "users": {{}}}}\n', (), "capacity.cpu"),
    ("--discrete 10^15 units", "p.yaml", "capacity: {cpu: 1e15}\nusers:\n  A: {demand: {cpu: 1}}\n", ("--discrete",),
     "users.A"),
    ("--discrete 100 users, 10^7 units each", "p.yaml",
     "capacity: {cpu: 1e7}\nusers:\n" + "".join(f"  u{i}: {{demand: {{cpu: 1}}}}\n" for i in range(100)), ("--discrete",),
     "units"),
    ("non-UTF-8 JSON", "p.json", b'{"capacity": {"cpu": 9}, "users": {"caf\xe9": {"demand": {"cpu": 1}}}}\n', (), "UTF-8"),
    ("duplicate JSON key", "p.json",
     '{"capacity": {"cpu": 9},\n "users": {"A": {"demand": {"cpu": 1}},\n           "A": {"demand": {"cpu": 2}}}}\n', (),
     "duplicate"),
    ("lone surrogate in a name", "p.json", '{"capacity": {"cpu": 9}, "users": {"\\ud800": {"demand": {"cpu": 1}}}}\n', (),
     "users"),
    ("capacity 1e308 / demand 1e-308", "p.yaml", "capacity: {cpu: 1.0e+308}\nusers:\n  A: {demand: {cpu: 1.0e-308}}\n", (),
     "capacity.cpu"),
    ("demand 1e-308", "p.yaml", "capacity: {cpu: 1}\nusers:\n  A: {demand: {cpu: 1.0e-308}}\n", (), "users.A.demand.cpu"),
    ("subnormal weight", "p.yaml", "capacity: {cpu: 9}\nusers:\n  A: {demand: {cpu: 1}, weight: 1.0e-320}\n", (),
     "users.A.weight"),
    ("5,000 resources x 5,000 users", "p.json", _wide(5000, 5000), (), "users"),
    ("NaN in JSON", "p.json", '{"capacity": {"cpu": NaN}, "users": {}}\n', (), "capacity.cpu"),
]

COMPARE_BAD_TEXT = [  # beyond what compare checks in bounded time (an allocate problem still)
    ("compare: 201 users", "p.json", _users(201), (), "users"),
    ("compare: 10,000 users", "p.json", _users(10_000), (), "users"),
    ("compare: 33 resources", "p.json", _users(2, 33), (), "capacity"),
]

TRACE_HEADER = '{"cluster": {"machines": 2, "capacity": {"cpu": 8, "memory": 6}}, "duration_s": 60}\n'
JOB = '{"user": "a", "tasks": 4, "duration_s": 5, "demand": {"cpu": 1, "memory": 1}}\n'


def _header(**fields) -> str:
    doc = {"cluster": {"machines": 2, "capacity": {"cpu": 8, "memory": 6}}, "duration_s": 60}
    doc.update(fields)
    return json.dumps(doc) + "\n"


def _job(**fields) -> str:
    doc = {"user": "a", "tasks": 4, "duration_s": 5, "demand": {"cpu": 1, "memory": 1}}
    doc.update(fields)
    return json.dumps(doc) + "\n"


TRACE_BAD_TEXT = [  # (name, file name, text, extra args, what the error must mention)
    ("non-UTF-8 trace", "t.jsonl", TRACE_HEADER.encode() + b'{"user": "caf\xe9", "tasks": 1, "duration_s": 1, '
                                                         b'"demand": {"cpu": 1}}\n', (), "UTF-8"),
    ("10^12 machines", "t.jsonl", _header(cluster={"machines": 10**12, "capacity": {"cpu": 8}}) +
     '{"user": "a", "tasks": 1, "duration_s": 1, "demand": {"cpu": 1}}\n', (), "cluster.machines"),
    ("10^15 tasks", "t.jsonl", TRACE_HEADER.replace(', "duration_s": 60', "") + _job(tasks=10**15), (), "tasks"),
    ("50,000-deep JSON line", "t.jsonl", TRACE_HEADER + '{"user": ' + "[" * DEEP + "]" * DEEP + "}\n", (), "nest"),
    ("repeat with 1 ns tasks", "t.jsonl", _header(duration_s=600) + _job(duration_s=1e-9, repeat=True), (), "tasks"),
    ("no horizon, submitted at 10^15 s", "t.jsonl", TRACE_HEADER.replace(', "duration_s": 60', "") + _job(submit_s=1e15),
     (), "submit_s"),
    ("no horizon, 10^300 s tasks", "t.jsonl", TRACE_HEADER.replace(', "duration_s": 60', "") + _job(duration_s=1e300),
     (), "duration_s"),
    ("duplicate key in a line", "t.jsonl", TRACE_HEADER + '{"user": "a", "tasks": 4, "tasks": 5, "duration_s": 5, '
                                                          '"demand": {"cpu": 1}}\n', (), "duplicate"),
    ("CSV field above 128 KiB", "t.csv", "submit_s,user,tasks,duration_s,repeat,cpu\n0," + "u" * 200_000 + ",1,1,false,1\n",
     ("--machines", "2", "--capacity", "cpu=4"), "CSV"),
    ("CSV with NUL", "t.csv", "submit_s,user,tasks,duration_s,repeat,cpu\n0,a\0b,1,1,false,1\n",
     ("--machines", "2", "--capacity", "cpu=4"), "user"),
    ("--machines 10^12", "t.jsonl", TRACE_HEADER + JOB, ("--machines", str(10**12), "--capacity", "cpu=8,memory=6"),
     "machines"),
    ("--capacity cpu=inf", "t.jsonl", TRACE_HEADER + JOB, ("--machines", "2", "--capacity", "cpu=inf,memory=6"),
     "capacity"),
    ("--duration-s inf with repeat", "t.jsonl", TRACE_HEADER + _job(repeat=True), ("--duration-s", "inf"), "duration"),
    ("subnormal weight", "t.jsonl", _header(weights={"a": 1e-320}) + JOB, (), "weights.a"),
    ("slots:<5,000 digits>", "t.jsonl", _header(policies=["slots:" + HUGENUM]) + JOB, (), "policies"),
    ("5,000-digit tasks", "t.jsonl", TRACE_HEADER + '{"user": "a", "tasks": ' + HUGENUM + ', "duration_s": 1, '
                                                    '"demand": {"cpu": 1}}\n', (), "tasks"),
]

FILE_CASES = [  # (name, build, what the error must mention) for every command
    ("a FIFO", "fifo", "regular file"),
    ("/dev/zero", "zero", "regular file"),
    ("a 100 MiB file", "big", "MiB"),
]


def _policy_owner_cases() -> list[Case]:
    def symlink_to_0666_nobody(d: Path) -> list[str]:
        target = _write(d, "real.yaml", "mode: enforce\n")
        os.chown(target, NOBODY, NOBODY)
        os.chmod(target, 0o666)
        link = d / "drfgov.yaml"
        link.symlink_to(target)
        return [str(link)]

    def mode(bits: int, owner: int | None = None) -> Callable[[Path], list[str]]:
        def build(d: Path) -> list[str]:
            path = _write(d, "drfgov.yaml", "mode: enforce\n")
            if owner is not None:
                os.chown(path, owner, owner)
            os.chmod(path, bits)
            return [str(path)]
        return build

    def in_open_directory(d: Path) -> list[str]:
        sub = d / "open"
        sub.mkdir()
        os.chmod(sub, 0o777)
        return [str(_write(sub, "drfgov.yaml", "mode: enforce\n"))]

    def state_path_is_the_policy(d: Path) -> list[str]:
        path = d / "drfgov.yaml"
        path.write_text(f"mode: dry-run\nstate_path: {path}\n")
        return [str(path)]

    return [
        Case("check-config", "state_path is the policy file itself", state_path_is_the_policy, "policy file itself"),
        Case("check-config", "symlink to a 0666 file owned by nobody", symlink_to_0666_nobody, "chown root:root", True),
        Case("check-config", "world-writable policy (0666)", mode(0o666), "chmod"),
        Case("check-config", "group-writable policy (0664)", mode(0o664), "chmod"),
        Case("check-config", "policy owned by nobody", mode(0o644, NOBODY), "chown", True),
        Case("check-config", "policy in a world-writable directory", in_open_directory, "chmod"),
    ]


def _file_case(command: str, suffix: str, kind: str) -> Callable[[Path], list[str]]:
    extra = ["--machines", "2", "--capacity", "cpu=4"] if command == "simulate" else []
    if kind == "fifo":
        return lambda d: [*_fifo("f" + suffix)(d), *extra]
    if kind == "zero":
        return lambda d: ["/dev/zero", *extra]
    return lambda d: [*_big("big" + suffix, 100 << 20)(d), *extra]


def cases() -> list[Case]:
    out = [Case("check-config", name, _file("drfgov.yaml", text), expect) for name, text, expect in POLICY_BAD_TEXT]
    out += _policy_owner_cases()
    out += [Case("allocate", name, _file(fname, text, *extra), expect) for name, fname, text, extra, expect in PROBLEM_BAD_TEXT]
    out += [Case("compare", name, _file(fname, text, *extra), expect)
            for name, fname, text, extra, expect in PROBLEM_BAD_TEXT + COMPARE_BAD_TEXT if "--discrete" not in extra]
    out += [Case("simulate", name, _file(fname, text, *extra), expect) for name, fname, text, extra, expect in TRACE_BAD_TEXT]
    for command, suffix in (("check-config", ".yaml"), ("allocate", ".json"), ("compare", ".json"), ("simulate", ".jsonl")):
        out += [Case(command, name, _file_case(command, suffix, kind), expect) for name, kind, expect in FILE_CASES]
    return out


# -- running ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    verdict: str  # clean | accepted | traceback | hang | other
    returncode: int | None
    stderr: str
    seconds: float


def run_case(exe: str, case: Case, scratch: Path, timeout_s: float = TIMEOUT_S) -> Outcome:
    """Build ``case`` in ``scratch`` and run ``drfgov COMMAND ARGS`` with a timeout."""
    import time

    args = case.build(scratch)
    start = time.monotonic()
    try:
        out = subprocess.run([exe, case.command, *args], capture_output=True, text=True, errors="replace",
                             timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Outcome("hang", None, "", time.monotonic() - start)
    seconds = time.monotonic() - start
    return Outcome(classify(out.returncode, out.stderr, args[0] if args else ""), out.returncode, out.stderr, seconds)


def classify(returncode: int, stderr: str, file: str) -> str:
    if "Traceback" in stderr or returncode not in (0, 1, 2):
        return "traceback"
    if returncode == 0:
        return "accepted"
    lines = stderr.splitlines()
    if (returncode == 2 and len(lines) == 1 and lines[0].startswith(f"drfgov: error: {file}")
            and len(lines[0]) <= MAX_LINE):
        return "clean"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drfgov", default=str(Path(sys.executable).parent / "drfgov"))
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = parser.parse_args()
    rows: dict[str, dict[str, int]] = {}
    for case in cases():
        if case.needs_root and os.geteuid() != 0:
            continue
        scratch = Path(tempfile.mkdtemp(prefix="hostile-"))
        try:
            outcome = run_case(args.drfgov, case, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        row = rows.setdefault(case.command, {"cases": 0, "clean": 0, "accepted": 0, "traceback": 0, "hang": 0, "other": 0})
        row["cases"] += 1
        row[outcome.verdict] += 1
        if args.verbose:
            last = (outcome.stderr.strip().splitlines() or [""])[-1][:150]
            print(f"{case.command:12} {outcome.verdict:9} {outcome.seconds:5.1f}s  {case.name}: {last}", flush=True)
    print("| command | cases | clean exit 2 | accepted | traceback | hang | other |")
    print("|---|---|---|---|---|---|---|")
    for command, row in rows.items():
        print(f"| {command} | {row['cases']} | {row['clean']} | {row['accepted']} | {row['traceback']} | {row['hang']} | "
              f"{row['other']} |")


if __name__ == "__main__":
    main()
