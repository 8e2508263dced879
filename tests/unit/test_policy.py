"""The policy file: the documented example, defaults, strict errors, warnings, weights."""

import dataclasses
from pathlib import Path

import pytest

from governor.config.policy import DEFAULT_POLICY, InputError, load_policy, policy_from_text, weight_of

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "drfgov.yaml"


def test_the_documented_example_is_valid_and_matches_the_defaults_it_claims():
    """It says it lists every key with its default, and systemd/README.md installs it as it is:
    the audit found a reserve of 0.5 cores and 1 GiB (the default is none) and weights for
    alice, bob and staff that took effect. Installed as it is, it is the defaults exactly; its
    examples are comments, and valid once uncommented."""
    policy, warnings = load_policy(EXAMPLE)
    assert dataclasses.replace(policy, source=DEFAULT_POLICY.source) == DEFAULT_POLICY and warnings == []
    text = EXAMPLE.read_text()
    examples = text.replace("    # alice: 2", "    alice: 2").replace("    # bob: {", "    bob: {") \
        .replace("    # staff: 1.5", "    staff: 1.5")
    assert examples != text
    policy, _ = policy_from_text(examples)
    assert policy.user_weights == {"alice": 2.0, "bob": {"cpu": 1.0, "memory": 2.0}}
    assert policy.group_weights == {"staff": 1.5}


def test_governed_uids_have_no_upper_bound_unless_max_uid_sets_one():
    """LDAP and AD users live above 60000 (sssd's id mapping starts at 200000): by default
    every uid from 1000 is governed (nobody apart: monitors.users.governed); max_uid: 60000
    (Debian's login.defs UID_MAX) leaves out systemd's DynamicUser= services and containers."""
    governed = DEFAULT_POLICY.governed
    assert (governed.min_uid, governed.max_uid) == (1000, 2**32 - 2)
    policy, _ = policy_from_text("governed: {max_uid: 60000}\n")
    assert (policy.governed.min_uid, policy.governed.max_uid) == (1000, 60000)
    policy, _ = policy_from_text("governed: {min_uid: 70000, max_uid: 70000}\n")  # one uid: allowed
    assert (policy.governed.min_uid, policy.governed.max_uid) == (70000, 70000)


@pytest.mark.parametrize("text, expected", [
    ("governed:\n  min_uid: 2000\n  max_uid: 1999\n",
     "p.yaml:3: governed.max_uid: expected a uid ≥ governed.min_uid (2000), got 1999: no uid would be governed"),
    ("governed: {max_uid: 4294967295}\n", "p.yaml:1: governed.max_uid: expected a number ≤ 4294967294, got 4294967295"),
    ("governed: {max_uid: 60000.5}\n", "p.yaml:1: governed.max_uid: expected a whole uid, got 60000.5"),
    ("governed: {max_uid: -1}\n", "p.yaml:1: governed.max_uid: expected a number ≥ 0, got -1"),
])
def test_a_max_uid_below_min_uid_or_out_of_range_is_refused_with_file_line_and_field(text, expected):
    with pytest.raises(InputError) as info:
        policy_from_text(text, "p.yaml")
    assert str(info.value) == expected


def test_no_file_means_defaults():
    policy, warnings = load_policy(None)
    assert policy == DEFAULT_POLICY and warnings == []


def test_bytes_accept_iec_strings():
    policy, _ = policy_from_text("reserve: {memory_bytes: 1.5GiB}\nmemory: {margin_bytes: 64M, high_step_bytes: 1048576}\n")
    assert policy.reserve.memory_bytes == 3 * 2**29
    assert (policy.memory.margin_bytes, policy.memory.high_step_bytes) == (64 * 2**20, 2**20)


ACCEPTED = "expected bytes: a whole number or a size like 512M, 512MiB or 2GiB (binary units: K, M, G, T are KiB, MiB, " \
           "GiB, TiB)"


@pytest.mark.parametrize("size, hint", [
    ("1GB", ": 'GB' is ambiguous (10^9 or 2^30 bytes?), write GiB"),
    ("512mb", ": 'mb' is ambiguous (10^6 or 2^20 bytes?), write MiB"),
    ("2 kB", ": 'kB' is ambiguous (10^3 or 2^10 bytes?), write KiB"),
    ("1.5TB", ": 'TB' is ambiguous (10^12 or 2^40 bytes?), write TiB"),
    ("lots", ""),
    ("1PiB", ""),
])
def test_a_size_it_cannot_read_names_the_accepted_forms_and_what_to_write_for_decimal_units(size, hint):
    """The audit: 1G read as GiB while 1GB was refused with examples ('512MiB', '2GiB') that
    did not say so. Decimal-looking units stay refused (1GB: 10^9 or 2^30?), and the error
    names the short binary form and what to write instead."""
    with pytest.raises(InputError) as info:
        policy_from_text(f"reserve:\n  memory_bytes: {size}\n", "p.yaml")
    assert str(info.value) == f"p.yaml:2: reserve.memory_bytes: {ACCEPTED}, got text {size!r}{hint}"
    assert policy_from_text("reserve: {memory_bytes: 1G}\n")[0].reserve.memory_bytes == 2**30


@pytest.mark.parametrize(
    "text, expected",
    [
        ("tick: 1\n", "p.yaml:1: tick: unknown key; expected one of: interval_s, mode,"),
        ("interval_s: fast\n", "p.yaml:1: interval_s: expected a number ≥ 0.1, got text 'fast'"),
        ("mode: enforcing\n", "p.yaml:1: mode: expected one of: enforce, dry-run, got 'enforcing'"),
        ("weights:\n  users:\n    alice: -1\n", "p.yaml:3: weights.users.alice: expected a number > 0, got -1"),
        ("weights:\n  default: 0\n", "p.yaml:2: weights.default: expected a number > 0, got 0"),
        ("weights:\n  groups:\n    staff: {gpu: 2}\n",
         "p.yaml:3: weights.groups.staff.gpu: unknown resource; expected one of: cpu, memory, io, net"),
        ("enforce: [cpu, disk]\n", "p.yaml:1: enforce.1: unknown resource 'disk'"),
        ("reserve:\n  memory_bytes: lots\n", "p.yaml:2: reserve.memory_bytes: expected bytes"),
        ("governed: {min_uid: 999.5}\n", "p.yaml:1: governed.min_uid: expected a whole uid"),
        ("capacity:\n  disks:\n    sda: {read_bytes_per_s: 100}\n", "p.yaml:3: capacity.disks.sda.write_bytes_per_s: missing"),
        ("memory: {high_step_bytes: 0}\n", "p.yaml:1: memory.high_step_bytes: expected at least one page"),
        ("capacity:\n  nics:\n    eth0: {bits_per_s: 1e9, ingress: maybe}\n",
         "p.yaml:3: capacity.nics.eth0.ingress: expected true or false, got 'maybe'"),
        ("capacity:\n  nics:\n    eth0: {bits_per_s: 1e9, egress: true}\n", "p.yaml:3: capacity.nics.eth0.egress: unknown key"),
        ("[1, 2]\n", "p.yaml:1: expected a mapping of policy settings, got a list"),
        ("state_path: run/state.json\n", "p.yaml:1: state_path: expected an absolute path, got 'run/state.json'"),
        ("state_path: /tmp\n", "p.yaml:1: state_path: expected a file's path, got the directory '/tmp'"),
        ("state_path: /run/x.json\nhistory: {path: /run/./x.json}\n",
         "p.yaml:2: history.path: expected another file than state_path"),
        ("capacity:\n  nics:\n    ../..: {bits_per_s: 1e9}\n", "p.yaml:3: capacity.nics.../..: expected an interface name"),
        ("capacity:\n  nics:\n    averyveryverylongname: {bits_per_s: 1e9}\n",
         "p.yaml:3: capacity.nics.averyveryverylongname: expected an interface name"),
    ],
)
def test_mistakes_name_file_line_and_field(text, expected):
    with pytest.raises(InputError) as info:
        policy_from_text(text, "p.yaml")
    assert str(info.value).startswith(expected), str(info.value)


def test_nics_shape_ingress_unless_told_not_to():
    policy, _ = policy_from_text("enforce: [net]\ncapacity:\n  nics:\n    eth0: {bits_per_s: 1e9}\n"
                                 "    eth1: {bits_per_s: 1e8, ingress: false}\n")
    assert policy.nics_bits_per_s == {"eth0": 1e9, "eth1": 1e8}
    assert policy.nics_ingress == {"eth0": True, "eth1": False}


def test_unknown_users_and_groups_are_warnings_with_lines():
    _, warnings = policy_from_text(
        "weights:\n  users:\n    root: 2\n    no-such-user-x: 3\n  groups:\n    no-such-group-y: 2\n"
        "governed:\n  exempt_users: [no-such-user-z]\n", "p.yaml")
    assert warnings == [
        "p.yaml:3: weights.users.root: 'root' is uid 0, below governed.min_uid (1000), so never governed: this weight "
        "never applies",
        "p.yaml:4: weights.users.no-such-user-x: no user 'no-such-user-x' on this host (yet)",
        "p.yaml:6: weights.groups.no-such-group-y: no group 'no-such-group-y' on this host (yet)",
        "p.yaml:8: governed.exempt_users: no user 'no-such-user-z' on this host (yet)",
    ]


def test_weight_precedence_user_then_largest_group_then_default():
    policy, _ = policy_from_text("weights:\n  default: 0.5\n  users: {alice: 4}\n  groups: {a: 2, b: {cpu: 3}, c: 1}\n")
    assert weight_of(policy, "alice", ["a", "b"]) == 4.0
    assert weight_of(policy, "bob", ["a", "b", "c"]) == {"cpu": 3.0}
    assert weight_of(policy, "bob", ["c"]) == 1.0
    assert weight_of(policy, "carol", []) == 0.5


@pytest.mark.parametrize("text, expected", [
    ("cgroup_v1: {parent: /sys/fs/cgroup}\n", "p.yaml:1: cgroup_v1.parent: expected a relative cgroup path"),
    ("cgroup_v1: {parent: a/../b}\n", "p.yaml:1: cgroup_v1.parent: expected a relative cgroup path"),
    ("cgroup_v1: {parent: 'a b'}\n", "p.yaml:1: cgroup_v1.parent: expected a relative cgroup path"),
    ("cgroup_v1: {parent: 7}\n", "p.yaml:1: cgroup_v1.parent: expected a relative cgroup path such as"),
    ("cgroup_v1: {root: x}\n", "p.yaml:1: cgroup_v1.root: unknown key"),
])
def test_the_v1_parent_is_a_plain_relative_cgroup_path(text, expected):
    with pytest.raises(InputError) as info:
        policy_from_text(text, "p.yaml")
    assert str(info.value).startswith(expected), str(info.value)
    assert policy_from_text("cgroup_v1: {parent: drfgov-test-1a2b3c/sub}\n")[0].cgroup_v1_parent == "drfgov-test-1a2b3c/sub"
    assert DEFAULT_POLICY.cgroup_v1_parent == ""


@pytest.mark.parametrize("text, expected", [
    ("enforce: []\n", "p.yaml:1: enforce: expected at least one of: cpu, memory, io, net: cpu.weight and memory.low "
                      "are written whatever enforce lists; to write nothing, set mode: dry-run"),
    ("enforce: [cpu, memory, cpu]\n", "p.yaml:1: enforce.2: cpu listed twice (first as item 0); expected each once"),
])
def test_enforce_is_each_resource_once_and_not_empty(text, expected):
    """The audit: enforce: [] and [cpu, cpu] were accepted. An empty list read as "write
    nothing", yet cpu.weight and memory.low are written whatever it lists (the loop's _capped
    gates caps only): it is refused, naming the setting that writes nothing."""
    with pytest.raises(InputError) as info:
        policy_from_text(text, "p.yaml")
    assert str(info.value) == expected


@pytest.mark.parametrize("text, shown", [("'0.5'", "text '0.5' (0.5 bytes)"), ("'1.9'", "text '1.9' (1.9 bytes)")])
def test_a_byte_string_of_a_fraction_of_a_byte_is_refused(text, shown):
    """The audit: margin_bytes: '0.5' read as 0 and '1.9' as 1, while the number 0.5 was refused."""
    with pytest.raises(InputError) as info:
        policy_from_text(f"memory:\n  margin_bytes: {text}\n", "p.yaml")
    assert str(info.value) == f"p.yaml:2: memory.margin_bytes: expected whole bytes, got {shown}"


def test_a_byte_string_with_a_fraction_that_is_whole_bytes_is_taken():
    policy, _ = policy_from_text("memory: {margin_bytes: 1.5GiB, high_step_bytes: 0.5M}\nreserve: {memory_bytes: '2.0'}\n")
    assert policy.memory.margin_bytes == 3 * 2**29 and policy.memory.high_step_bytes == 2**19
    assert policy.reserve.memory_bytes == 2


def test_a_fraction_of_a_unit_is_rounded_down_to_whole_bytes():
    """A fraction of a GiB is no mistake (1.3GiB passed before the strict rule, and a restart of
    a host with it must not exit 2, the review of the byte rule): rounded down, exactly."""
    policy, _ = policy_from_text("memory: {margin_bytes: 1.3GiB, high_step_bytes: 0.1GiB}\n")
    assert policy.memory.margin_bytes == 1395864371 and policy.memory.high_step_bytes == 107374182


@pytest.mark.parametrize("text, expected", [
    ("state_path: /run/drfgov/m.prom\nmetrics: {textfile: /run/drfgov/m.prom}\n",
     "p.yaml:2: metrics.textfile: expected another file than state_path ('/run/drfgov/m.prom'), got "
     "'/run/drfgov/m.prom': the daemon writes each of them"),
    ("history: {path: /var/lib/drfgov/m.prom}\nmetrics:\n  textfile: /var/lib//drfgov/./m.prom\n",
     "p.yaml:3: metrics.textfile: expected another file than history.path ('/var/lib/drfgov/m.prom'), got "
     "'/var/lib//drfgov/./m.prom': the daemon writes each of them"),
    ("state_path: /run/x.json\nhistory: {path: /run/./x.json}\n",
     "p.yaml:2: history.path: expected another file than state_path ('/run/x.json'), got '/run/./x.json': the daemon "
     "writes each of them"),
    # only the later one set in the file: it is blamed, the default named
    ("metrics:\n  textfile: /run/drfgov/../drfgov/state.json\n", None),
    ("history:\n  path: //run/drfgov/state.json\n",
     "p.yaml:2: history.path: expected another file than state_path ('/run/drfgov/state.json'), got "
     "'//run/drfgov/state.json': the daemon writes each of them"),
])
def test_no_two_files_the_daemon_writes_are_one_file(text, expected):
    """The audit: only history.path against state_path was checked; state_path and
    metrics.textfile (or history.path and it) could be one file, each write clobbering the other."""
    with pytest.raises(InputError) as info:
        policy_from_text(text, "p.yaml")
    if expected is None:  # a textfile must end in .prom: refused before the comparison
        assert "metrics.textfile: expected an absolute path ending in .prom" in str(info.value)
    else:
        assert str(info.value) == expected


def test_no_file_the_daemon_writes_is_the_policy_file_itself_through_symlinks_too(tmp_path):
    """Compared lexically in parse_policy; load_policy compares again with symlinks resolved
    (a link to a directory, as /var/run → /run)."""
    policy = tmp_path / "p.yaml"
    policy.write_text(f"mode: dry-run\nstate_path: {tmp_path}/sub/../p.yaml\n")
    with pytest.raises(InputError) as info:
        load_policy(policy, trusted_uids=None)
    assert str(info.value).startswith(f"{policy}:2: state_path: expected another file than the policy file itself, "
                                      "got ")
    assert str(info.value).endswith(": the daemon would write over its own policy")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    policy.write_text(f"state_path: {tmp_path}/link/m.prom\nmetrics: {{textfile: {tmp_path}/real/m.prom}}\n")
    with pytest.raises(InputError) as info:
        load_policy(policy, trusted_uids=None)
    assert str(info.value).startswith(f"{policy}:2: metrics.textfile: expected another file than state_path (")
    assert "the daemon writes each of them (both are " in str(info.value)
    assert str(info.value).endswith(" once symlinks are followed)")
    policy_from_text(policy.read_text())  # without the file system, two names are two files
    (tmp_path / "p2.yaml").symlink_to(policy)
    policy.write_text(f"state_path: {tmp_path}/p2.yaml\n")
    with pytest.raises(InputError, match="state_path: expected another file than the policy file itself"):
        load_policy(policy, trusted_uids=None)


@pytest.mark.parametrize("text, read, write", [
    ("{read_bytes_per_s: 1GiB, write_bytes_per_s: 500M}", 2**30, 500 * 2**20),
    ("{read_bytes_per_s: 1.5GiB, write_bytes_per_s: '2G'}", 3 * 2**29, 2 * 2**30),
    ("{read_bytes_per_s: 1e9, write_bytes_per_s: 123.5}", 1e9, 123.5),  # numbers as before
])
def test_disk_bandwidth_takes_iec_strings_as_byte_amounts_do(text, read, write):
    """The audit: capacity.disks.vda.read_bytes_per_s: 1GiB was refused ("expected a number > 0,
    got text '1GiB'") while the README said byte amounts take IEC strings."""
    policy, _ = policy_from_text(f"capacity:\n  disks:\n    vda: {text}\n")
    assert (policy.disks["vda"].read_bytes_per_s, policy.disks["vda"].write_bytes_per_s) == (read, write)


@pytest.mark.parametrize("value, expected", [
    ("0MiB", "expected bytes per second > 0, got text '0MiB'"),
    ("0", "expected a number > 0, got 0"),
    ("1GB", "expected bytes per second: a number or a size like 512M, 512MiB or 2GiB (binary units: K, M, G, T are "
            "KiB, MiB, GiB, TiB), got text '1GB': 'GB' is ambiguous (10^9 or 2^30 bytes?), write GiB"),
    ("8388608TiB", "expected at most 9223372036854775807 bytes per second, got text '8388608TiB'"),
])
def test_a_disk_bandwidth_it_cannot_take_says_what_it_takes(value, expected):
    with pytest.raises(InputError) as info:
        policy_from_text(f"capacity:\n  disks:\n    vda:\n      read_bytes_per_s: {value}\n"
                         "      write_bytes_per_s: 1\n", "p.yaml")
    assert str(info.value) == f"p.yaml:4: capacity.disks.vda.read_bytes_per_s: {expected}"
