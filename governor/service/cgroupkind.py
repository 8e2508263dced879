"""Which cgroup interface governs this host — v2, v1, mixed or none (/proc, dry run only) — and why.

Per controller (cpu, memory, io; io is ``blkio`` in v1) :func:`cgroups_v1.mounts.controller_homes`
says where it lives: the cgroup v2 root's ``cgroup.controllers``, a v1 hierarchy, or nowhere.
Then:

* **v2** when cpu, memory and io are all offered by cgroup v2 (a unified host);
* **v1** when cpu and memory are on v1 hierarchies (with cpuacct beside cpu): a v1 host, or a
  hybrid host whose resource controllers stayed on v1 — the usual hybrid layout, where the v2
  mount (``/sys/fs/cgroup/unified``) holds no controllers. io is governed through blkio when
  blkio is on v1 too (io alone in v2 stays ungoverned: the v1 kind keeps systemd's v1 backend);
* **mixed** when cpu (with cpuacct) is on v1 and memory is in cgroup v2 — a hybrid host booted
  with ``cgroup_no_v1=memory``, or one whose admin bound cpu to v1 by hand: each controller is
  governed through the interface it is bound to (:mod:`cgroups_v1.mixed`): cpu through the v1
  files, memory through v2's, io through whichever has it. The reason names each controller's
  interface and mount;
* **proc** otherwise: users are measured from /proc and nothing can be enforced. That includes
  the reverse mix, cpu in v2 with memory on v1 (not built: the reason says so).

Sources: Documentation/admin-guide/cgroup-v2.rst "Mounting", cgroup-v1/cgroups.rst §2.1.
"""

from __future__ import annotations

from dataclasses import dataclass

from cgroups.errors import CgroupError
from cgroups.mount import Hierarchy, find_cgroup2
from cgroups_v1.mixed import MixedLayout, find_mixed
from cgroups_v1.mounts import V1Mounts, controller_homes, find_v1

__all__ = ["CgroupKind", "choose"]


@dataclass(frozen=True)
class CgroupKind:
    """The choice: ``kind`` v2 | v1 | mixed | proc, ``reason`` (one sentence for logs and
    doctor), ``homes`` (cpu/memory/io → v2 | v1 | none) and the hierarchy, mounts or (mixed)
    per-controller layout to use."""

    kind: str
    reason: str
    homes: dict[str, str]
    hierarchy: Hierarchy | None = None
    mounts: V1Mounts | None = None
    layout: MixedLayout | None = None


def choose(mountinfo: str | None = None) -> CgroupKind:
    """Decide for this host (``mountinfo``: text of /proc/self/mountinfo, read when None). Never raises."""
    homes = controller_homes(mountinfo)
    where = ", ".join(f"{c} on {h}" for c, h in homes.items())
    v2_error = v1_error = ""
    try:
        hierarchy = find_cgroup2(mountinfo)
        return CgroupKind("v2", f"cgroup v2 at {hierarchy.root} offers cpu, memory and io", homes, hierarchy=hierarchy)
    except (CgroupError, OSError) as exc:
        v2_error = str(exc)
    if homes["cpu"] == "v1" and homes["memory"] == "v1":
        try:
            mounts = find_v1(mountinfo)
        except (CgroupError, OSError) as exc:
            v1_error = str(exc)
        else:
            io = "io through blkio" if "blkio" in mounts else \
                "io not governed (" + ("it is in cgroup v2, and cpu and memory are not: only a mixed host with "
                                       "memory in v2 governs io there)" if homes["io"] == "v2"
                                       else "no blkio hierarchy)")
            on_v2 = [c for c, h in homes.items() if h == "v2"]
            hybrid = ""
            if " - cgroup2 " in (mountinfo if mountinfo is not None else _mountinfo()):
                hybrid = f" (hybrid host: its v2 mount has {', '.join(on_v2) if on_v2 else 'none of them'})"
            return CgroupKind("v1", f"cpu and memory are bound to cgroup v1 hierarchies{hybrid}: governing the v1 "
                              f"files ({where}; {io})", homes, mounts=mounts)
    if homes["cpu"] == "v1" and homes["memory"] == "v2":
        try:
            layout = find_mixed(mountinfo)
        except (CgroupError, OSError) as exc:
            v1_error = f"cpu on v1 and memory on v2, but {exc}"
        else:
            return CgroupKind("mixed", f"cpu is bound to cgroup v1 and memory is in cgroup v2 (mixed host): governing "
                              f"each controller through its own interface — {layout.describe()}", homes,
                              mounts=layout.v1, layout=layout)
    why = v1_error or (f"cpu is in cgroup v2 and memory on a v1 hierarchy ({where}): this mix is not built "
                       "(only cpu on v1 with memory in v2 is)" if (homes["cpu"], homes["memory"]) == ("v2", "v1")
                       else v2_error)
    return CgroupKind("proc", f"no usable cgroup interface ({why}): measuring from /proc, dry run only", homes)


def _mountinfo() -> str:
    try:
        with open("/proc/self/mountinfo") as f:
            return f.read()
    except OSError:
        return ""
