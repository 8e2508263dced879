"""Boot a real systemd host (Debian bookworm, systemd as PID 1) and run tests/systemd_vm in it.

    python -m tests.systemd_vm.boot [--save-image PATH]          # cgroup v2 (unified)
    python -m tests.systemd_vm.boot --legacy [--image PATH]      # cgroup v1, hybrid: tier 3b
    python -m tests.systemd_vm.boot --pure-legacy [--image PATH] # cgroup v1, no cgroup2: tier 3c

``--legacy`` boots the same image with ``systemd.unified_cgroup_hierarchy=0``: systemd 252 then
mounts the cpu, memory, blkio… controllers as v1 hierarchies under /sys/fs/cgroup (and a
controller-less cgroup2 at /sys/fs/cgroup/unified: the hybrid layout), and the guest runs the
v1 tests of tests/systemd_vm (tests/systemd_vm/conftest.py picks them by what is mounted).
``--pure-legacy`` adds ``systemd.legacy_systemd_cgroup_controller=1``: no cgroup2 mount at all,
systemd's own tracking in a v1 ``name=systemd`` hierarchy — the layout Enterprise Linux 8 ships
(its systemd is built with ``default-hierarchy=legacy``).
``--save-image PATH`` keeps a pristine copy of the built image for that boot; ``--image PATH``
boots a copy of it instead of building one (built when PATH does not exist), so tier 3b adds
one boot, not a build.

Recipe (../shared/DESIGN.md): mmdebstrap a minbase bookworm with systemd, dbus, udev and
python3; add this project, its runtime dependencies and pytest (pip --target on the host:
the guest has no network; both run CPython 3.11), the ``drfgov`` command, systemd/drfgov.service
as shipped, and a oneshot unit that runs pytest and powers off; mkfs.ext4 -d;
boot Debian's kernel and initrd under qemu TCG. The verdict is read from the serial console.

Exit status: the guest pytest's, or 3 when the host could not be built or booted.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tests.vm.boot import (BOOT_FAILED, BOOTS, REPO, _boot_failure, _relay, boot_while_stuck, kernel_symbols,
                           sample_vcpus, tool_path, where_it_stopped)

#: A guest whose console printed nothing but the kernel's this long is stuck: past its pytest's
#: own limits (300 s a test, faulthandler at 360: the guest command line below), and short
#: enough that a guest stuck late in the tier's 20 minutes is still booted again, not timed
#: out (tests.vm.boot.SILENCE_S, 780 s, is for the VM tiers' 600 s limits).
SYSTEMD_SILENCE_S = 480.0
PACKAGES = "systemd,systemd-sysv,dbus,udev,python3,passwd,kmod,procps"
STATUS_MARK = "DRFGOV-STATUS="

# The installed command, as pip would make it, for the guest's own python3 (same 3.11 ABI).
DRFGOV_COMMAND = """\
#!/usr/bin/python3
import sys
sys.path[:0] = ["/opt/site", "/opt/drfgov"]
from governor.cli import main
sys.exit(main())
"""


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())


def guest_python_deps() -> list[str]:
    """The project's runtime dependencies (pyproject.toml) plus pytest and pytest-timeout (the
    per-test limit pyproject.toml sets), for pip --target."""
    return [*_pyproject()["project"]["dependencies"], "pytest", "pytest-timeout"]


def project_folders() -> list[str]:
    """The folders copied into the guest: every top-level package pyproject.toml installs (a new
    one, cgroups_v1, was once missed by a list kept here), and what the tests and unit read."""
    packages = _pyproject()["tool"]["setuptools"]["packages"]
    return sorted({name.split(".")[0] for name in packages}) + ["tests", "configs", "systemd", "docs"]

UNIT = """\
[Unit]
Description=drf-governor tests on a real systemd host
After=multi-user.target dbus.service systemd-udev-settle.service
[Service]
Type=oneshot
Environment=PYTHONPATH=/opt/site:/opt/drfgov
WorkingDirectory=/opt/drfgov
ExecStart=/bin/sh -c 'python3 -u -m pytest -p no:cacheprovider -v -s tests/systemd_vm -o testpaths=tests/systemd_vm \
-o timeout=300 -o faulthandler_timeout=360 --durations=5 --color=no > /dev/console 2>&1; echo "%s$?" > /dev/console'
ExecStartPost=/bin/systemctl poweroff --no-block
[Install]
WantedBy=multi-user.target
""" % STATUS_MARK


def build_image(work: Path) -> Path:
    """root.tar → directory with the project and the test unit → ext4 image."""
    tar = work / "root.tar"
    subprocess.run(["mmdebstrap", "--quiet", "--variant=minbase", f"--include={PACKAGES}", "bookworm", str(tar)],
                   check=True)
    root = work / "root"
    root.mkdir()
    with tarfile.open(tar) as archive:
        # a root filesystem: device nodes, setuid bits and absolute links are meant to be kept
        # (extraction filters came in Python 3.11.4; Debian 12's 3.11.2 extracts fully anyway)
        archive.extractall(root, **({"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}))
    tar.unlink()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target",
                    str(root / "opt" / "site"), *guest_python_deps()], check=True)
    project = root / "opt" / "drfgov"
    for part in project_folders():
        shutil.copytree(REPO / part, project / part, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(REPO / "pyproject.toml", project / "pyproject.toml")
    command = root / "usr" / "local" / "bin" / "drfgov"
    command.write_text(DRFGOV_COMMAND)
    command.chmod(0o755)
    units = root / "etc" / "systemd" / "system"
    shutil.copy(REPO / "systemd" / "drfgov.service", units / "drfgov.service")  # installed, not enabled
    (units / "drfgov-test.service").write_text(UNIT)
    wants = units / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    os.symlink("/etc/systemd/system/drfgov-test.service", wants / "drfgov-test.service")
    (root / "etc" / "hostname").write_text("drfgov-systemd\n")
    image = work / "root.img"
    subprocess.run(["mkfs.ext4", "-q", "-L", "root", "-d", str(root), str(image), "1536M"], check=True)
    shutil.rmtree(root)
    return image


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tests.systemd_vm.boot")
    parser.add_argument("--legacy", action="store_true", help="boot with the cgroup v1 hierarchies (hybrid layout)")
    parser.add_argument("--pure-legacy", action="store_true",
                        help="boot with the cgroup v1 hierarchies and no cgroup2 mount (legacy layout)")
    parser.add_argument("--image", type=Path, help="boot a copy of this image (built there first if missing)")
    parser.add_argument("--save-image", type=Path, help="keep a pristine copy of the built image here")
    args = parser.parse_args(argv)
    os.environ["PATH"] = tool_path()  # mkfs.ext4 lives in sbin
    for tool, package in (("mmdebstrap", "mmdebstrap"), ("mkfs.ext4", "e2fsprogs"), ("qemu-system-x86_64", "qemu-system-x86")):
        if not shutil.which(tool):
            _boot_failure(f"{tool} is missing: apt-get install {package}")
            return BOOT_FAILED
    kernels = sorted(glob.glob("/boot/vmlinuz-*"), key=os.path.getmtime)
    if not kernels:
        _boot_failure("no kernel in /boot: apt-get install linux-image-amd64")
        return BOOT_FAILED
    kernel = kernels[-1]
    initrd = kernel.replace("vmlinuz", "initrd.img")
    with tempfile.TemporaryDirectory(prefix="drfgov-systemd-") as tmp:
        try:
            if args.image is not None and args.image.exists():
                print(f"systemd tier: booting a copy of {args.image}", flush=True)
                image = Path(tmp) / "root.img"
                subprocess.run(["cp", "--sparse=always", str(args.image), str(image)], check=True)
            else:
                print("systemd tier: building a bookworm image (mmdebstrap)", flush=True)
                image = build_image(Path(tmp))
                for keep in (args.image, args.save_image):
                    if keep is not None:
                        subprocess.run(["cp", "--sparse=always", str(image), str(keep)], check=True)
        except (subprocess.CalledProcessError, OSError) as exc:
            _boot_failure(f"could not build the systemd image: {exc}")
            return BOOT_FAILED
        hierarchy = ("systemd.unified_cgroup_hierarchy=0 systemd.legacy_systemd_cgroup_controller=1" if args.pure_legacy
                     else "systemd.unified_cgroup_hierarchy=0" if args.legacy else "systemd.unified_cgroup_hierarchy=1")
        pristine = Path(tmp) / "pristine.img"  # a stuck guest's second boot starts from the image as built
        subprocess.run(["cp", "--sparse=always", str(image), str(pristine)], check=True)
        # -cpu max: numpy's wheels need x86-64-v2 (SSE4.2, POPCNT); TCG's default qemu64 lacks
        # them and the daemon dies of SIGILL on import. QMP and nokaslr: a silent guest's vCPUs
        # are sampled and named (tests/vm/boot.py sample_vcpus; the kernel symbols a VM tier
        # boot of this kernel saved, or raw addresses).
        qmp = Path(tmp) / "qmp.sock"
        cmd = ["qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-smp", "2", "-m", "2G", "-kernel", kernel,
               "-initrd", initrd, "-drive", f"file={image},format=raw,if=virtio", "-append",
               f"root=/dev/vda rw console=ttyS0 {hierarchy} quiet nokaslr panic=5",  # a panic ends qemu (-no-reboot)
               "-nographic", "-no-reboot", "-qmp", f"unix:{qmp},server=on,wait=off"]

        def boot_once(attempt: int) -> tuple[str, list[str], list[str]]:
            if attempt > 1:
                subprocess.run(["cp", "--sparse=always", str(pristine), str(image)], check=True)
            print(f"systemd tier: booting {kernel} with systemd as PID 1 (TCG), {hierarchy}"
                  f"{f', boot {attempt} of {BOOTS}' if attempt > 1 else ''}", flush=True)
            lines: list[str] = []
            vcpus: list[str] = []
            result = _relay(cmd, timeout_s=1200, keep=lines, silence_s=SYSTEMD_SILENCE_S,
                            on_silent=lambda: vcpus.extend(sample_vcpus(qmp, kernel_symbols(kernel))))
            return result, lines, vcpus

        result, lines = boot_while_stuck("systemd tier", boot_once, SYSTEMD_SILENCE_S)
        if result != "finished":
            _boot_failure(f"the guest was stuck in each of {BOOTS} boots" if result == "silent" else
                          f"the systemd VM did not finish within 20 minutes; {where_it_stopped(lines)}")
            return BOOT_FAILED
    status = [l.split(STATUS_MARK, 1)[1].strip() for l in lines if STATUS_MARK in l and "echo" not in l]
    if not status or not status[-1].isdigit():
        _boot_failure("the guest never reported a pytest status (systemd or the test unit failed to start); "
                      + where_it_stopped(lines))
        return BOOT_FAILED
    return int(status[-1])


if __name__ == "__main__":
    sys.exit(main())
