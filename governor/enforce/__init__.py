"""Enforcement backends behind one protocol (:class:`~governor.enforce.model.Backend`).

* ``systemd`` — SetUnitProperties(runtime=true) on ``user-UID.slice`` over D-Bus;
* ``cgroupfs`` — writes the cgroup files, where nothing else owns them;
* ``cgroupfs-v1`` — writes the cgroup v1 files of a slice (v1 and hybrid hosts; chosen by
  :mod:`governor.service.hostsetup`, not named in a policy);
* ``dry-run`` — records, writes nothing.

:mod:`governor.enforce.model` holds the values (knobs, limit sets, the protocol) and does no
I/O; :mod:`governor.enforce.apply` is the one path from a knob to a backend call.
:func:`make_backend` with ``auto`` picks systemd when systemd is PID 1 (it then owns the
user slices) and answers on the system bus, else cgroupfs. The backends are imported when
first asked for (PEP 562), so importing the model does not load D-Bus or the cgroup writers.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path

from governor.enforce.model import BACKENDS, Backend, EnforceError

__all__ = ["BACKENDS", "CgroupfsBackend", "DryRunBackend", "SystemdBackend", "make_backend"]

_LAZY = {"CgroupfsBackend": "governor.enforce.cgroupfs", "CgroupfsV1Backend": "governor.enforce.cgroupfs_v1", "DryRunBackend": "governor.enforce.dryrun",
         "SystemdBackend": "governor.enforce.systemd"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_backend(kind: str = "auto", systemd_runtime_dir: str = "/run/systemd/system") -> tuple[Backend, str]:
    """The backend named ``kind``, and why it was chosen (for logs and ``drfgov doctor``).

    Raises:
        ValueError: an unknown ``kind``.
        EnforceError: ``systemd`` was asked for but does not answer.
    """
    from governor.enforce.cgroupfs import CgroupfsBackend
    from governor.enforce.dryrun import DryRunBackend
    from governor.enforce.systemd import SystemdBackend

    if kind == "dry-run":
        return DryRunBackend(), "dry-run requested: nothing is written"
    if kind == "cgroupfs":
        return CgroupfsBackend(), "cgroupfs requested"
    if kind == "cgroupfs-v1":  # not a policy choice: a snapshot names it (set_up picks it on v1 hosts)
        from governor.enforce.cgroupfs_v1 import CgroupfsV1Backend

        return CgroupfsV1Backend(), "cgroup v1 files (the snapshot's backend)"
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
