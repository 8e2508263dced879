"""``drfgov doctor`` judges what ``drfgov run`` will judge: the state, history and textfile directories by
the daemon's own trust rules, user.slice's controllers by who will enable them; and whether
cron and at jobs land in their users' slices (their PAM session stacks, read from fake trees)."""

from __future__ import annotations

import os

from governor.config.policy import Policy
from governor.service.doctor import _writable


def _checks(policy: Policy) -> dict:
    return {c.name: c for c in _writable(policy)}


def test_directories_the_daemon_refuses_fail_with_its_reason_and_fix(tmp_path):
    """A world-writable state directory, and a history directory not there yet under a
    world-writable parent: every uid may write them (root above all), so the old check called
    both fine while drfgov run refused them."""
    state_dir, parent = tmp_path / "state", tmp_path / "shared"
    state_dir.mkdir()
    parent.mkdir()
    state_dir.chmod(0o777)
    parent.chmod(0o777)
    checks = _checks(Policy(state_path=str(state_dir / "state.json"), history_path=str(parent / "lib" / "history.db"),
                            source="/etc/drfgov.yaml"))
    state, history = checks["state directory"], checks["history directory"]
    assert state.status == "fail" and "drfgov run refuses it" in state.detail
    assert state.detail.startswith(f"drfgov run refuses it: state_path: {state_dir}: world-writable (mode 0777)")
    assert state.detail.count(str(state_dir)) == 1, state.detail  # named once (and again in the fix)
    assert state.fix == f"chmod go-w {state_dir}"
    assert history.status == "fail" and f"history.path: {parent}: world-writable" in history.detail  # its parent's
    assert history.detail.count(str(parent)) == 1, history.detail
    assert history.fix.startswith(f"chmod go-w {parent}") and "history.path" in history.fix


def test_a_directory_of_another_user_fails(tmp_path):
    if os.geteuid() != 0:
        import pytest

        pytest.skip("needs root to give a directory away")
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    os.chown(state_dir, 65534, 65534)
    state = _checks(Policy(state_path=str(state_dir / "state.json"), history_path=str(tmp_path / "h" / "h.db")))
    assert state["state directory"].status == "fail" and "not root" in state["state directory"].detail
    assert state["state directory"].fix == f"chown root:root {state_dir}"
    assert state["history directory"].status == "ok"


def test_trusted_directories_are_fine_and_one_not_there_yet_will_be_created(tmp_path):
    (tmp_path / "state").mkdir(mode=0o755)
    checks = _checks(Policy(state_path=str(tmp_path / "state" / "state.json"),
                            history_path=str(tmp_path / "lib" / "drfgov" / "history.db")))
    assert checks["state directory"].status == "ok" and "(will be created)" not in checks["state directory"].detail
    assert checks["history directory"].status == "ok" and "(will be created)" in checks["history directory"].detail


def _user_slice_with(tmp_path, available: str, enabled: str):
    from cgroups.mount import Hierarchy

    (tmp_path / "user.slice").mkdir()
    (tmp_path / "user.slice" / "cgroup.controllers").write_text(available + "\n")
    (tmp_path / "user.slice" / "cgroup.subtree_control").write_text(enabled + "\n")
    return Hierarchy(tmp_path, frozenset({"cpu", "memory", "io"}), frozenset())


def test_controllers_not_enabled_for_user_slices_fail_when_systemd_will_not_enable_them(tmp_path):
    """Without systemd nothing writes user.slice's cgroup.subtree_control (the cgroupfs
    backend writes limit files only): a controller available but not enabled there makes every
    write of its limits fail (ControllerMissing) — the old check said ok."""
    from governor.service.doctor import _user_slice

    hierarchy = _user_slice_with(tmp_path, "cpu memory io pids", "cpu")
    check = _user_slice(hierarchy, systemd_manages=False)
    assert check.status == "fail" and "memory, io not enabled for user slices" in check.detail
    assert check.fix == f"echo '+memory +io' > {tmp_path}/user.slice/cgroup.subtree_control"  # only the missing ones
    assert _user_slice(hierarchy, systemd_manages=True).status == "ok"  # systemd enables them when asked
    (tmp_path / "user.slice" / "cgroup.subtree_control").write_text("cpu io memory\n")
    assert _user_slice(hierarchy, systemd_manages=False).status == "ok"


# Debian bookworm's files as shipped (cron 3.0pl1, at 3.2, libpam-runtime; comments shortened)
DEBIAN_CRON = """# The PAM configuration file for the cron daemon

@include common-auth

# Sets the loginuid process attribute
session    required     pam_loginuid.so
session       required   pam_env.so
session       required   pam_env.so envfile=/etc/default/locale

@include common-account
@include common-session-noninteractive 

# Sets up user limits, please define limits for cron tasks
session    required   pam_limits.so
"""
DEBIAN_ATD = """#
# The PAM configuration file for the at daemon
#

@include common-auth
@include common-account
@include common-session-noninteractive
session    required   pam_limits.so
session    required   pam_env.so user_readenv=1
"""
DEBIAN_COMMON = {
    "common-auth": "auth\t[success=1 default=ignore]\tpam_unix.so nullok\nauth\trequisite\t\t\tpam_deny.so\n",
    "common-account": "account\t[success=1 new_authtok_reqd=done default=ignore]\tpam_unix.so\n",
    "common-session": "session\t[default=1]\t\t\tpam_permit.so\nsession\trequisite\t\t\tpam_deny.so\n"
                      "session\trequired\t\t\tpam_permit.so\nsession\trequired\tpam_unix.so \n"
                      "session\toptional\tpam_systemd.so \n",
    "common-session-noninteractive": "session\t[default=1]\t\t\tpam_permit.so\nsession\trequisite\t\t\tpam_deny.so\n"
                                     "session\trequired\t\t\tpam_permit.so\nsession\trequired\tpam_unix.so \n",
}
# RHEL 9's cronie and authselect's password-auth (a symlink into /etc/authselect there)
RHEL_CROND = """#
# The PAM configuration file for the cron daemon
#
auth       include    password-auth
account    required   pam_access.so
account    include    password-auth
session    required   pam_loginuid.so
session    include    password-auth
"""
RHEL_PASSWORD_AUTH = """# Generated by authselect
auth        required                                     pam_env.so
session     optional                                     pam_keyinit.so revoke
session     required                                     pam_limits.so
-session    optional                                     pam_systemd.so
session     [success=1 default=ignore]                   pam_succeed_if.so service in crond quiet use_uid
session     required                                     pam_unix.so
"""
FIX_LINE = "session    optional   pam_systemd.so\n"


def _pamd(tmp_path, files: dict[str, str]):
    pamd = tmp_path / "pam.d"
    pamd.mkdir()
    for name, text in files.items():
        (pamd / name).write_text(text)
    return pamd


def _jobs(pamd):
    from governor.service.doctor import _cron_and_at

    return _cron_and_at(pamd)  # one directory, or several in lookup order


def test_debian_cron_jobs_run_outside_user_slices_and_the_fix_says_which_line_to_add(tmp_path):
    """common-session-noninteractive, the only session stack Debian's cron includes, has no
    pam_systemd (Session-Interactive-Only): jobs run in cron.service, ungoverned and uncounted."""
    pamd = _pamd(tmp_path, {**DEBIAN_COMMON, "cron": DEBIAN_CRON})
    check = _jobs(pamd)
    assert check.name == "cron and at jobs" and check.status == "warn"
    assert check.detail.startswith(f"cron: the PAM session stack ({pamd}/cron) does not reach pam_systemd.so")
    assert "cron.service (system.slice)" in check.detail and "not governed, not counted" in check.detail
    assert "shrinks every user's capacity" in check.detail and "not readable" not in check.detail
    assert check.fix.startswith(f"add 'session optional pam_systemd.so' to {pamd}/cron (after its session include")
    assert "logind session in her slice" in check.fix


def test_debian_cron_with_the_fix_line_is_fine(tmp_path):
    pamd = _pamd(tmp_path, {**DEBIAN_COMMON, "cron": DEBIAN_CRON + FIX_LINE})
    check = _jobs(pamd)
    assert check.status == "ok" and check.detail.startswith("cron: the PAM session stack reaches pam_systemd.so")


def test_rhel_crond_reaches_pam_systemd_through_session_include_password_auth(tmp_path):
    """``session include password-auth``, whose ``-session optional pam_systemd.so`` is in a file
    the PAM directory links to by an absolute path (authselect's layout)."""
    authselect = tmp_path / "authselect"
    authselect.mkdir()
    (authselect / "password-auth").write_text(RHEL_PASSWORD_AUTH)
    pamd = _pamd(tmp_path, {"crond": RHEL_CROND, "atd": RHEL_CROND.replace("cron", "at")})
    (pamd / "password-auth").symlink_to(authselect / "password-auth")
    check = _jobs(pamd)
    assert check.status == "ok" and check.detail.startswith("crond, atd: ")


def test_an_include_of_another_type_brings_in_no_session_rule(tmp_path):
    """``auth include F`` brings in F's auth lines only: its pam_systemd session line does not count;
    nor does a pam_systemd rule of another type."""
    pamd = _pamd(tmp_path, {"password-auth": RHEL_PASSWORD_AUTH, "crond": "auth include password-auth\n"
                            "account include password-auth\naccount optional pam_systemd.so\n"})
    assert _jobs(pamd).status == "warn"


def test_atd_without_pam_systemd_is_named_alone(tmp_path):
    pamd = _pamd(tmp_path, {**DEBIAN_COMMON, "cron": DEBIAN_CRON + FIX_LINE, "atd": DEBIAN_ATD})
    check = _jobs(pamd)
    assert check.status == "warn" and check.detail.startswith(f"atd: the PAM session stack ({pamd}/atd)")
    assert "atd.service (system.slice)" in check.detail and "cron" not in check.detail
    assert f"to {pamd}/atd (" in check.fix


def test_both_daemons_outside_are_both_named(tmp_path):
    pamd = _pamd(tmp_path, {**DEBIAN_COMMON, "cron": DEBIAN_CRON, "atd": DEBIAN_ATD})
    check = _jobs(pamd)
    assert check.status == "warn" and check.detail.startswith("cron, atd: ")
    assert "cron.service, atd.service (system.slice)" in check.detail
    assert f"to {pamd}/cron and {pamd}/atd (" in check.fix


def test_no_cron_or_at_daemon_is_fine(tmp_path):
    pamd = _pamd(tmp_path, DEBIAN_COMMON)
    check = _jobs(pamd)
    assert check.status == "ok" and check.detail == f"no cron or at daemon's PAM stack in {pamd} (looked for cron, crond, atd)"
    assert _jobs(tmp_path / "no-such-dir").status == "ok"


def test_an_include_cycle_ends(tmp_path):
    pamd = _pamd(tmp_path, {"cron": "@include a\n", "a": "session include b\n", "b": "-session substack a\n@include cron\n"})
    check = _jobs(pamd)
    assert check.status == "warn" and "not readable" not in check.detail


def test_a_missing_include_is_a_warning_naming_it_not_an_error(tmp_path):
    pamd = _pamd(tmp_path, {"cron": "@include common-session-noninteractive\nsession include /nowhere/password-auth\n"})
    check = _jobs(pamd)
    assert check.status == "warn"
    assert f"(not readable: {pamd}/common-session-noninteractive, /nowhere/password-auth)" in check.detail


def test_includes_deeper_than_the_limit_are_not_followed(tmp_path):
    from governor.service.pamstack import MAX_DEPTH, session_stack

    chain = {f"f{i}": f"@include f{i + 1}\n" for i in range(MAX_DEPTH + 2)}
    chain[f"f{MAX_DEPTH + 2}"] = FIX_LINE
    pamd = _pamd(tmp_path, {"cron": "@include f0\n", **chain})
    stack = session_stack("cron", pamd)
    assert not stack.reaches_pam_systemd and stack.unread == (f"f{MAX_DEPTH} (more than {MAX_DEPTH} includes deep)",)
    (pamd / "cron").write_text(f"@include f3\n")  # within the limit
    assert session_stack("cron", pamd).reaches_pam_systemd


def test_the_rules_are_read_as_linux_pam_assembles_them(tmp_path):
    """Case-insensitive type and control, a bracketed control with blanks, a full module path, a
    continued line; a commented rule and a rule cut by a comment do not count."""
    from governor.service.pamstack import session_stack

    pamd = _pamd(tmp_path, {"cron": "# session optional pam_systemd.so\nsession optional # pam_systemd.so\n"})
    assert not session_stack("cron", pamd).reaches_pam_systemd
    for text in ("SESSION Optional /lib/x86_64-linux-gnu/security/pam_systemd.so\n",
                 "session [success=ok ignore=ignore default=bad] pam_systemd.so class=background\n",
                 "-session optional \\\n\n# between\n   pam_systemd.so\n",
                 "Session Include common\n"):
        (pamd / "cron").write_text(text)
        (pamd / "common").write_text(FIX_LINE)
        assert session_stack("cron", pamd).reaches_pam_systemd, text
    (pamd / "cron").write_text("session optional pam_systemd.so.bak\nsession optional not_pam_systemd.so\n")
    assert not session_stack("cron", pamd).reaches_pam_systemd


def test_odd_files_give_a_warning_never_a_traceback(tmp_path, monkeypatch):
    """Binary, huge (the rule past the 64 KiB read), a FIFO (must not block), a directory, a NUL
    in an included name, a file the doctor may not read."""
    from governor.service.pamstack import MAX_BYTES

    pamd = _pamd(tmp_path, {})
    (pamd / "cron").write_bytes(b"\x00\xff\xfe@include \x80\x81\n" + bytes(range(256)) * 64 + b"\n@include big\n"
                                b"@include fifo\n@include dir\n@include bad\x00name\n")
    (pamd / "big").write_text("#" * MAX_BYTES + "\n" + FIX_LINE)
    os.mkfifo(pamd / "fifo")
    (pamd / "dir").mkdir()
    check = _jobs(pamd)
    assert check.status == "warn" and f"{pamd}/fifo" in check.detail and f"{pamd}/dir" in check.detail
    (pamd / "big").write_text(FIX_LINE)
    assert _jobs(pamd).status == "ok"
    (pamd / "atd").write_text(FIX_LINE)
    real_open = os.open

    def denied(path, *args):  # EACCES even for root, who would read a mode-0 file
        if str(path) == f"{pamd}/atd":
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args)

    monkeypatch.setattr(os, "open", denied)
    check = _jobs(pamd)
    assert check.status == "warn" and check.detail.startswith("atd: ") and f"(not readable: {pamd}/atd)" in check.detail


def _etc_and_vendor(tmp_path, etc: dict[str, str], vendor: dict[str, str]):
    """Stand-ins for /etc/pam.d and /usr/lib/pam.d, in Linux-PAM's lookup order."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "usr-lib").mkdir()
    return _pamd(tmp_path / "etc", etc), _pamd(tmp_path / "usr-lib", vendor)


def test_a_service_only_in_the_vendor_directory_is_found_and_judged(tmp_path):
    """openSUSE and Linux-PAM's vendordir builds ship cron's stack in /usr/lib/pam.d only: it is
    judged (read from there, includes too), named where it is, and the fix copies it first."""
    etc, vendor = _etc_and_vendor(tmp_path, {}, {**DEBIAN_COMMON, "cron": DEBIAN_CRON})
    check = _jobs((etc, vendor))
    assert check.status == "warn" and "not readable" not in check.detail
    assert check.detail.startswith(f"cron: the PAM session stack ({vendor}/cron) does not reach pam_systemd.so")
    assert check.fix.startswith(f"cp {vendor}/cron {etc}/ (package updates overwrite vendor files), then "
                                f"add 'session optional pam_systemd.so' to {etc}/cron (after its session include")
    (vendor / "cron").write_text(DEBIAN_CRON + FIX_LINE)
    assert _jobs((etc, vendor)).status == "ok"


def test_an_etc_file_shadows_the_vendor_file_of_the_same_name(tmp_path):
    """The first directory that has the name wins, whole: the vendor's rules are not merged in."""
    etc, vendor = _etc_and_vendor(tmp_path, {"cron": DEBIAN_CRON}, {**DEBIAN_COMMON, "cron": FIX_LINE})
    check = _jobs((etc, vendor))
    assert check.status == "warn" and check.detail.startswith(f"cron: the PAM session stack ({etc}/cron) ")
    assert check.fix.startswith(f"add 'session optional pam_systemd.so' to {etc}/cron (") and "cp " not in check.fix
    (etc / "cron").write_text(FIX_LINE)
    (vendor / "cron").write_text(DEBIAN_CRON)
    assert _jobs((etc, vendor)).status == "ok"
    (etc / "cron").unlink()  # a dangling symlink is no file: Linux-PAM's fopen fails and it looks on
    (etc / "cron").symlink_to(tmp_path / "nowhere")
    assert _jobs((etc, vendor)).detail.startswith(f"cron: the PAM session stack ({vendor}/cron) ")


def test_an_include_whose_file_is_only_in_the_vendor_directory_is_followed(tmp_path):
    """An admin's cron (in /etc/pam.d) including the distribution's common file (/usr/lib/pam.d);
    a name in neither directory is named as missing from both."""
    etc, vendor = _etc_and_vendor(tmp_path, {"cron": "@include common-session\n"}, DEBIAN_COMMON)
    check = _jobs((etc, vendor))
    assert check.status == "ok" and check.detail.startswith("cron: the PAM session stack reaches pam_systemd.so")
    (etc / "cron").write_text("@include nowhere\n")
    assert f"(not readable: {etc}/nowhere (nor in {vendor}))" in _jobs((etc, vendor)).detail


def test_an_include_in_both_directories_is_read_from_etc(tmp_path):
    """Each included name is looked up afresh, /etc/pam.d first, even from a vendor file."""
    etc, vendor = _etc_and_vendor(tmp_path, {"common": "session required pam_unix.so\n"},
                                  {"cron": "session include common\n", "common": FIX_LINE})
    assert _jobs((etc, vendor)).status == "warn"
    (etc / "common").write_text(FIX_LINE)
    (vendor / "common").write_text("session required pam_unix.so\n")
    assert _jobs((etc, vendor)).status == "ok"


def test_run_checks_reads_the_pam_directory_it_is_given(tmp_path, monkeypatch):
    import governor.service.doctor as doctor

    monkeypatch.setattr(doctor, "_shaping", lambda policy: doctor.Check("network shaping", "warn", "not probed"))
    pamd = _pamd(tmp_path, {**DEBIAN_COMMON, "atd": DEBIAN_ATD})
    (tmp_path / "block").mkdir()
    (tmp_path / "class" / "net").mkdir(parents=True)
    checks = doctor.run_checks(Policy(state_path=str(tmp_path / "s.json"), history_path=str(tmp_path / "h.db")),
                               mountinfo="", sysfs=str(tmp_path), procfs=str(tmp_path),
                               systemd_dir=str(tmp_path / "none"), pamd=str(pamd))
    names = [c.name for c in checks]
    assert names.index("systemd") + 1 == names.index("cron and at jobs")
    assert {c.name: c for c in checks}["cron and at jobs"].status == "warn"
    (tmp_path / "empty").mkdir()  # several directories, in lookup order: atd found in the second
    checks = doctor.run_checks(Policy(state_path=str(tmp_path / "s.json"), history_path=str(tmp_path / "h.db")),
                               mountinfo="", sysfs=str(tmp_path), procfs=str(tmp_path),
                               systemd_dir=str(tmp_path / "none"), pamd=(str(tmp_path / "empty"), str(pamd)))
    assert {c.name: c for c in checks}["cron and at jobs"].detail.startswith(f"atd: the PAM session stack ({pamd}/atd)")


NET = ("cpu", "memory", "io", "net")


def test_ctnetlink_is_checked_only_where_ingress_is_shaped(monkeypatch):
    """Only an install with ingress shaping asks ctnetlink (its pass over connections marked
    before a restart): without net enforced, or with ingress off on every NIC, no check."""
    import governor.service.doctor as doctor
    import governor.shaping.conntrack as conntrack

    def asked(netns=None):
        raise AssertionError("ctnetlink asked without ingress shaping")
    monkeypatch.setattr(conntrack, "ctnetlink_entries", asked)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert doctor._ctnetlink(Policy()) is None  # net not enforced by default
    assert doctor._ctnetlink(Policy(enforce=NET, nics_ingress={"eth0": False, "eth1": False})) is None


def test_ctnetlink_answering_is_ok_and_not_answering_is_a_warning_with_the_module(monkeypatch):
    import governor.service.doctor as doctor
    import governor.shaping.conntrack as conntrack
    from governor.shaping.model import ShapingError

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(conntrack, "ctnetlink_entries", lambda netns=None: 42)
    for policy in (Policy(enforce=NET), Policy(enforce=NET, nics_ingress={"eth0": False, "eth1": True})):
        check = doctor._ctnetlink(policy)
        assert check.name == "conntrack netlink" and check.status == "ok" and "42 connections tracked" in check.detail

    def refused(netns=None):
        raise ShapingError("conntrack: ctnetlink does not answer: EINVAL (Invalid argument)")
    monkeypatch.setattr(conntrack, "ctnetlink_entries", refused)
    check = doctor._ctnetlink(Policy(enforce=NET))
    assert check.status == "warn"  # best-effort: never a failure
    assert check.detail.startswith("conntrack: ctnetlink does not answer: EINVAL (Invalid argument): after a restart")
    assert "counted in another user's class until it ends" in check.detail
    assert check.fix.startswith("modprobe nf_conntrack_netlink")


def test_ctnetlink_without_root_is_not_probed(monkeypatch):
    import governor.service.doctor as doctor
    import governor.shaping.conntrack as conntrack

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(conntrack, "ctnetlink_entries", lambda netns=None: 0)
    check = doctor._ctnetlink(Policy(enforce=NET))
    assert (check.status, check.detail, check.fix) == ("warn", "not probed: needs root", "sudo drfgov doctor")


def test_run_checks_puts_the_ctnetlink_warning_after_shaping_and_it_fails_nothing(tmp_path, monkeypatch):
    import governor.service.doctor as doctor
    import governor.shaping.conntrack as conntrack
    from governor.shaping.model import ShapingError

    def refused(netns=None):
        raise ShapingError("conntrack: ctnetlink does not answer: EINVAL (Invalid argument)")
    monkeypatch.setattr(doctor, "_shaping", lambda policy: doctor.Check("network shaping", "ok", "all work"))
    monkeypatch.setattr(conntrack, "ctnetlink_entries", refused)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    (tmp_path / "block").mkdir()
    (tmp_path / "class" / "net").mkdir(parents=True)
    checks = doctor.run_checks(Policy(enforce=NET, state_path=str(tmp_path / "s.json"),
                                      history_path=str(tmp_path / "h.db")),
                               mountinfo="", sysfs=str(tmp_path), procfs=str(tmp_path),
                               systemd_dir=str(tmp_path / "none"), pamd=str(tmp_path / "pam.d"))
    names = [c.name for c in checks]
    assert names.index("network shaping") + 1 == names.index("conntrack netlink")
    assert {c.name: c for c in checks}["conntrack netlink"].status == "warn"


class _FakeNFCTSocket:
    """pyroute2's NFCTSocket as ctnetlink_entries uses it: ``count()`` answers or raises."""

    made: list = []

    def __init__(self, error=None, **kwargs):
        self.error, self.kwargs, self.closed = error, kwargs, False
        _FakeNFCTSocket.made.append(self)

    def count(self):
        if self.error is not None:
            raise self.error
        from pyroute2.netlink.nfnetlink.nfctsocket import nfct_stats

        msg = nfct_stats()
        msg["attrs"] = [("CTA_STATS_GLOBAL_ENTRIES", 7), ("CTA_STATS_GLOBAL_MAX_ENTRIES", 262144)]
        return [msg]

    def close(self):
        self.closed = True


def test_ctnetlink_entries_counts_and_translates_netlink_errors_once(monkeypatch):
    """pyroute2's NetlinkError (a tuple when printed) becomes a ShapingError naming the errno;
    the socket is closed either way."""
    import errno
    from functools import partial

    import pyroute2
    import pytest
    from pyroute2.netlink.exceptions import NetlinkError

    from governor.shaping.conntrack import ctnetlink_entries
    from governor.shaping.model import ShapingError

    _FakeNFCTSocket.made = []
    monkeypatch.setattr(pyroute2, "NFCTSocket", _FakeNFCTSocket)
    assert ctnetlink_entries() == 7 and _FakeNFCTSocket.made[-1].closed
    assert ctnetlink_entries("scratch") == 7 and _FakeNFCTSocket.made[-1].kwargs == {"netns": "scratch"}
    monkeypatch.setattr(pyroute2, "NFCTSocket", partial(_FakeNFCTSocket, NetlinkError(errno.EINVAL)))
    with pytest.raises(ShapingError) as raised:
        ctnetlink_entries()
    assert str(raised.value) == "conntrack: ctnetlink does not answer: EINVAL (Invalid argument)"
    assert _FakeNFCTSocket.made[-1].closed

    def unopened(**kwargs):
        raise OSError(errno.EPROTONOSUPPORT, os.strerror(errno.EPROTONOSUPPORT))
    monkeypatch.setattr(pyroute2, "NFCTSocket", unopened)
    with pytest.raises(ShapingError, match="^conntrack: cannot open ctnetlink: EPROTONOSUPPORT"):
        ctnetlink_entries()


def test_a_textfile_directory_root_cannot_write_fails_or_warns_as_check_config_says(tmp_path, monkeypatch):
    """The audit's leftovers: doctor judged no metrics.textfile directory. As root (faked), one
    not there under a parent root cannot write (a read-only filesystem) is refused by check-config
    and run: doctor fails it, in check-config's words; one there that root cannot write is a
    check-config warning (run starts and logs each failed write): doctor warns, in its words."""
    import pytest

    from governor.cli.app import _textfile_warnings, check_directories
    from governor.config.errors import InputError
    from governor.config.metrics import MetricsExport

    from tests.textfiledirs import read_only_as_root

    read_only = read_only_as_root(monkeypatch, tmp_path)

    def policy(textfile):
        return Policy(state_path=str(tmp_path / "run" / "state.json"), history_path=str(tmp_path / "lib" / "h.db"),
                      metrics=MetricsExport(textfile=str(textfile)), source="/etc/drfgov/drfgov.yaml")

    to_make = policy(read_only / "prom" / "drfgov.prom")
    textfile = _checks(to_make)["textfile directory"]
    with pytest.raises(InputError) as refused:
        check_directories(to_make)
    reason, _, fix = str(refused.value).removeprefix("/etc/drfgov/drfgov.yaml: ").partition("; fix: ")
    assert textfile.status == "fail" and textfile.detail == f"drfgov run refuses it: {reason}" and textfile.fix == fix
    assert f"{read_only}/prom is not there and cannot be made" in textfile.detail
    there = policy(read_only / "drfgov.prom")
    textfile = _checks(there)["textfile directory"]
    check_directories(there)  # not refused: a warning
    assert [f"/etc/drfgov/drfgov.yaml: {textfile.detail}"] == _textfile_warnings(there)
    assert textfile.status == "warn" and "run starts, and logs each textfile write that fails" in textfile.detail
    assert textfile.fix == (f"make {read_only} writable, or point metrics.textfile in /etc/drfgov/drfgov.yaml at a "
                            "writable directory")
    checks = _checks(policy(tmp_path / "prom" / "drfgov.prom"))
    assert checks["textfile directory"].status == "ok" and "(will be created)" in checks["textfile directory"].detail
    assert "textfile directory" not in _checks(Policy(state_path=str(tmp_path / "run" / "state.json"),
                                                      history_path=str(tmp_path / "lib" / "h.db")))
