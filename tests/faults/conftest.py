"""Fixtures of the fault suite: each test's world on a tmpfs of its own (fsync as cheap as
/run's), in a directory every local user may traverse (like /run and /var/lib), so that a
test running as another uid meets the daemon's own permissions."""

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def base():
    path = Path(tempfile.mkdtemp(prefix="drfgov-faults-"))
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,mode=0755", "drfgov-faults", str(path)],
                             capture_output=True).returncode == 0
    path.chmod(0o755)
    yield path
    if mounted:
        subprocess.run(["umount", "-l", str(path)], check=False)
    shutil.rmtree(path, ignore_errors=True)
