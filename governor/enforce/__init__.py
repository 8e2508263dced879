"""Enforcement backends behind one protocol (:class:`~governor.enforce.base.Backend`).

* ``systemd`` — SetUnitProperties(runtime=true) on ``user-UID.slice`` over D-Bus;
* ``cgroupfs`` — writes the cgroup files, where nothing else owns them;
* ``dry-run`` — records, writes nothing.

:func:`make_backend` with ``auto`` picks systemd when systemd is PID 1 (it then owns the
user slices) and answers on the system bus, else cgroupfs.
"""

from __future__ import annotations

from pathlib import Path

from governor.enforce.base import Backend, EnforceError, LimitSet, Target, TargetGone, apply_limit_set, read_limit_set
from governor.enforce.cgroupfs import CgroupfsBackend
from governor.enforce.dryrun import DryRunBackend
from governor.enforce.systemd import SystemdBackend

__all__ = [
    "BACKENDS", "Backend", "CgroupfsBackend", "DryRunBackend", "EnforceError", "LimitSet", "SystemdBackend",
    "Target", "TargetGone", "apply_limit_set", "make_backend", "read_limit_set",
]

BACKENDS = ("auto", "systemd", "cgroupfs", "dry-run")


def make_backend(kind: str = "auto", systemd_runtime_dir: str = "/run/systemd/system") -> tuple[Backend, str]:
    """The backend named ``kind``, and why it was chosen (for logs and ``drfgov doctor``).

    Raises:
        ValueError: an unknown ``kind``.
        EnforceError: ``systemd`` was asked for but does not answer.
    """
    if kind == "dry-run":
        return DryRunBackend(), "dry-run requested: nothing is written"
    if kind == "cgroupfs":
        return CgroupfsBackend(), "cgroupfs requested"
    if kind == "systemd":
        backend = SystemdBackend()
        backend.ping()
        return backend, "systemd requested and answering on the system bus"
    if kind != "auto":
        raise ValueError(f"unknown backend {kind!r}; expected one of: {', '.join(BACKENDS)}")
    if not Path(systemd_runtime_dir).is_dir():
        return CgroupfsBackend(), f"systemd is not running ({systemd_runtime_dir} absent): writing cgroup files"
    backend = SystemdBackend()
    try:
        backend.ping()
    except EnforceError as exc:
        return CgroupfsBackend(), f"systemd runs but does not answer ({exc}): writing cgroup files"
    return backend, "systemd manages user.slice and answers on the system bus"
