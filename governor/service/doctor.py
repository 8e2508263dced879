"""``drfgov doctor``: can this host be governed, and if not, what to change.

The first check says which cgroup interface governs the host — v2, v1 (v1 and hybrid hosts),
mixed (cpu on v1, memory in v2: which controller through which interface) or none — and why
(:func:`governor.service.cgroupkind.choose`).

Each check returns a :class:`Check` — ``ok``, ``warn`` (works, but less than it could) or
``fail`` (the governor cannot do its job) — with a fix hint. Sources: cgroup-v2.rst
("Controlling Controllers", "PSI"), systemd.resource-control(5), Documentation/accounting/psi.rst,
pam.conf(5) and pam_systemd(8) (whether cron and at jobs get a session in their user's slice:
:mod:`governor.service.pamstack`).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from cgroups import NotCgroup2
from cgroups.mount import REQUIRED_CONTROLLERS, Hierarchy, find_cgroup2
from governor.enforce import EnforceError, make_backend
from governor.config.policy import Policy
from governor.service.cgroupkind import CgroupKind, choose
from governor.service.pamstack import PAM_DIRS, Dirs, pam_dirs, session_stack
from monitors.capacity import disks as host_disks
from monitors.capacity import nics as host_nics

__all__ = ["Check", "run_checks"]


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""

    def to_json(self) -> dict:
        return asdict(self)


def run_checks(policy: Policy, mountinfo: str | None = None, sysfs: str = "/sys", procfs: str = "/proc",
               systemd_dir: str = "/run/systemd/system", pamd: Dirs = PAM_DIRS) -> list[Check]:
    """Every check, in the order an admin would fix them. ``mountinfo``, ``sysfs``, ``procfs``,
    ``systemd_dir`` and ``pamd`` (the PAM directories, in Linux-PAM's lookup order) are where the
    host is read, for tests."""
    checks = []
    kind = choose(mountinfo)
    hierarchy, check = _cgroup2(mountinfo)
    if kind.kind in ("v1", "mixed"):  # works, through v1 (for some controllers): less than v2 would give
        check = Check(check.name, "warn", check.detail, check.fix.replace("until then only drfgov run --dry-run "
                      "--once works", "until then the governor uses cgroup v1" + (" for cpu" if kind.kind == "mixed" else "")
                      + " (see the cgroup interface check)"))
    checks.append(check)
    checks.append(Check("cgroup interface", "fail" if kind.kind == "proc" else "ok", f"{kind.kind}: {kind.reason}",
                        "boot with systemd.unified_cgroup_hierarchy=1, or mount the v1 cpu, cpuacct and memory "
                        "hierarchies" if kind.kind == "proc" else ""))
    if kind.kind == "mixed":
        checks.append(_v1_user_slice(kind, policy))
        checks.append(_mixed_v2_user_slice(kind))
        accounting = _v1_accounting(policy, systemd_dir, turned_on_by_us=False)
        if accounting is not None:
            checks.append(accounting)
        checks.append(_psi(procfs))
    elif kind.kind == "v1":
        checks.append(_v1_user_slice(kind, policy))
        accounting = _v1_accounting(policy, systemd_dir)
        if accounting is not None:
            checks.append(accounting)
        checks.append(Check("PSI", "warn", "cgroup v1 has no per-cgroup pressure files: demand is estimated from "
                            "usage, CFS throttling, memory growth and memory.failcnt only",
                            "boot with systemd.unified_cgroup_hierarchy=1 for cgroup v2 (per-user PSI, memory.high)"))
    else:
        if hierarchy is not None:
            systemd_manages = Path(systemd_dir).is_dir() and policy.backend in ("auto", "systemd")
            checks.append(_user_slice(hierarchy, systemd_manages))
        checks.append(_psi(procfs))
    checks.append(_systemd(policy, systemd_dir))
    checks.append(_cron_and_at(pamd))
    checks.append(_disks(policy, sysfs))
    checks.append(_nics(policy, sysfs))
    checks.append(_shaping(policy))
    ctnetlink = _ctnetlink(policy)
    if ctnetlink is not None:
        checks.append(ctnetlink)
    checks.extend(_writable(policy))
    return checks


def _cgroup2(mountinfo: str | None) -> tuple[Hierarchy | None, Check]:
    try:
        hierarchy = find_cgroup2(mountinfo)
    except NotCgroup2 as exc:
        return None, Check("cgroup v2", "fail", str(exc),
                           "boot with systemd.unified_cgroup_hierarchy=1 (and cgroup_no_v1=all if v1 is forced); "
                           "until then only drfgov run --dry-run --once works")
    return hierarchy, Check("cgroup v2", "ok", f"{hierarchy.root}: controllers {' '.join(sorted(hierarchy.controllers))}")


def _v1_user_slice(kind: CgroupKind, policy: Policy) -> Check:
    relative = f"{policy.cgroup_v1_parent}/user.slice" if policy.cgroup_v1_parent else "user.slice"
    where = {c: Path(p) / relative for c, p in kind.mounts.points.items()}
    missing = [str(p) for p in where.values() if not p.is_dir()]
    if missing:
        return Check("user.slice", "warn", f"{', '.join(missing)} does not exist: nobody logged in yet, or no systemd "
                     "to create user slices", "log in once; without systemd, create user.slice/user-UID.slice in "
                     "each hierarchy and move the user's processes there")
    return Check("user.slice", "ok", f"{relative} in the {', '.join(where)} hierarchies")


def _mixed_v2_user_slice(kind: CgroupKind) -> Check:
    """On a mixed host: are the controllers homed in v2 enabled for the user slices there?
    systemd in hybrid mode enables none in v2 (it manages controllers on v1 only), so the
    admin enables them: without, her v2 cgroup has no memory files and memory is not governed."""
    layout = kind.layout
    wanted = [c for c in ("memory", "io") if layout.interface(c) == "v2"]
    path = layout.v2_root / "user.slice"
    try:
        available = set((path / "cgroup.controllers").read_text().split())
        enabled = set((path / "cgroup.subtree_control").read_text().split())
    except OSError:
        return Check("user.slice (cgroup v2)", "warn", f"{path} does not exist: nobody has logged in yet, or nothing "
                     "creates user slices in cgroup v2 (users are governed once theirs exist there)", f"mkdir {path}; echo '{' '.join('+' + c for c in wanted)}' > "
                     f"{layout.v2_root}/cgroup.subtree_control; the same into {path}/cgroup.subtree_control")
    missing = [c for c in wanted if c not in available or c not in enabled]
    if missing:
        return Check("user.slice (cgroup v2)", "fail", f"{path}: {', '.join(missing)} not enabled for the user slices "
                     "(systemd in hybrid mode enables no controller in cgroup v2): a user is governed only once her "
                     "v2 cgroup has the memory controller",
                     f"echo '{' '.join('+' + c for c in missing)}' > {layout.v2_root}/cgroup.subtree_control; "
                     f"the same into {path}/cgroup.subtree_control")
    return Check("user.slice (cgroup v2)", "ok", f"{path}: {', '.join(wanted)} enabled for user slices")


def _v1_accounting(policy: Policy, systemd_dir: str, turned_on_by_us: bool = True) -> Check | None:
    """On a v1 or mixed host run by systemd: how users' slices get into the cpu hierarchy, where
    the governor finds them. systemd 252 puts a slice there only when CPU accounting (or a CPU
    limit) is on for it or a sibling; ``DefaultCPUAccounting`` is ``no`` on legacy. Not asking
    systemd is a warning: the governor needs the bus anyway (the systemd check). On a mixed
    host (``turned_on_by_us`` False) the governor does not turn accounting on itself (it does
    not use systemd there), so ``no`` is a warning with the setting to change."""
    if not Path(systemd_dir).is_dir() or policy.backend not in ("auto", "systemd"):
        return None
    from governor.enforce.systemd import SystemdBackend

    try:
        default = SystemdBackend().manager_property("DefaultCPUAccounting")
    except EnforceError as exc:
        return Check("CPU accounting", "warn", f"cannot ask systemd for DefaultCPUAccounting: {exc}")
    if default:
        return Check("CPU accounting", "ok", "DefaultCPUAccounting=yes: every user slice is in the cpu hierarchy")
    if not turned_on_by_us:
        return Check("CPU accounting", "warn", "DefaultCPUAccounting=no: systemd puts a user slice in the cpu "
                     "hierarchy only once it or a sibling has CPU accounting, and on a mixed host the governor does "
                     "not turn it on: users outside the cpu hierarchy are not governed",
                     "DefaultCPUAccounting=yes in /etc/systemd/system.conf, then systemctl daemon-reexec")
    return Check("CPU accounting", "ok", "DefaultCPUAccounting=no: systemd puts a user slice in the cpu hierarchy "
                 "only once it or a sibling has CPU accounting; the governor turns it on (runtime) for user slices "
                 "when it starts and when one appears outside the cpu hierarchy, and reverts that at stop")


def _user_slice(hierarchy: Hierarchy, systemd_manages: bool) -> Check:
    path = hierarchy.root / "user.slice"
    try:
        available = set((path / "cgroup.controllers").read_text().split())
        enabled = set((path / "cgroup.subtree_control").read_text().split())
    except FileNotFoundError:
        return Check("user.slice", "warn", f"{path} does not exist (nobody has logged in yet?)",
                     "log in once, or: systemctl start user.slice")
    missing = [c for c in REQUIRED_CONTROLLERS if c not in available]
    if missing and systemd_manages:  # systemd enables controllers down the tree when a unit asks
        return Check("user.slice", "ok", f"{path}: {', '.join(missing)} not enabled yet; systemd enables them "
                     "when the governor first sets a limit that needs them")
    if missing:
        return Check("user.slice", "fail", f"{path}: controllers {', '.join(missing)} are not enabled for it",
                     "systemctl set-property user.slice CPUAccounting=yes MemoryAccounting=yes IOAccounting=yes "
                     "(without systemd: echo '+cpu +memory +io' > " f"{hierarchy.root}/cgroup.subtree_control)")
    lazy = [c for c in REQUIRED_CONTROLLERS if c not in enabled]
    if lazy and systemd_manages:
        return Check("user.slice", "ok", f"{path}: cpu, memory, io available; {', '.join(lazy)} not yet enabled for "
                     "user slices (systemd enables them when the governor first sets a limit)")
    if lazy:  # the cgroupfs backend writes limit files only: it enables no controller
        return Check("user.slice", "fail", f"{path}: {', '.join(lazy)} not enabled for user slices, and nothing will "
                     "enable them (systemd does not manage them): every write of their limits fails",
                     f"echo '{' '.join('+' + c for c in lazy)}' > {path}/cgroup.subtree_control")
    return Check("user.slice", "ok", f"{path}: cpu, memory, io enabled for user slices")


def _psi(procfs: str) -> Check:
    missing = [r for r in ("cpu", "memory", "io") if not _readable(Path(procfs, "pressure", r))]
    if missing:
        return Check("PSI", "warn", f"pressure stall information unavailable for {', '.join(missing)}: demand is "
                     "probed from throttling and memory.events only", "boot with psi=1 (CONFIG_PSI_DEFAULT_DISABLED)")
    return Check("PSI", "ok", f"{procfs}/pressure/cpu, memory and io readable")


def _readable(path: Path) -> bool:
    try:
        path.read_text()
        return True
    except OSError:
        return False


def _systemd(policy: Policy, systemd_dir: str) -> Check:
    if not Path(systemd_dir).is_dir():
        severity = "fail" if policy.backend == "systemd" else "ok"
        return Check("systemd", severity, "systemd is not PID 1: the cgroupfs backend writes the cgroup files",
                     "backend: systemd needs systemd as init" if severity == "fail" else "")
    try:
        backend, why = make_backend("systemd")
    except EnforceError as exc:
        return Check("systemd", "fail" if policy.backend in ("auto", "systemd") else "warn",
                     f"systemd runs but does not answer on the system bus: {exc}",
                     "systemctl status dbus; the governor needs the system bus to set slice properties")
    return Check("systemd", "ok", why)


JOB_SERVICES = ("cron", "crond", "atd")  # Debian's cron, RHEL's cronie, at on both


def _cron_and_at(pamd: Dirs) -> Check:
    """Do users' cron and at jobs run in their user slices? Only when the daemon's PAM session
    stack reaches pam_systemd.so, which registers each job as a logind session in her
    ``user-UID.slice``. Debian and Ubuntu leave it out of ``common-session-noninteractive``, the
    only session stack their cron and atd include; RHEL's crond reaches it through
    ``password-auth``. Unreadable PAM files count as not reaching (a warning, never an error).
    A stack read from a vendor directory (``/usr/lib/pam.d``) is edited as a copy in the first
    one (``/etc/pam.d``), which shadows it: a package update overwrites the vendor file."""
    dirs = pam_dirs(pamd)
    stacks = [s for s in (session_stack(name, dirs) for name in JOB_SERVICES) if s is not None]
    if not stacks:
        return Check("cron and at jobs", "ok", f"no cron or at daemon's PAM stack in {' or '.join(map(str, dirs))} "
                     f"(looked for {', '.join(JOB_SERVICES)})")
    outside = [s for s in stacks if not s.reaches_pam_systemd]
    if not outside:
        return Check("cron and at jobs", "ok", f"{', '.join(s.service for s in stacks)}: the PAM session stack reaches "
                     "pam_systemd.so: each job gets a logind session in her user slice")
    names = ", ".join(s.service for s in outside)
    files = " and ".join(str(s.path) for s in outside)
    vendor = [s for s in outside if dirs and s.path.parent != dirs[0]]  # found past the admin's directory
    edited = " and ".join(str(dirs[0] / s.service if s in vendor else s.path) for s in outside)
    unread = [u for s in outside for u in s.unread]
    return Check("cron and at jobs", "warn",
                 f"{names}: the PAM session stack ({files}) does not reach pam_systemd.so, so users' jobs run in "
                 f"{', '.join(s.service + '.service' for s in outside)} (system.slice), outside their user slices: "
                 "not governed, not counted in their demand, and their CPU and memory count as the host's own use, "
                 "which shrinks every user's capacity" + (f" (not readable: {', '.join(unread)})" if unread else ""),
                 (f"cp {' '.join(str(s.path) for s in vendor)} {dirs[0]}/ (package updates overwrite vendor files), "
                  "then " if vendor else "") +
                 f"add 'session optional pam_systemd.so' to {edited} (after its session include line, e.g. "
                 "@include common-session-noninteractive), so each job gets a logind session in her slice")


def _disks(policy: Policy, sysfs: str) -> Check:
    found = {d.name: d for d in host_disks(sysfs)}
    unknown = [n for n in policy.disks if n not in found]
    if unknown:
        return Check("disks", "fail", f"capacity.disks names {', '.join(unknown)}, not disks of this host "
                     f"(have: {', '.join(found) or 'none'})", f"fix {policy.source}: capacity.disks")
    unset = [n for n in found if n not in policy.disks]
    if unset and "io" in policy.enforce:
        return Check("disks", "warn", f"no bandwidth configured for {', '.join(unset)}: their I/O is not governed",
                     "drfgov calibrate io /path/on/that/disk, then paste the result under capacity.disks")
    return Check("disks", "ok", f"governed: {', '.join(policy.disks) or 'none'}")


def _nics(policy: Policy, sysfs: str) -> Check:
    found = host_nics(sysfs)
    described = [f"{n.name} {n.speed_bits_per_s / 1e6:g} Mbit/s" if n.speed_bits_per_s else f"{n.name} (speed unknown)"
                 for n in found]
    unknown = [n for n in policy.nics_bits_per_s if not Path(sysfs, "class", "net", n).exists()]
    if unknown:
        return Check("NICs", "warn", f"capacity.nics names {', '.join(unknown)}, not interfaces of this host",
                     f"fix {policy.source}: capacity.nics")
    if "net" in policy.enforce and not policy.nics_bits_per_s and not any(n.speed_bits_per_s for n in found):
        return Check("NICs", "warn", f"{', '.join(described) or 'none with a device'}: net is enforced but no NIC "
                     "reports a speed, so nothing is shaped", f"set capacity.nics in {policy.source}")
    shaped = ""
    if "net" in policy.enforce:
        names = list(policy.nics_bits_per_s) or [n.name for n in found if n.speed_bits_per_s]
        shaped = "; shaped: " + ", ".join(
            f"{n} ({'egress and ingress' if policy.nics_ingress.get(n, True) else 'egress only'})" for n in names)
    return Check("NICs", "ok", (", ".join(described) or "none with a device") + shaped)


def _shaping(policy: Policy) -> Check:
    """tc and nftables pieces, tried in a scratch network namespace (root only)."""
    if os.geteuid() != 0:
        return Check("network shaping", "warn", "not probed: needs root", "sudo drfgov doctor")
    from governor.shaping.probe import EGRESS_MODULES, probe

    pieces = probe()
    missing = [p for p in pieces if not p.ok]
    if not missing:
        return Check("network shaping", "ok", "HTB, nftables, IFB, ingress redirect and connmark all work")
    needed = [p for p in missing if p.module in EGRESS_MODULES or _ingress_wanted(policy)]
    severity = "fail" if needed and "net" in policy.enforce else "warn"
    detail = "; ".join(f"{p.name}: module {p.module} missing ({p.detail})" for p in missing)
    fix = "modprobe " + " ".join(sorted({p.module for p in missing})) + \
        " (or a kernel built with them; nftables also needs the nft command: apt-get install nftables)" + \
        ("; without the ingress pieces, set capacity.nics.IF.ingress: false to shape only what leaves"
         if any(p.module not in EGRESS_MODULES for p in missing) else "")
    return Check("network shaping", severity, detail, fix)


def _ingress_wanted(policy: Policy) -> bool:
    """Whether arriving traffic is to be shaped on some NIC (capacity.nics.IF.ingress, default yes)."""
    return not policy.nics_ingress or any(policy.nics_ingress.values())


def _ctnetlink(policy: Policy) -> Check | None:
    """With ingress shaping configured (net enforced, ingress on some NIC): does ctnetlink answer
    (:func:`governor.shaping.conntrack.ctnetlink_entries`)? Through it an install after a stop
    tells the governed users' connections marked before it to be tracked liberally
    (:func:`~governor.shaping.conntrack.track_liberally`). A warning, never a failure: that
    pass is best-effort — without it a download that outlived a restart may be counted in
    another class until it ends (README, Network shaping: "Across a stop and a start").
    None without ingress shaping: nothing asks ctnetlink then."""
    if "net" not in policy.enforce or not _ingress_wanted(policy):
        return None
    if os.geteuid() != 0:
        return Check("conntrack netlink", "warn", "not probed: needs root", "sudo drfgov doctor")
    from governor.shaping.conntrack import ctnetlink_entries
    from governor.shaping.model import ShapingError

    try:
        entries = ctnetlink_entries()
    except ShapingError as exc:
        return Check("conntrack netlink", "warn", f"{exc}: after a restart, connections marked before it keep "
                     "conntrack's strict TCP window, so a download that outlived the restart may be counted in "
                     "another user's class until it ends",
                     "modprobe nf_conntrack_netlink (or a kernel built with CONFIG_NF_CT_NETLINK)")
    return Check("conntrack netlink", "ok", f"ctnetlink answers ({entries} connections tracked): after a restart, "
                 "connections marked before it are tracked liberally")


def _writable(policy: Policy) -> list[Check]:
    """The state and history directories, and metrics.textfile's where one is set: trusted as
    ``drfgov run`` and ``check-config`` judge them (:func:`governor.service.daemon.output_refusals`:
    a directory another user owns or may write is refused there, and so is a file there that is
    not drfgov's; the textfile's also when, as root, it is not there and cannot be made), then
    writable (a directory not there yet: its nearest existing parent). A textfile directory that
    is there but not writable even by root is a warning, as in check-config: run starts, and logs
    each textfile write that fails (:func:`governor.service.daemon.textfile_directory_access`)."""
    from governor.service.daemon import output_refusals, textfile_directory_access

    refusals = output_refusals(policy)
    directories = [("state directory", Path(policy.state_path).parent, "state_path"),
                   ("history directory", Path(policy.history_path).parent, "history.path")]
    if policy.metrics.textfile is not None:
        directories.append(("textfile directory", Path(policy.metrics.textfile).parent, "metrics.textfile"))
    out = []
    for what, path, key in directories:
        existing = next((p for p in (path, *path.parents) if p.exists()), Path("/"))
        refused = f"{key}: {refusals[key]}" if key in refusals else None
        access = textfile_directory_access(policy) if key == "metrics.textfile" else None
        if refused is not None:  # the message names the fix: shown in the fix column
            reason, _, fix = refused.partition("; fix: ")
            if not fix and ": point " in refused:  # a file there not drfgov's (file_refusals)
                reason, _, fix = refused.rpartition(": point ")
                fix = f"point {fix}"
            out.append(Check(what, "fail", f"drfgov run refuses it: {reason}",
                             fix or f"point {key} in {policy.source} at a directory only root may write"))
        elif access is not None and not access[0]:  # check-config's warning: run starts, its writes fail
            out.append(Check(what, "warn", f"{key}: {access[1]}",
                             f"make {path} writable, or point {key} in {policy.source} at a writable directory"))
        elif os.access(existing, os.W_OK):
            out.append(Check(what, "ok", f"{path} is writable" + ("" if existing == path else " (will be created)")))
        else:
            out.append(Check(what, "fail", f"{path} is not writable by uid {os.getuid()}",
                             "run the governor as root (the systemd unit does)"))
    return out
