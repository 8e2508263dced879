"""The systemd backend for cgroup v1 hosts: the property mapping, and the backend against a fake
systemd that applies properties to a fake v1 tree as systemd 252 does on the legacy hierarchy
(measured in tests/systemd_vm, legacy boot: CPUWeight wins over CPUShares and is written as
⌊w·1024/100⌋; MemoryMax wins over MemoryLimit; MemoryLow, MemoryHigh and IO*IOPSMax change no
v1 file; RevertUnitFiles removes the unit's drop-ins in /etc and /run alike)."""

from pathlib import Path

import pytest
from jeepney.low_level import HeaderFields

from cgroups.limits import CpuMax, IoMax
from cgroups_v1.slice import V1Slice
from governor.enforce import make_backend
from governor.enforce.apply import restore_originals
from governor.enforce.model import MEMORY_HIGH, MEMORY_LOW, MEMORY_MAX, EnforceError, Target, TargetGone
from governor.enforce.systemd import UINT64_MAX
from governor.enforce.systemd_v1 import (
    SystemdV1Backend, dropin_path, properties_for_v1_cpu_shares, properties_for_v1_io_max, properties_for_v1_memory_max,
)
from tests.backend_conformance import check_gone, check_writes
from tests.fakecgroup import fake_v1_tree
from tests.v1fixtures import mounts, target  # noqa: F401 (fixtures)

MiB = 2**20
CONTROL = "/run/systemd/system.control"


class FakeSystemd:
    """systemd 252 on the legacy hierarchy, as far as the backend can tell: it answers the calls
    the backend makes and writes the v1 files the way the real one did in the legacy VM."""

    def __init__(self, mounts, dropins=None, version="252.22-1~deb12u1"):
        self.mounts, self.version = mounts, version
        self.fail_next: str | None = None  # a method whose next call times out
        self.props: dict[str, dict] = {}
        self.dropins: dict[str, set[str]] = {u: set(p) for u, p in (dropins or {}).items()}
        self.calls: list[tuple[str, tuple]] = []
        self.paths: dict[str, str] = {}

    def __call__(self, message, what):
        member = message.header.fields[HeaderFields.member]
        self.calls.append((member, message.body))
        if member == self.fail_next:
            self.fail_next = None
            raise EnforceError(f"{what}: no answer within 5 s")
        if member == "LoadUnit":  # systemd's bus path escaping: user-1000.slice → user_2d1000_2eslice
            escaped = "".join(c if c.isalnum() else f"_{ord(c):02x}" for c in message.body[0])
            self.paths[f"/org/freedesktop/systemd1/unit/{escaped}"] = message.body[0]
            return (f"/org/freedesktop/systemd1/unit/{escaped}",)
        if member == "Get":
            path = message.header.fields[HeaderFields.path]
            if path == "/org/freedesktop/systemd1":  # the manager's own property
                assert message.body == ("org.freedesktop.systemd1.Manager", "Version")
                return (("s", self.version),)
            return (("as", sorted(self.dropins.get(self.paths[path], ()))),)
        if member == "Ping":
            return ()
        if member == "SetUnitProperties":
            unit, runtime, props = message.body
            assert runtime is True
            for name, (_, value) in props:
                self.props.setdefault(unit, {})[name] = value
                self.dropins.setdefault(unit, set()).add(dropin_path(unit, name))
            self._apply(unit)
            return ()
        if member == "RevertUnitFiles":
            (units,) = message.body
            for unit in units:
                self.dropins[unit] = {p for p in self.dropins.get(unit, ()) if p.startswith("/usr/")}
            return ([],)
        if member == "ListUnitsByPatterns":
            return ([(u, "", "loaded", "active", "active", "", "/", 0, "", "/") for u in sorted(self.props)],)
        raise AssertionError(f"unexpected call {member}")

    def _apply(self, unit):
        p = self.props[unit]
        slice_ = f"user.slice/{unit}"
        cpu, memory, blkio = (Path(self.mounts[c]) / slice_ for c in ("cpu", "memory", "blkio"))
        if not cpu.is_dir():
            return
        weight = p.get("CPUWeight", UINT64_MAX)
        shares = weight * 1024 // 100 if weight != UINT64_MAX else p.get("CPUShares", UINT64_MAX)
        (cpu / "cpu.shares").write_text(f"{1024 if shares == UINT64_MAX else shares}\n")
        quota, period = p.get("CPUQuotaPerSecUSec", UINT64_MAX), p.get("CPUQuotaPeriodUSec", UINT64_MAX)
        period = 100000 if period == UINT64_MAX else period
        (cpu / "cpu.cfs_period_us").write_text(f"{period}\n")
        (cpu / "cpu.cfs_quota_us").write_text("-1\n" if quota == UINT64_MAX else f"{quota * period // 1_000_000}\n")
        unified = any(p.get(k, UINT64_MAX) != UINT64_MAX for k in ("MemoryMax", "MemoryHigh")) or p.get("MemoryLow", 0)
        limit = p.get("MemoryMax", UINT64_MAX) if unified else p.get("MemoryLimit", UINT64_MAX)
        (memory / "memory.limit_in_bytes").write_text(f"{9223372036854771712 if limit == UINT64_MAX else limit}\n")
        for prop, file in (("IOReadBandwidthMax", "read_bps_device"), ("IOWriteBandwidthMax", "write_bps_device")):
            for node, value in p.get(prop, []):
                dev = node.removeprefix("/dev/block/")
                (blkio / f"blkio.throttle.{file}").write_text(f"{dev} {0 if value == UINT64_MAX else value}\n")


def backend_with(mounts, fake):
    backend = SystemdV1Backend(mounts)
    backend._call = fake
    return backend


def file(mounts, controller, name):
    return (Path(mounts[controller]) / "user.slice/user-1000.slice" / name).read_text().strip()


def test_property_mapping():
    assert properties_for_v1_cpu_shares(2048) == [("CPUWeight", ("t", UINT64_MAX)), ("CPUShares", ("t", 2048))]
    assert properties_for_v1_memory_max(400 * MiB) == [("MemoryMax", ("t", 400 * MiB))]
    assert properties_for_v1_memory_max(None) == [("MemoryMax", ("t", UINT64_MAX))]
    with pytest.raises(EnforceError):
        properties_for_v1_memory_max(-1)
    assert properties_for_v1_io_max("8:0", IoMax(rbps=MiB, wbps=None, riops=10, wiops=None)) == [
        ("IOReadBandwidthMax", ("a(st)", [("/dev/block/8:0", MiB)])),
        ("IOWriteBandwidthMax", ("a(st)", [("/dev/block/8:0", UINT64_MAX)])),
    ]


def test_conformance_through_a_fake_systemd(mounts, target):
    fake = FakeSystemd(mounts)
    check_writes(backend_with(mounts, fake), target, "254:0", lacks=(MEMORY_HIGH,))
    check_gone(backend_with(mounts, fake), Target(4242, V1Slice(mounts, "user.slice/user-4242.slice")))


def test_each_knob_goes_where_systemd_honours_it_on_v1(mounts, target):
    fake = FakeSystemd(mounts)
    backend = backend_with(mounts, fake)
    backend.read(target)
    backend.set_cpu_max(target, CpuMax(150000, 100000))
    backend.set_cpu_weight(target, 33)
    backend.set_memory(target, MEMORY_MAX, 512 * MiB)
    backend.set_memory(target, MEMORY_LOW, 64 * MiB)
    backend.set_memory(target, MEMORY_HIGH, 256 * MiB)
    backend.set_io_max(target, "254:0", IoMax(rbps=MiB, wiops=100))
    sent = {name for member, body in fake.calls if member == "SetUnitProperties" for name, _ in body[2]}
    assert sent == {"CPUQuotaPerSecUSec", "CPUQuotaPeriodUSec", "CPUWeight", "CPUShares", "MemoryMax",
                    "IOReadBandwidthMax", "IOWriteBandwidthMax"}  # never MemoryLow/High: they would unseat MemoryLimit
    assert fake.props["user-1000.slice"]["CPUShares"] == 338  # v1map's rounding, not systemd's ⌊33·10.24⌋ = 337
    assert file(mounts, "cpu", "cpu.cfs_quota_us") == "150000" and file(mounts, "cpu", "cpu.shares") == "338"
    assert file(mounts, "memory", "memory.limit_in_bytes") == str(512 * MiB)
    assert file(mounts, "memory", "memory.soft_limit_in_bytes") == str(64 * MiB)  # written by the backend itself
    assert file(mounts, "blkio", "blkio.throttle.read_bps_device") == f"254:0 {MiB}"
    assert file(mounts, "blkio", "blkio.throttle.write_iops_device") == "254:0 100"  # ditto


def test_restore_puts_odd_shares_back_and_reverts_only_its_own_dropins(mounts, target):
    (Path(mounts["cpu"]) / "user.slice/user-1000.slice/cpu.shares").write_text("1000\n")
    fake = FakeSystemd(mounts, {"user-1000.slice": {"/usr/lib/systemd/system/user-.slice.d/10-defaults.conf"}})
    backend = backend_with(mounts, fake)
    original = backend.read(target)
    backend.set_cpu_weight(target, 300)
    backend.set_memory(target, MEMORY_MAX, 300 * MiB)
    assert file(mounts, "cpu", "cpu.shares") == "3072"
    restored, failed = restore_originals(backend, {1000: (target, original)})
    assert (restored, failed) == (["user-1000.slice"], {})
    assert file(mounts, "cpu", "cpu.shares") == "1000"
    assert backend.read(target) == original
    assert ("RevertUnitFiles", (["user-1000.slice"],)) in fake.calls
    assert fake.dropins["user-1000.slice"] == {"/usr/lib/systemd/system/user-.slice.d/10-defaults.conf"}
    assert backend.kept_dropins == {}


def test_an_admins_dropins_are_never_reverted_away(mounts, target):
    """RevertUnitFiles also deletes /etc/systemd/system/UNIT.d (measured on systemd 252): with an
    admin's drop-in there, or a runtime one she set herself, restore keeps the drop-ins (holding
    her original values) rather than delete hers."""
    admin = "/etc/systemd/system/user-1000.slice.d/50-admin.conf"
    hers = f"{CONTROL}/user-1000.slice.d/50-MemoryMax.conf"
    for existing in (admin, hers):
        fake = FakeSystemd(mounts, {"user-1000.slice": {existing}})
        backend = backend_with(mounts, fake)
        original = backend.read(target)
        backend.set_memory(target, MEMORY_MAX, 300 * MiB)
        restore_originals(backend, {1000: (target, original)})
        assert not any(member == "RevertUnitFiles" for member, _ in fake.calls)
        assert backend.kept_dropins == {"user-1000.slice": [existing]}
        assert backend.read(target) == original


def test_a_logged_out_users_originals_still_reach_systemd(mounts, target):
    """Restore of a user whose slice is gone: the properties still go to systemd (her drop-ins
    would come back at her next login), the files only systemd leaves alone need nothing."""
    fake = FakeSystemd(mounts)
    backend = backend_with(mounts, fake)
    original = backend.read(target)
    backend.set_memory(target, MEMORY_LOW, 64 * MiB)
    backend.set_io_max(target, "254:0", IoMax(riops=10))
    for controller in ("cpu", "cpuacct", "memory", "blkio"):
        path = Path(mounts[controller]) / "user.slice/user-1000.slice"
        for f in path.iterdir():
            f.unlink()
        path.rmdir()
    with pytest.raises(TargetGone):
        backend.set_memory(target, MEMORY_LOW, 0)
    restored, failed = restore_originals(backend, {1000: (target, original)})
    assert failed == {} and restored == ["user-1000.slice"]
    assert ("RevertUnitFiles", (["user-1000.slice"],)) in fake.calls


def test_accounting_is_turned_on_for_the_user_slices(mounts, target):
    fake = FakeSystemd(mounts)
    fake.props = {"user-1000.slice": {}, "user-1001.slice": {}}
    backend = backend_with(mounts, fake)
    assert backend.account_user_slices(blkio=True) == ["user-1000.slice", "user-1001.slice"]
    assert fake.props["user-1001.slice"] == {"CPUAccounting": True, "BlockIOAccounting": True}
    assert fake.dropins["user-1001.slice"]
    original = backend.read(target)
    restore_originals(backend, {1000: (target, original)})  # she leaves: her drop-ins go, nobody else's
    assert [body for member, body in fake.calls if member == "RevertUnitFiles"] == [(["user-1000.slice"],)]
    assert fake.dropins["user-1001.slice"]
    backend.revert_accounting()  # at stop: the accounting of the slices never written goes too
    assert [body for member, body in fake.calls if member == "RevertUnitFiles"] == [
        (["user-1000.slice"],), (["user-1001.slice"],)]
    assert not any(fake.dropins.values())


def test_one_user_leaving_reverts_nobody_elses_dropins(mounts, target, tmp_path):
    """A logout (or a reload that exempts her) releases one user: the governed others keep their
    limits and accounting in systemd, and her slice is accounted again when she comes back."""
    fake_v1_tree(tmp_path, "user.slice/user-1001.slice")  # the mounts' root: a second slice beside hers
    other = Target(1001, V1Slice(mounts, "user.slice/user-1001.slice"))
    fake = FakeSystemd(mounts)
    fake.props = {"user-1000.slice": {}, "user-1001.slice": {}}
    backend = backend_with(mounts, fake)
    backend.account_user_slices(blkio=False)
    originals = {1000: (target, backend.read(target)), 1001: (other, backend.read(other))}
    backend.set_cpu_max(target, CpuMax(50000, 100000))
    backend.set_cpu_max(other, CpuMax(70000, 100000))
    restore_originals(backend, {1000: originals[1000]})
    assert [body for member, body in fake.calls if member == "RevertUnitFiles"] == [(["user-1000.slice"],)]
    assert dropin_path("user-1001.slice", "CPUQuotaPerSecUSec") in fake.dropins["user-1001.slice"]
    assert dropin_path("user-1001.slice", "CPUAccounting") in fake.dropins["user-1001.slice"]
    # she logs in again, her slice outside the cpu hierarchy (her accounting was reverted): set again
    for f in (Path(mounts["cpu"]) / "user.slice/user-1000.slice").iterdir():
        f.unlink()
    (Path(mounts["cpu"]) / "user.slice/user-1000.slice").rmdir()
    assert backend.account_new_user_slices() == ["user-1000.slice"]


def test_a_failed_accounting_call_is_tried_again(mounts):
    (Path(mounts["memory"]) / "user.slice/user-1001.slice").mkdir()
    fake = FakeSystemd(mounts)
    fake.props = {"user-1001.slice": {}}
    backend = backend_with(mounts, fake)
    fake.fail_next = "SetUnitProperties"
    with pytest.raises(EnforceError):
        backend.account_new_user_slices()
    assert backend.account_new_user_slices() == ["user-1001.slice"]  # the next tick
    assert fake.props["user-1001.slice"]["CPUAccounting"] is True


def test_an_admins_runtime_property_set_while_we_run_is_kept(mounts, target):
    """``systemctl set-property --runtime user-1000.slice TasksMax=…`` after our first write makes a
    drop-in that was not there before, but not one of ours: restore keeps the drop-ins."""
    fake = FakeSystemd(mounts)
    backend = backend_with(mounts, fake)
    original = backend.read(target)
    backend.set_memory(target, MEMORY_MAX, 300 * MiB)
    hers = f"{CONTROL}/user-1000.slice.d/50-TasksMax.conf"
    fake.dropins["user-1000.slice"].add(hers)
    restore_originals(backend, {1000: (target, original)})
    assert not any(member == "RevertUnitFiles" for member, _ in fake.calls)
    assert backend.kept_dropins == {"user-1000.slice": [hers]}


@pytest.mark.parametrize("version, ok", [("252.22-1~deb12u1", True), ("242", True), ("239 (239-74.el8_8)", False),
                                         ("237", False)])
def test_the_backend_needs_systemd_242(mounts, version, ok):
    backend = backend_with(mounts, FakeSystemd(mounts, version=version))
    if ok:
        backend.ping()
    else:
        with pytest.raises(EnforceError, match="older than 242"):
            backend.ping()


def test_a_user_slice_outside_the_cpu_hierarchy_gets_accounting(mounts, target):
    """At boot nobody is logged in: the first user's slice is in the memory hierarchy only."""
    fake = FakeSystemd(mounts)
    backend = backend_with(mounts, fake)
    assert backend.account_new_user_slices() == []  # user-1000.slice is in every hierarchy: no call
    assert fake.calls == []
    (Path(mounts["memory"]) / "user.slice/user-1001.slice").mkdir()
    fake.props["user-1001.slice"] = {}
    assert backend.account_new_user_slices() == ["user-1001.slice"]
    assert fake.props["user-1001.slice"] == {"CPUAccounting": True, "BlockIOAccounting": True}
    calls = len(fake.calls)
    assert backend.account_new_user_slices() == [] and len(fake.calls) == calls  # asked once, not every tick


def test_make_backend_picks_the_v1_variants(mounts, tmp_path):
    assert make_backend("cgroupfs", v1_mounts=mounts)[0].name == "cgroupfs-v1"
    backend, why = make_backend("auto", systemd_runtime_dir=str(tmp_path / "absent"), v1_mounts=mounts)
    assert backend.name == "cgroupfs-v1" and "v1 files" in why
    with pytest.raises(EnforceError):  # no system bus here (or no systemd on it)
        SystemdV1Backend(mounts, connect=lambda: (_ for _ in ()).throw(ConnectionRefusedError("no bus"))).ping()
