"""The installed ``drfgov run`` (the .venv's console script) with a policy for the test tree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.cli.conftest import REPO, _installed_drfgov


def write_policy(tmp_path: Path, parent: str, body: str) -> Path:
    """The policy file: ``body`` plus the test tree's ``cgroup_v1.parent`` and private state
    paths (root-owned, mode 0644, in a root-owned 0700 directory: the trust check passes)."""
    path = tmp_path / "policy.yaml"
    path.write_text(body + f"\ncgroup_v1: {{parent: {parent}}}\nstate_path: {tmp_path}/state.json\n"
                           f"history: {{path: {tmp_path}/history.db}}\n")
    path.chmod(0o644)
    return path


class Daemon:
    """``drfgov run --config POLICY -v`` in the background; :meth:`stop` sends SIGTERM."""

    def __init__(self, tmp_path: Path, policy: Path):
        self.runtime = tmp_path / "run"
        self.log = tmp_path / "drfgov.log"
        self.state = tmp_path / "state.json"
        env = {**os.environ, "RUNTIME_DIRECTORY": str(self.runtime)}
        self._out = open(self.log, "w")
        self.proc = subprocess.Popen([_installed_drfgov(), "run", "--config", str(policy), "-v"], cwd=REPO, env=env,
                                     stdout=self._out, stderr=subprocess.STDOUT, text=True)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def state_doc(self) -> dict | None:
        try:
            return json.loads(self.state.read_text())
        except (OSError, ValueError):
            return None

    def stop(self, timeout_s: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self._out.close()
        return code

    def output(self) -> str:
        return self.log.read_text()
