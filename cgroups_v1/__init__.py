"""The cgroup v1 file layer, beside :mod:`cgroups` (v2) and shaped like it: typed readers and
validated writers named after the v1 files, errors from :mod:`cgroups.errors` raised once at
the file boundary. No policy lives here.

* :mod:`cgroups_v1.mounts` — where cpu, cpuacct, memory and blkio are mounted; which
  controllers a host offers in v2, v1 or not at all (hybrid hosts).
* :mod:`cgroups_v1.cgroup` — :class:`V1Cgroup`, one directory of one hierarchy:
  ``cpu_cfs_quota_us()``, ``set_cpu_shares()``, ``memory_oom_control()``,
  ``blkio_throttle_io_service_bytes()``, ...
* :mod:`cgroups_v1.slice` — :class:`V1Slice`, a user's slice across the hierarchies.
* :mod:`cgroups_v1.values` — typed values and the kernel's rules; pure.

**cgroupspy and our own code.** cgroupspy (0.2) serves for writing the single-integer files:
its ``IntegerFile`` descriptors write ``cpu.cfs_quota_us``, ``cpu.cfs_period_us``,
``cpu.shares`` and ``memory.{limit,soft_limit}_in_bytes``, None as ``-1``. Their reads are
ours (``cpuacct.usage``, ``memory.usage_in_bytes`` and ``memory.failcnt`` too), by the v2
layer's rules (:func:`cgroups.parse.single_int`, then each file's range): its reads are
Python's ``int()``, which takes ``1_000``, ``+100`` and other scripts' digits, none of which
the kernel writes. It does not serve for the rest, which is ours: its trees walk every cgroup
of every hierarchy at construction and assume ``/sys/fs/cgroup`` (we read mountinfo and verify
each mount with statfs, and need one directory, not a tree); its
``blkio.throttle.write_bps_device`` and ``write_iops_device`` file names end in a space (writes
go to a file that does not exist); it has no reader for ``blkio.throttle.io_service_bytes``;
its ``DictFile`` fails with a bare ``ValueError`` on a blank line and its reads raise bare
``OSError`` — our keyed parsers (:mod:`cgroups.parse`) give :class:`~cgroups.errors.ParseError`
naming file and line, and one translation here turns OSErrors into the layer's errors. It has
no validation: ours refuses what the kernel would refuse or clamp silently
(:mod:`cgroups_v1.values`).

Sources: Documentation/admin-guide/cgroup-v1/{cgroups,memory,cpuacct,blkio-controller}.rst,
Documentation/scheduler/sched-bwc.rst and sched-design-CFS.rst.
"""
