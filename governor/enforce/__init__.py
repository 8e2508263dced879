"""Enforcement backends behind one protocol (:class:`~governor.enforce.model.Backend`).

* ``systemd`` — SetUnitProperties(runtime=true) on ``user-UID.slice`` over D-Bus;
* ``cgroupfs`` — writes the cgroup files, where nothing else owns them;
* ``cgroupfs-v1`` — writes the cgroup v1 files of a slice (v1 and hybrid hosts);
* ``systemd-v1`` — SetUnitProperties with the properties systemd maps to v1 files (v1 and
  hybrid hosts run by systemd). The two v1 backends are what ``cgroupfs`` and ``systemd`` (and
  ``auto``) become on a v1 host (:func:`make_backend` with ``v1_mounts``); a policy names
  neither, a snapshot may;
* ``cgroupfs-mixed`` — on a mixed host (cpu on a v1 hierarchy, memory in cgroup v2) each knob
  written to the files of its controller's interface (:mod:`governor.enforce.mixed`): what
  ``cgroupfs`` and ``auto`` become there (:func:`make_backend` with ``mixed``);
* ``dry-run`` — records, writes nothing.

:mod:`governor.enforce.model` holds the values (knobs, limit sets, the protocol) and does no
I/O; :mod:`governor.enforce.apply` is the one path from a knob to a backend call.
:func:`make_backend` with ``auto`` picks systemd when systemd is PID 1 (it then owns the
user slices) and answers on the system bus, else cgroupfs — on v1 hosts their v1 variants. The backends are imported when
first asked for (PEP 562), so importing the model does not load D-Bus or the cgroup writers.
"""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from governor.enforce.model import BACKENDS, Backend, EnforceError

if TYPE_CHECKING:
    from cgroups_v1.mixed import MixedLayout
    from cgroups_v1.mounts import V1Mounts

__all__ = ["BACKENDS", "CgroupfsBackend", "CgroupfsMixedBackend", "CgroupfsV1Backend", "DryRunBackend", "SystemdBackend",
           "SystemdV1Backend", "make_backend"]

_LAZY = {"CgroupfsBackend": "governor.enforce.cgroupfs", "CgroupfsV1Backend": "governor.enforce.cgroupfs_v1",
         "CgroupfsMixedBackend": "governor.enforce.mixed", "DryRunBackend": "governor.enforce.dryrun",
         "SystemdBackend": "governor.enforce.systemd", "SystemdV1Backend": "governor.enforce.systemd_v1"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def make_backend(kind: str = "auto", systemd_runtime_dir: str = "/run/systemd/system",
                 v1_mounts: V1Mounts | None = None, mixed: MixedLayout | None = None) -> tuple[Backend, str]:
    """The backend named ``kind``, and why it was chosen (for logs and ``drfgov doctor``).

    ``v1_mounts``: the host's cgroup v1 hierarchies when it is governed through v1
    (:func:`governor.service.cgroupkind.choose`): ``systemd``, ``cgroupfs`` and ``auto`` then
    give the v1 backends (``systemd-v1``, ``cgroupfs-v1``). ``mixed``: the host's per-controller
    layout when cpu is on v1 and memory in v2: ``cgroupfs`` and ``auto`` give ``cgroupfs-mixed``
    (with systemd as PID 1 too: systemd in hybrid mode manages controllers on the v1
    hierarchies only — the v2 mount is for its process tracking, "not about resource
    management" (systemd's docs/CGROUP_DELEGATION.md) — so no property of its would reach the
    v2 memory files); ``systemd`` is refused. A snapshot may name ``cgroupfs-v1``,
    ``systemd-v1`` or ``cgroupfs-mixed`` directly; they find this host's hierarchies themselves.

    Raises:
        ValueError: an unknown ``kind``.
        EnforceError: ``systemd`` was asked for but does not answer, or the host is mixed; no
            v1 hierarchies (no mixed layout) for a v1 (mixed) backend.
    """
    from governor.enforce.dryrun import DryRunBackend

    v1 = v1_mounts is not None or kind in ("cgroupfs-v1", "systemd-v1")
    if kind == "dry-run":
        return DryRunBackend(), "dry-run requested: nothing is written"
    if mixed is not None or kind == "cgroupfs-mixed":
        from governor.enforce.mixed import CgroupfsMixedBackend

        if kind == "systemd":
            raise EnforceError("systemd cannot govern a mixed host: in hybrid mode it manages controllers on the v1 "
                               "hierarchies only, never the memory files in cgroup v2; use backend: cgroupfs or auto")
        if kind not in ("auto", "cgroupfs", "cgroupfs-mixed"):
            raise ValueError(f"backend {kind!r} on a mixed cgroup v1/v2 host; expected auto or cgroupfs")
        why = f"{kind} requested" if kind != "auto" else "auto on a mixed host" + (
            ": systemd runs but manages no controller in cgroup v2 (hybrid mode)"
            if Path(systemd_runtime_dir).is_dir() else ": systemd is not running")
        return CgroupfsMixedBackend(mixed), f"{why}: writing each controller's files on its own interface"
    if kind in ("cgroupfs", "cgroupfs-v1"):
        return _files(v1, v1_mounts), f"{kind} requested" + (": writing the v1 files of each slice" if v1 else "")
    if kind in ("systemd", "systemd-v1"):
        backend = _systemd(v1, v1_mounts)
        backend.ping()
        return backend, "systemd requested and answering on the system bus" + (
            ": properties it maps to the v1 files" if v1 else "")
    if kind != "auto":
        raise ValueError(f"unknown backend {kind!r}; expected one of: {', '.join(BACKENDS)}")
    files = "the v1 files of each slice" if v1 else "cgroup files"
    if not Path(systemd_runtime_dir).is_dir():
        return _files(v1, v1_mounts), f"systemd is not running ({systemd_runtime_dir} absent): writing {files}"
    backend = _systemd(v1, v1_mounts)
    try:
        backend.ping()
    except EnforceError as exc:
        return _files(v1, v1_mounts), f"systemd runs but does not answer ({exc}): writing {files}"
    return backend, "systemd manages user.slice and answers on the system bus" + (
        " (cgroup v1: properties it maps to the v1 files)" if v1 else "")


def _files(v1: bool, mounts: V1Mounts | None) -> Backend:
    if not v1:
        from governor.enforce.cgroupfs import CgroupfsBackend

        return CgroupfsBackend()
    from governor.enforce.cgroupfs_v1 import CgroupfsV1Backend

    return CgroupfsV1Backend(mounts)


def _systemd(v1: bool, mounts: V1Mounts | None) -> Backend:
    if not v1:
        from governor.enforce.systemd import SystemdBackend

        return SystemdBackend()
    from governor.enforce.systemd_v1 import SystemdV1Backend

    return SystemdV1Backend(mounts)
