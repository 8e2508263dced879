"""The cgroup v2 file layer Python lacks: typed readers and writers named after kernel files.

No policy lives here (that is :mod:`governor`). Source for every format and rule:
Documentation/admin-guide/cgroup-v2.rst. cgroupspy speaks only cgroup v1 (``cpu.cfs_quota_us``,
``memory.limit_in_bytes``, ``blkio.*``), hence this package.

* :mod:`cgroups.mount` — find and verify the cgroup2 hierarchy; explain hybrid hosts.
* :mod:`cgroups.cgroup` — :class:`Cgroup`: ``cpu_stat()``, ``set_cpu_max()``, ... (the I/O).
* :mod:`cgroups.limits` — typed values (``CpuMax``, ``IoMax``, ``Pressure``, ...); pure.
* :mod:`cgroups.devices` — paths and partitions to the whole disks ``io.max`` takes.
* :mod:`cgroups.errors` — ``CgroupGone``, ``ControllerMissing``, ``ParseError``, ``WriteRefused``.

Names are loaded when first used (PEP 562): ``import cgroups.limits`` by a pure module does
not import the readers and writers of :mod:`cgroups.cgroup`.
"""

from importlib import import_module

__all__ = [
    "Cgroup", "CgroupError", "CgroupGone", "ControllerMissing", "CpuMax", "CpuStat", "InvalidLimit",
    "IoMax", "IoStat", "MemoryEvents", "NotCgroup2", "ParseError", "Pressure", "PressureLine", "PressureTotals",
    "ReadFailed", "WriteRefused",
]

_HOME = {"Cgroup": "cgroups.cgroup",
         **{n: "cgroups.errors" for n in ("CgroupError", "CgroupGone", "ControllerMissing", "NotCgroup2", "ParseError",
                                          "ReadFailed", "WriteRefused")},
         **{n: "cgroups.limits" for n in ("CpuMax", "CpuStat", "InvalidLimit", "IoMax", "IoStat", "MemoryEvents",
                                          "Pressure", "PressureLine", "PressureTotals")}}


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'cgroups' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
