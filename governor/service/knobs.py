"""The managed knobs as JSON, in the kernel's own words: keys are the cgroup v2 file names,
values what the file would read (``cpu.max`` ``"$QUOTA $PERIOD"``; memory in bytes, null for
``max``; ``io.max`` per ``"MAJ:MIN"`` its ``rbps=… wbps=… riops=… wiops=…`` line).
Used by state.json, the restore snapshot and ``drfgov shares --json``, so each can be compared
with the files directly (Documentation/admin-guide/cgroup-v2.rst, "CPU", "Memory", "IO").
"""

from __future__ import annotations

from collections.abc import Mapping

from cgroups import CpuMax, IoMax
from cgroups.parse import int_or_max
from governor.enforce import LimitSet

__all__ = ["knobs_from_json", "knobs_to_json"]


def knobs_to_json(limits) -> dict:
    """A :class:`LimitSet` or planned :class:`governor.control.plan.Limits` as kernel-file values."""
    cpu: CpuMax = limits.cpu_max
    return {
        "cpu.max": f"{'max' if cpu.quota_usec is None else cpu.quota_usec} {cpu.period_usec}",
        "cpu.weight": limits.cpu_weight,
        "memory.low": limits.memory_low,
        "memory.high": limits.memory_high,
        "memory.max": limits.memory_max,
        "io.max": {device: io.render() for device, io in sorted(limits.io_max.items())},
    }


def knobs_from_json(doc: Mapping) -> LimitSet:
    """Inverse of :func:`knobs_to_json`. Raises KeyError, ValueError or TypeError on bad input."""
    quota, period = str(doc["cpu.max"]).split()
    io_max = {}
    for device, line in doc["io.max"].items():
        fields = dict(part.split("=", 1) for part in str(line).split())
        io_max[str(device)] = IoMax(**{k: int_or_max(v) for k, v in fields.items()})
    return LimitSet(CpuMax(int_or_max(quota), int(period)), int(doc["cpu.weight"]), _bytes(doc["memory.low"]),
                    _bytes(doc["memory.high"]), _bytes(doc["memory.max"]), io_max)


def _bytes(value) -> int | None:
    return None if value is None else int(value)
