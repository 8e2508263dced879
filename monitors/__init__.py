"""Per-user measurement: samples and rates from cgroup v2 files and /proc (never writes).

Two sources feed the control loop's ``Monitor`` protocol: :class:`monitors.cgroupmonitor.CgroupMonitor`
(each user's ``user-UID.slice``, the normal case) and :class:`monitors.procmonitor.ProcMonitor`
(per-uid sums from /proc, for hosts without per-user cgroup v2 slices: dry runs only).
"""
