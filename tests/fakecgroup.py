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


KERNEL_FILES_V1 = FIXTURES / "linux-6.18-v1"
V1_CONTROLLERS = ("cpu", "cpuacct", "memory", "blkio")


def fake_v1_tree(root: Path, relative: str = "user.slice/user-1000.slice", blkio: str = "blkio-limited"):
    """A fake set of cgroup v1 hierarchies under ``root`` (``root/cpu``, ``root/cpuacct``, ...)
    with ``relative`` in each holding the captured v1 files (blkio's from ``blkio``), and the
    :class:`cgroups_v1.mounts.V1Mounts` that points at them."""
    from cgroups_v1.mounts import V1Mounts

    points = {}
    for controller in V1_CONTROLLERS:
        point = root / controller
        path = point / relative
        path.mkdir(parents=True, exist_ok=True)
        source = KERNEL_FILES_V1 / (blkio if controller == "blkio" else controller)
        for src in source.iterdir():
            shutil.copy(src, path / src.name)
        (path / "cgroup.procs").write_text("")
        points[controller] = point
    return V1Mounts(points)


def fake_mixed_tree(root: Path, uid: int = 1000, io: str = "v2", parent: str = ""):
    """A fake mixed host under ``root``: cpu and cpuacct (and blkio when ``io`` is ``"v1"``) as
    v1 hierarchies (:func:`fake_v1_tree` under ``root/v1``, at ``[PARENT/]user.slice/user-UID.slice``),
    memory (and io when ``io`` is ``"v2"``) in a fake cgroup2 mount ``root/v2`` holding the
    captured v2 files at ``user.slice/user-UID.slice``. Returns the
    :class:`cgroups_v1.mixed.MixedLayout` (``io`` ``"none"``: io is nowhere)."""
    from cgroups_v1.mixed import MixedLayout

    relative = f"{parent}/user.slice/user-{uid}.slice" if parent else f"user.slice/user-{uid}.slice"
    mounts = fake_v1_tree(root / "v1", relative)
    fake_cgroup(root / "v2", f"user.slice/user-{uid}.slice")
    return MixedLayout.of({"cpu": "v1", "memory": "v2", "io": io}, mounts, root / "v2")
