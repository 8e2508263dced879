"""Backends on fake trees (conformance), systemd property encoding, and the factory."""

import pytest

from cgroups import Cgroup, CpuMax, IoMax
from governor.enforce import CgroupfsBackend, DryRunBackend, SystemdBackend, make_backend
from governor.enforce.model import MEMORY_HIGH, EnforceError, Target
from governor.enforce.systemd import UINT64_MAX, properties_for_cpu_max, properties_for_io_max, properties_for_memory
from tests.backend_conformance import check_dry_run, check_gone, check_writes
from tests.fakecgroup import fake_cgroup


@pytest.fixture
def target(tmp_path):
    return Target(1000, Cgroup(fake_cgroup(tmp_path, io_max="")))


def gone(tmp_path):
    return Target(4242, Cgroup(tmp_path / "user.slice" / "user-4242.slice"))


def test_cgroupfs_conformance_on_a_fake_tree(target, tmp_path):
    check_writes(CgroupfsBackend(), target, "254:0")
    check_gone(CgroupfsBackend(), gone(tmp_path))


def test_dry_run_conformance(target, tmp_path):
    check_dry_run(DryRunBackend(), target, "254:0")
    assert DryRunBackend().read(gone(tmp_path)).cpu_weight == 100  # kernel defaults where no files exist


def test_a_dry_run_reads_a_slice_gone_since_it_read_it_as_the_real_backends_do(tmp_path):
    """Her slice read, then removed (a logout): TargetGone, as cgroupfs and systemd read it —
    not the kernel's defaults, which the loop took for changes by someone else (three notes
    at each logout, and her originals replaced by the defaults). A slice never read still
    reads as the defaults where it does not exist (a host without per-user cgroups)."""
    import shutil

    from governor.enforce.model import KERNEL_DEFAULTS, TargetGone

    path = fake_cgroup(tmp_path, io_max="")
    target, backend = Target(1000, Cgroup(path)), DryRunBackend()
    hers = backend.read(target)
    assert hers != KERNEL_DEFAULTS  # the captured slice: cpu.max 50000 100000, memory.high 64 MiB
    shutil.rmtree(path)
    for reader in (CgroupfsBackend(), backend):
        with pytest.raises(TargetGone):
            reader.read(target)
    assert DryRunBackend().read(target) == KERNEL_DEFAULTS  # this one never read it
    assert backend.read(gone(tmp_path)) == KERNEL_DEFAULTS
    fake_cgroup(tmp_path, io_max="")  # made again (her next login): read anew
    assert backend.read(target) == hers


def test_systemd_property_encoding():
    assert properties_for_cpu_max(CpuMax(50000, 100000)) == [
        ("CPUQuotaPerSecUSec", ("t", 500000)), ("CPUQuotaPeriodUSec", ("t", 100000))]
    assert properties_for_cpu_max(CpuMax(None))[0] == ("CPUQuotaPerSecUSec", ("t", UINT64_MAX))
    assert properties_for_memory(MEMORY_HIGH, None) == [("MemoryHigh", ("t", UINT64_MAX))]
    assert properties_for_io_max("8:0", IoMax(rbps=5)) == [
        ("IOReadBandwidthMax", ("a(st)", [("/dev/block/8:0", 5)])),
        ("IOWriteBandwidthMax", ("a(st)", [("/dev/block/8:0", UINT64_MAX)])),
        ("IOReadIOPSMax", ("a(st)", [("/dev/block/8:0", UINT64_MAX)])),
        ("IOWriteIOPSMax", ("a(st)", [("/dev/block/8:0", UINT64_MAX)])),
    ]


def test_systemd_backend_reports_an_unreachable_bus(target):
    def no_bus():
        raise ConnectionRefusedError("no system bus socket")

    backend = SystemdBackend(connect=no_bus)
    with pytest.raises(EnforceError, match="user-1000.slice: SetUnitProperties CPUWeight: system bus: no system bus"):
        backend.set_cpu_weight(target, 200)


def test_systemd_backend_waits_for_a_silent_bus_once_per_timeout_not_once_per_call(target):
    """1,000 users each waiting 5 s for a systemd that does not answer made one tick last 83 min."""
    now, waits = [0.0], []

    class Silent:
        def send_and_get_reply(self, message, timeout):
            waits.append(timeout)
            now[0] += timeout
            raise TimeoutError

    backend = SystemdBackend(connect=Silent, timeout_s=5.0, clock=lambda: now[0])
    for _ in range(100):
        with pytest.raises(EnforceError, match="system bus: no answer .waited 5 s; not answering"):
            backend.set_cpu_weight(target, 200)
    assert len(waits) == 1
    now[0] += 5.0  # after the quiet period it asks again
    with pytest.raises(EnforceError):
        backend.set_cpu_weight(target, 200)
    assert len(waits) == 2


def test_a_restore_asks_the_bus_afresh_even_in_the_quiet_period(target):
    """The review: a timeout just before stop made every restore fail at once (exit 1, limits
    left until the next start) though the bus answered again by then."""
    now, calls = [0.0], []

    class SilentOnce:
        def send_and_get_reply(self, message, timeout):
            calls.append(timeout)
            if len(calls) == 1:
                now[0] += timeout
                raise TimeoutError
            return type("Reply", (), {"header": type("H", (), {"message_type": None})(), "body": ()})()

    backend = SystemdBackend(connect=SilentOnce, timeout_s=5.0, clock=lambda: now[0])
    with pytest.raises(EnforceError):
        backend.set_cpu_weight(target, 200)
    with pytest.raises(EnforceError):  # within the quiet period a tick's call fails at once
        backend.set_cpu_weight(target, 200)
    assert len(calls) == 1
    with backend.releasing():
        try:
            backend.set_cpu_weight(target, 100)
        except EnforceError as exc:
            assert "not answering" not in str(exc)  # it asked the bus (what it then says is the fake's)
    assert len(calls) == 2


def test_factory(tmp_path):
    assert make_backend("dry-run")[0].name == "dry-run"
    assert make_backend("cgroupfs")[0].name == "cgroupfs"
    backend, why = make_backend("auto", systemd_runtime_dir=str(tmp_path / "absent"))
    assert backend.name == "cgroupfs" and "not running" in why
    with pytest.raises(ValueError, match="expected one of: auto, systemd, cgroupfs, dry-run"):
        make_backend("magic")


def test_a_knob_whose_controller_is_off_reads_as_its_kernel_default(tmp_path):
    # systemd enables a slice's controllers only once a unit asks for them (seen on systemd 252)
    path = fake_cgroup(tmp_path, cpu_max=None, cpu_weight=None, io_max=None)
    limits = CgroupfsBackend().read(Target(1000, Cgroup(path)))
    assert limits.cpu_max == CpuMax(None) and limits.cpu_weight == 100 and limits.io_max == {}
    assert limits.memory_high == 64 * 2**20  # the memory files are there and read as usual


@pytest.mark.parametrize("backend", [DryRunBackend(), SystemdBackend(connect=lambda: None)], ids=["dry-run", "systemd"])
def test_a_value_the_kernel_would_refuse_is_an_enforce_error_not_a_stray_exception(backend, target):
    """Backends validate inside their error translation: the tick catches EnforceError only."""
    with pytest.raises(EnforceError, match="quota"):
        backend.set_cpu_max(target, CpuMax(10, 100_000))  # below the kernel's 1 ms
    with pytest.raises(EnforceError, match="MAJ:MIN"):
        backend.set_io_max(target, "sda", IoMax(rbps=1))
    with pytest.raises(EnforceError):
        backend.set_cpu_weight(target, 0)
