"""The policy the tier's daemon starts with: every scenario's users weighed in it, the scratch
disk's bandwidth as its capacity; a scenario's ``policy`` overrides are merged over it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from tests.scenarios.spec import Scenario

__all__ = ["ENFORCE", "RESERVE_CPU_CORES", "RESERVE_MEMORY_BYTES", "base_policy"]

# The daemon and the harness run beside the users: ~0.1 core together on a quiet host, up to
# 0.45 when other jobs overload the host (TCG runs the guest slower, their ticks cost more).
RESERVE_CPU_CORES = 0.25
RESERVE_MEMORY_BYTES = 512 * 2**20
# What every scenario enforces; those that send add net (tests/scenarios/link.py NET_POLICY).
ENFORCE = ["cpu", "memory", "io"]


def base_policy(scenarios: Iterable[Scenario], scratch_name: str, scratch_bytes_per_s: int, state_dir: Path) -> dict:
    """The policy as a mapping (rendered to YAML by :func:`tests.scenarios.daemon.render_policy`)."""
    users = {}
    for s in scenarios:
        for u in s.users:
            users[u.login] = dict(u.weight) if isinstance(u.weight, Mapping) else float(u.weight)
    return {
        "interval_s": 1.0,
        "mode": "enforce",
        "backend": "cgroupfs",
        "enforce": list(ENFORCE),
        "weights": {"default": 1, "users": users},
        "governed": {"min_uid": 1000},
        "reserve": {"cpu_cores": RESERVE_CPU_CORES, "memory_bytes": RESERVE_MEMORY_BYTES},
        "capacity": {"disks": {scratch_name: {"read_bytes_per_s": scratch_bytes_per_s,
                                              "write_bytes_per_s": scratch_bytes_per_s}}},
        "state_path": str(state_dir / "state.json"),
        "history": {"path": str(state_dir / "history.db")},
    }
