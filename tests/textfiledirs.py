"""Directories for the tests of where ``metrics.textfile`` may be written (check-config, run,
doctor): the same ones in each, so each command is held to the same cases."""

import os
from pathlib import Path


def textfile_dirs(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """A world-writable directory, a private one (root's way: 0755), a regular file, and the
    policy lines that put state.json and the history in the private one."""
    shared, private, a_file = tmp_path / "shared", tmp_path / "private", tmp_path / "a-file"
    shared.mkdir()
    shared.chmod(0o777)
    private.mkdir(mode=0o755)
    a_file.write_text("")
    outputs = f"state_path: {private}/run/state.json\nhistory: {{path: {private}/lib/h.db}}\n"
    return shared, private, a_file, outputs


def read_only_as_root(monkeypatch, tmp_path: Path) -> Path:
    """A directory root cannot write (``os.access`` says so: no read-only mount here), with the
    daemon's module believing it runs as root."""
    from governor.service import daemon

    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o755)
    real_access = os.access
    monkeypatch.setattr(daemon.os, "access", lambda path, mode: real_access(path, mode) and Path(path) != read_only)
    monkeypatch.setattr(daemon.os, "geteuid", lambda: 0)
    return read_only
