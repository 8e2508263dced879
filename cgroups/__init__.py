"""The cgroup v2 file layer Python lacks: typed readers and writers named after kernel files.

No policy lives here (that is :mod:`governor`). Source for every format and rule:
Documentation/admin-guide/cgroup-v2.rst. cgroupspy speaks only cgroup v1 (``cpu.cfs_quota_us``,
``memory.limit_in_bytes``, ``blkio.*``), hence this package.

* :mod:`cgroups.mount` — find and verify the cgroup2 hierarchy; explain hybrid hosts.
* :mod:`cgroups.cgroup` — :class:`Cgroup`: ``cpu_stat()``, ``set_cpu_max()``, ...
* :mod:`cgroups.limits` — typed values (``CpuMax``, ``IoMax``, ``Pressure``, ...).
* :mod:`cgroups.devices` — paths and partitions to the whole disks ``io.max`` takes.
* :mod:`cgroups.errors` — ``CgroupGone``, ``ControllerMissing``, ``ParseError``, ``WriteRefused``.
"""

from cgroups.cgroup import Cgroup
from cgroups.errors import CgroupError, CgroupGone, ControllerMissing, NotCgroup2, ParseError, WriteRefused
from cgroups.limits import CpuMax, CpuStat, InvalidLimit, IoMax, IoStat, MemoryEvents, Pressure, PressureLine

__all__ = [
    "Cgroup", "CgroupError", "CgroupGone", "ControllerMissing", "CpuMax", "CpuStat", "InvalidLimit",
    "IoMax", "IoStat", "MemoryEvents", "NotCgroup2", "ParseError", "Pressure", "PressureLine", "WriteRefused",
]
