"""Runs only on the real systemd host that tests/systemd_vm/boot.py starts (systemd is PID 1).

The same image boots twice (boot.py): with the unified hierarchy the v2 tests run
(test_systemd_backend.py, test_main_job.py), with ``systemd.unified_cgroup_hierarchy=0`` the
v1 ones (test_v1_*.py). Which one this boot is comes from what is mounted: cgroup2 at
/sys/fs/cgroup, or v1 hierarchies under it.
"""

from pathlib import Path

if Path("/proc/1/comm").read_text().strip() != "systemd" or not Path("/opt/drfgov").is_dir():
    collect_ignore_glob = ["test_*.py"]
elif Path("/sys/fs/cgroup/cgroup.controllers").exists():  # unified: cgroup v2 at /sys/fs/cgroup
    collect_ignore_glob = ["test_v1_*.py"]
else:  # legacy or hybrid: v1 hierarchies under /sys/fs/cgroup
    collect_ignore = ["test_systemd_backend.py", "test_main_job.py"]
