"""``drfgov doctor`` judges what ``drfgov run`` will judge: the state and history directories by
the daemon's own trust rules, user.slice's controllers by who will enable them."""

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
    assert f"{state_dir} is world-writable (mode 0777)" in state.detail and "state_path" in state.detail
    assert state.fix == f"chmod go-w {state_dir}"
    assert history.status == "fail" and f"{parent} is world-writable" in history.detail  # judged by its parent
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
