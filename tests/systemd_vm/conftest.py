"""Runs only on the real systemd host that tests/systemd_vm/boot.py starts (systemd is PID 1)."""

from pathlib import Path

if Path("/proc/1/comm").read_text().strip() != "systemd" or not Path("/opt/drfgov").is_dir():
    collect_ignore_glob = ["test_*.py"]
