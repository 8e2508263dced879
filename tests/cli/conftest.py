"""Run the *installed* ``drfgov`` console script, as an admin would."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _installed_drfgov() -> str:
    beside = Path(sys.executable).parent / "drfgov"
    found = str(beside) if beside.exists() else shutil.which("drfgov")
    if not found:
        pytest.fail("the drfgov command is not installed (pip install -e .): CLI tests cannot run", pytrace=False)
    return found


def cli_env(runtime_dir: Path) -> dict[str, str]:
    """The environment for a drfgov under test: its lock and snapshot in ``runtime_dir``, as
    systemd's ``RuntimeDirectory=`` would give it (never this machine's /run/drfgov)."""
    import os

    return {**os.environ, "RUNTIME_DIRECTORY": str(runtime_dir)}


@pytest.fixture(scope="session")
def drfgov(tmp_path_factory):
    exe = _installed_drfgov()
    env = cli_env(tmp_path_factory.mktemp("runtime"))

    def run(*args, input=None):
        return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, input=input, timeout=120,
                              cwd=REPO, env=env)

    return run
