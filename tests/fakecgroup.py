"""Fake cgroupfs trees for unit tests, built from files a real kernel wrote (tests/fixtures)."""

import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
KERNEL_FILES = FIXTURES / "linux-6.1" / "cgroup"


def fake_cgroup(root: Path, relative: str = "user.slice/user-1000.slice", **overrides: str) -> Path:
    """A directory holding the captured interface files, with ``overrides`` (``cpu_max="..."``
    for cpu.max) replacing some; a value of None removes the file."""
    path = root / relative
    path.mkdir(parents=True, exist_ok=True)
    for src in KERNEL_FILES.iterdir():
        shutil.copy(src, path / src.name)
    for key, text in overrides.items():
        name = key.replace("_", ".", 1) if key.startswith(("cpu_", "memory_", "io_", "cgroup_")) else key
        if text is None:
            (path / name).unlink()
        else:
            (path / name).write_text(text)
    return path
