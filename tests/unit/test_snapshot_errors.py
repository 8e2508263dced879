"""A file that is not a snapshot of original limits is refused in one line naming the file, the
line or field, and what was expected (governor/service/snapshot.py's load_snapshot): the audit
of 2026-11-27 saw Python's own words — "'list' object has no attribute 'get'", "[Errno 21] Is a
directory", "'utf-8' codec can't decode…", "Expecting value: line 1 column 1 (char 0)"."""

import json
import os

import pytest

from governor.service.snapshot import SnapshotError, load_snapshot

LIMITS = {"cpu.max": "max 100000", "cpu.weight": 100, "memory.low": 0, "memory.high": None, "memory.max": None,
          "io.max": {}}
SLICE = "/sys/fs/cgroup/user.slice/user-1001.slice"


def snapshot(**changes):
    doc = {"version": 1, "backend": "cgroupfs", "slices": {"1001": {"cgroup": SLICE, "limits": dict(LIMITS)}}}
    for key, value in changes.items():
        if key.startswith("limit_"):
            doc["slices"]["1001"]["limits"][key[6:].replace("_", ".", 1)] = value
        else:
            doc[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize("text, said", [
    ("[]", ": expected a JSON object with version, backend and slices, got a list"),
    ("", ": empty: expected a drfgov snapshot of original limits (JSON, version 1)"),
    ("{not json", ":1: not JSON (column 2: Expecting property name enclosed in double quotes): expected a drfgov"),
    ('{"version": 1,\n "backend": }', ":2: not JSON (column 13: Expecting value)"),
    (b'{"version": 1\xff}', ": not UTF-8 text (byte 13): expected a drfgov snapshot"),
    (snapshot(version=2), ": version: expected 1, got 2"),
    (snapshot(backend=None), ": backend: expected the name of the backend that wrote the limits (text), got null"),
    (snapshot(slices=[]), ": slices: expected an object of uid → slice, got a list"),
    ('{"version": 1, "backend": "cgroupfs", "slices": {"alice": {}}}', ": slices.alice: expected a uid"),
    ('{"version": 1, "backend": "cgroupfs", "slices": {"1001": []}}',
     ": slices.1001: expected an object with cgroup and limits, got a list"),
    ('{"version": 1, "backend": "cgroupfs", "slices": {"1001": {"cgroup": "/x", "limits": {}}}}',
     ": slices.1001.cgroup: '/x' is not user.slice/user-1001.slice (expected an absolute path"),
    (snapshot(limit_cpu_max="abc"), ": slices.1001.limits.cpu.max: expected 'QUOTA PERIOD' such as 'max 100000', "
                                    'got "abc"'),
    (snapshot(limit_cpu_max="max 10"), ": slices.1001.limits: cpu.max period 10 µs outside 1000..1000000 µs"),
    (snapshot(limit_cpu_weight="100"), ': slices.1001.limits.cpu.weight: expected a whole number, got "100"'),
    (snapshot(limit_memory_high=1.5), ": slices.1001.limits.memory.high: expected a whole number or null (max)"),
    (snapshot(limit_io_max={"8:0": "foo=1"}), ": slices.1001.limits.io.max.8:0: expected 'rbps=N wbps=N riops=N"),
])
def test_a_malformed_snapshot_is_refused_in_one_line_naming_the_field(tmp_path, text, said):
    path = tmp_path / "originals.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(SnapshotError) as caught:
        load_snapshot(path)
    message = str(caught.value)
    assert message.startswith(f"{path}{said}"), message
    assert "\n" not in message and "object has no attribute" not in message and "Errno" not in message


def test_a_directory_or_a_fifo_is_refused_without_reading_or_hanging(tmp_path):
    directory = tmp_path / "adir"
    directory.mkdir()
    with pytest.raises(SnapshotError, match=r"adir: a directory: expected a drfgov snapshot"):
        load_snapshot(directory)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(SnapshotError, match=r"fifo: not a regular file: expected a drfgov snapshot"):
        load_snapshot(fifo)


def test_a_good_snapshot_and_none_at_all_still_load(tmp_path):
    path = tmp_path / "originals.json"
    assert load_snapshot(path) is None
    path.write_text(snapshot())
    found = load_snapshot(path)
    assert found.backend == "cgroupfs" and set(found.originals) == {1001}
