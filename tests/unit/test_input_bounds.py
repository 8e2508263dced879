"""The bounded loader (governor/config/source.py) and the bounds of every schema: policy, problem,
trace; the work bounds of `allocate --discrete` and `simulate`; sshd-style file checks."""

import os
import stat
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.config import names as names_module
from governor.config import policy as policy_module
from governor.config import source
from governor.config.policy import HostFacts, load_policy, policy_from_text
from governor.config.source import (
    BYTES_MAX, HugeNumber, InputError, MAX_DEPTH, check_number, check_trusted_file, loads, read_text,
)
from governor.fairness.discrete import DiscreteDRF, units_bound
from governor.offline import problem as problem_module
from governor.offline.allocate import MAX_DISCRETE_UNITS, solve
from governor.offline.problem import load_problem, parse_problem
from governor.offline.simulation import engine
from governor.offline.simulation.engine import simulate
from governor.offline.simulation.schedulers import parse_scheduler
from governor.offline.simulation.trace import Cluster, Job, Trace, check_work, load_trace
from tests.fakecgroup import FIXTURES


def error(text, name="p.yaml"):
    with pytest.raises(InputError) as info:
        loads(text, name)
    return str(info.value)


# -- the loader ------------------------------------------------------------------------------------------

def test_yaml_and_json_give_the_same_data_and_lines():
    yaml_text = "capacity: {cpu: 9, memory: 18}\nusers:\n  A:\n    demand: {cpu: 1}\n    weight: 2.5\n"
    json_text = ('{"capacity": {"cpu": 9, "memory": 18},\n "users": {\n  "A": {\n    "demand": {"cpu": 1},\n'
                 '    "weight": 2.5}}}\n')
    y, j = loads(yaml_text, "p.yaml"), loads(json_text, "p.json")
    assert y.data == j.data == {"capacity": {"cpu": 9, "memory": 18}, "users": {"A": {"demand": {"cpu": 1}, "weight": 2.5}}}
    for path in (("capacity",), ("users", "A"), ("users", "A", "demand", "cpu"), ("users", "A", "weight")):
        assert y.line(path) == j.line(path), path


def test_keys_are_text_as_written_and_dates_are_text():
    data = loads("no: 1\n007: 2\non: yes\n2001-12-14: 2001-13-45\nn: ~\nx: 0x1F\n").data
    assert data == {"no": 1, "007": 2, "on": True, "2001-12-14": "2001-13-45", "n": None, "x": 31}


@pytest.mark.parametrize("text, fragment", [
    ("a: !!binary aGVsbG8=\n", "p.yaml:1: a: tag !!binary at column 4 is not supported"),
    ("a: !!python/object/apply:os.system [true]\n", "p.yaml:1: a: tag !!python/object/apply:os.system at column 4"),
    ("a: !!timestamp 2001-12-14\n", "tag !!timestamp at column 4 is not supported"),
    ("a: !!omap [{b: 1}]\n", "tag !!omap at column 4 is not supported"),
    ("a: !custom x\n", "tag !custom at column 4 is not supported"),
    ("b: &b {c: 1}\na:\n  <<: *b\n", "p.yaml:3: a: merge keys (<<) are not supported"),
    ("a: 0x_\n", "p.yaml:1: a: not a valid !!int: text '0x_'"),
    ("a: 1\nb: 2\na: 3\n", "p.yaml:3: a: duplicate key (first on line 1)"),
    ("a: &x [1, *x]\n", "p.yaml:1: a.1: alias *x inside its own anchor &x"),
    ("a: *nowhere\n", "alias *nowhere names no anchor"),
    ("? [1, 2]\n: 3\n", "expected a plain key"),
    ("a: 1\n---\nb: 2\n", "p.yaml:2: expected a single document"),
])
def test_yaml_beyond_plain_values_is_refused_with_its_line(text, fragment):
    assert fragment in error(text)


@pytest.mark.parametrize("text, fragment", [
    ("a: !!str 12\n", "p.yaml:1: a: tag !!str at column 4 is not supported: plain YAML only, no tags"),
    ("a:\n  b: !!int '7'\n", "p.yaml:2: a.b: tag !!int at column 6"),  # would turn quoted text into a number
    ("a: [1, !!float 1]\n", "p.yaml:1: a.1: tag !!float at column 8"),
    ("a: !!null 60000\n", "p.yaml:1: a: tag !!null at column 4"),  # would read as nothing
    ("a: !!bool yes\n", "tag !!bool at column 4"),
    ("a: ! 5\n", "p.yaml:1: a: tag ! at column 4"),
    ("a: !!map {b: 1}\n", "p.yaml:1: a: tag !!map at column 4"),
    ("a: !!seq [1]\n", "p.yaml:1: a: tag !!seq at column 4"),
    ("a:\n  !!str b: 1\n", "p.yaml:2: a: a key: tag !!str at column 3"),
    ("!!map {a: 1}\n", "p.yaml:1: tag !!map at column 1"),
])
def test_explicit_core_tags_are_refused_with_line_and_column(text, fragment):
    """A core tag either restates the value or changes what the admin reads: one rule, no tags."""
    assert fragment in error(text)


@pytest.mark.parametrize("text, fragment", [
    ("weights: &a !!str x\n", "p.yaml:1: weights: tag !!str at column 13 is not supported"),
    ("a: &a !!int 3\n", "p.yaml:1: a: tag !!int at column 7"),
    ("a: !!str &a x\n", "p.yaml:1: a: tag !!str at column 4"),  # the tag first: the node starts with it
    ("a: &a !<tag:yaml.org,2002:str> x\n", "p.yaml:1: a: tag !!str at column 7"),  # verbatim
    ("a: &long-anchor_1 !foo x\n", "p.yaml:1: a: tag !foo at column 19"),
    ("a: [1, &a\t!!float 1]\n", "p.yaml:1: a.1: tag !!float at column 11"),
    ("a:\n  &k !!str b: 1\n", "p.yaml:2: a: a key: tag !!str at column 6"),
    ("&m !!map {a: 1}\n", "p.yaml:1: tag !!map at column 4"),
    ("é: &a !!str x\n", "p.yaml:1: é: tag !!str at column 7"),  # columns count characters, not bytes
    ("\ufeffa: &a !!str x\n", "p.yaml:1: a: tag !!str at column 7"),  # a BOM is not a column
    ("x: 1\r\nz: 2\u2028a: &a !!str x\n", "p.yaml:3: a: tag !!str at column 7"),  # YAML's line breaks
    ("x: 1\na: &a !!str x", "p.yaml:2: a: tag !!str at column 7"),  # the last line, no line break after it
    ("a: &a   # the anchor's line\n  # and a comment\n  !!str x\n", "p.yaml:3: a: tag !!str at column 3"),
])
def test_a_tag_after_an_anchor_is_refused_at_the_tag_not_the_anchor(text, fragment):
    """The node (and the parser's mark) starts at its anchor; the message points at the tag itself."""
    assert fragment in error(text)


def test_quotes_and_block_scalars_are_still_text():
    assert loads("a: '12'\nb: \"7\"\nc: |\n  x\nd: [1, '2']\n").data == {"a": "12", "b": "7", "c": "x\n", "d": [1, "2"]}


def test_aliases_count_what_they_stand_for():
    small = "a: &a [1, 2, 3]\nb: [*a, *a, *a]\n"
    assert loads(small).data["b"] == [[1, 2, 3]] * 3
    levels = ["l0: &l0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [
        f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 8)]
    message = error("\n".join(levels) + "\n")  # 10^8 values once expanded
    assert "aliases expand to more than 2,000,000 values" in message


def test_nesting_is_bounded():
    ok = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert loads(ok).data is not None
    deep = "a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH + "\n"
    assert f"nested deeper than {MAX_DEPTH} levels" in error(deep)
    assert f"nested deeper than {MAX_DEPTH} levels" in error('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "p.json")


def test_json_errors_are_located_only_when_reported():
    text = '{"users": {\n  "A": {"demand": {}},\n  "A": {"demand": {}}\n}}\n'
    assert error(text, "p.json") == "p.json:3: users.A: duplicate key (first on line 2)"
    assert error('{"a": 1,\n "b": }', "p.json").startswith("p.json:2: not valid JSON: Expecting value")
    assert error('{"a": "\\udc80"}', "p.json") == "p.json:1: a: text with an unpaired surrogate (not valid Unicode)"
    located = loads('{"a":\n {"b": [1,\n 2]}}', "p.json")
    assert located.line(("a", "b", 1)) == 3 and located.line(("a",)) == 1


def test_huge_integers_are_kept_as_their_digit_count():
    for text, name in (("a: " + "9" * 5000 + "\n", "p.yaml"), ('{"a": -' + "9" * 5000 + "}", "p.json")):
        value = loads(text, name).data["a"]
        assert isinstance(value, HugeNumber) and value.digits == 5000
        with pytest.raises(ValueError, match="5,000 digits"):
            check_number(value, maximum=10)


def test_messages_are_one_line_and_quote_little():
    message = error('{"a\\nb": 1, "x": {"y\\n": 1, "y\\n": 2}}', "p.json")
    assert message == "p.json:1: x.y\\n: duplicate key (first on line 1)"
    assert len(source.describe("x" * 10_000)) < 100
    assert source.describe(10**500) == "a number of 501 digits"


@pytest.mark.parametrize("text, expected", [
    ("interval_s: 1\nmode: dry-run\x07\n", "p.yaml:2: not valid YAML/JSON: control character U+0007 at column 14"),
    ("a: 1\x00\n", "p.yaml:1: not valid YAML/JSON: control character U+0000 at column 5"),
    # columns in characters (libyaml counts bytes)
    ("# café\nname: zoë\x1b[0m\n", "p.yaml:2: not valid YAML/JSON: control character U+001B at column 10"),
    ("a: 1\nb: \"\ufffe\"\n", "p.yaml:2: not valid YAML/JSON: character U+FFFE at column 5"),
    # JSON in a .yaml file, not JSON (a raw control character in a string): read as YAML
    ('{"a": 1,\n "b": "x\x01"}', "p.yaml:2: not valid YAML/JSON: control character U+0001 at column 9"),
])
def test_a_character_yaml_does_not_allow_is_named_with_its_line_and_column(text, expected):
    """The audit: a raw BEL gave "not valid YAML/JSON: unacceptable character #x0007: control
    characters are not allowed\\n  in "<unicode string>", position 27": no line, a literal \\n,
    and libyaml's position is in bytes."""
    assert error(text) == expected + " (YAML allows tab, newline and printable characters only)"


def test_read_text_refuses_what_is_not_a_small_regular_utf8_file(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = []
    reader = threading.Thread(target=lambda: done.append(pytest.raises(InputError, read_text, fifo)))
    reader.start()
    reader.join(5)
    assert done and "not a regular file (a FIFO)" in str(done[0].value)
    assert "a directory" in str(pytest.raises(InputError, read_text, tmp_path).value)
    big = tmp_path / "big"
    big.write_bytes(b"#" * 2000)
    assert "2000 bytes: input files are limited to 1000 bytes" in str(pytest.raises(InputError, read_text, big, limit=1000).value)
    bad = tmp_path / "bad"
    bad.write_bytes(b"a: 1\nb: caf\xc3\n\xa9\n")
    assert str(pytest.raises(InputError, read_text, bad).value) == \
        f"{bad}:2: not UTF-8: byte 0xc3 at offset 11 (column 7); expected UTF-8 text"
    bom = tmp_path / "bom"
    bom.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert read_text(bom) == "a: 1\n"


# -- numbers ----------------------------------------------------------------------------------------------

def test_check_number_compares_integers_exactly_and_names_the_broken_bound():
    assert check_number(BYTES_MAX, maximum=BYTES_MAX) == float(BYTES_MAX)
    with pytest.raises(ValueError, match=r"expected a number ≤ 2\^63 − 1 = 9223372036854775807, got 9223372036854775808"):
        check_number(BYTES_MAX + 1, maximum=BYTES_MAX)
    with pytest.raises(ValueError, match="expected a number > 0, got 0"):
        check_number(0, strict=True, maximum=5)
    with pytest.raises(ValueError, match="expected a number < 1, got 1"):
        check_number(1, maximum=1, below=True)
    assert check_number("1e3", maximum=1e3) == 1000.0


@pytest.mark.parametrize("value, bounds, message", [
    (float("inf"), {}, "expected a finite number ≥ 0, got inf"),
    (float("inf"), {"strict": True, "maximum": 1e6}, "expected a number ≤ 1e+06, got inf"),
    (float("-inf"), {"strict": True, "maximum": 1e6}, "expected a number > 0, got -inf"),
    (float("nan"), {"minimum": 0.1, "maximum": 86400}, "expected a finite number ≥ 0.1, got nan"),
    (float("nan"), {"whole": True}, "expected a finite whole number ≥ 0, got nan"),
    ("1e400", {"strict": True}, "expected a finite number > 0, got 1e400"),  # past a float's range: inf
    ("1e400", {"maximum": 1e6}, "expected a number ≤ 1e+06, got 1e400"),
    ("1e-7", {"strict": True, "maximum": 1e-8}, "expected a number ≤ 1e-08, got 1e-7"),  # a number, as written
])
def test_infinity_and_nan_are_refused_by_a_bound_they_break(value, bounds, message):
    """The audit: ``.inf`` or ``1e400`` gave "expected a number > 0, got inf", which inf is.
    Now the message names the upper bound it passes, or asks for a finite number."""
    with pytest.raises(ValueError) as info:
        check_number(value, **bounds)
    assert str(info.value) == message


@pytest.mark.parametrize("text, message", [
    ("weights:\n  users:\n    A: .inf\n", "p.yaml:3: weights.users.A: expected a number ≤ 1e+06, got inf"),
    ("weights: {default: 1e400}\n", "p.yaml:1: weights.default: expected a number ≤ 1e+06, got 1e400"),
    ("interval_s: .inf\n", "p.yaml:1: interval_s: expected a number ≤ 86400, got inf"),
    ("interval_s: .nan\n", "p.yaml:1: interval_s: expected a finite number ≥ 0.1, got nan"),
    # YAML 1.1 reads 1e-7 (no dot) as text, the number rule as a number: the message shows it as written
    ("weights: {default: 1e-7}\n", "p.yaml:1: weights.default: expected a weight ≥ 1e-06 (weights span 10^-6 … 10^6), "
                                    "got 1e-7"),
    ("weights: {default: 0.0000001}\n", "p.yaml:1: weights.default: expected a weight ≥ 1e-06 (weights span 10^-6 … "
                                         "10^6), got 1e-07"),
])
def test_policy_infinities_and_tiny_weights_say_which_bound(text, message):
    with pytest.raises(InputError) as info:
        policy_from_text(text, "p.yaml")
    assert str(info.value) == message
    assert policy_from_text("weights: {default: 1e-6}\n")[0].default_weight == 1e-6  # exponent text is a number


# -- the policy's bounds ------------------------------------------------------------------------------------

@pytest.mark.parametrize("ok, bad, field", [
    ("interval_s: 86400", "interval_s: 86400.5", "interval_s"),
    ("hysteresis: 0.99", "hysteresis: 1", "hysteresis"),
    ("weights: {default: 1000000}", "weights: {default: 1000001}", "weights.default"),
    ("weights: {default: 1.0e-6}", "weights: {default: 0.9e-6}", "weights.default"),
    ("governed: {min_uid: 4294967294, max_uid: 4294967294}", "governed: {min_uid: 4294967295, max_uid: 4294967294}",
     "governed.min_uid"),
    ("governed: {max_uid: 4294967294}", "governed: {max_uid: 4294967295}", "governed.max_uid"),
    ("reserve: {cpu_cores: 1048576}", "reserve: {cpu_cores: 1048577}", "reserve.cpu_cores"),
    ("reserve: {memory_bytes: 9223372036854775807}", "reserve: {memory_bytes: 9223372036854775808}",
     "reserve.memory_bytes"),
    ("reserve: {memory_bytes: 8388607TiB}", "reserve: {memory_bytes: 8388608TiB}", "reserve.memory_bytes"),
    ("memory: {margin_bytes: 4611686018427387904}", "memory: {margin_bytes: 4611686018427387905}", "memory.margin_bytes"),
    ("memory: {high_step_bytes: 4194304TiB}", "memory: {high_step_bytes: 4194305TiB}", "memory.high_step_bytes"),
    ("capacity: {disks: {sda: {read_bytes_per_s: 9223372036854775807, write_bytes_per_s: 1}}}",
     "capacity: {disks: {sda: {read_bytes_per_s: 9223372036854775808, write_bytes_per_s: 1}}}",
     "capacity.disks.sda.read_bytes_per_s"),
    ("capacity: {nics: {eth0: {bits_per_s: 1e15}}}", "capacity: {nics: {eth0: {bits_per_s: 1.1e15}}}",
     "capacity.nics.eth0.bits_per_s"),
    ("history: {retention_days: 36500}", "history: {retention_days: 36501}", "history.retention_days"),
    ("history: {every_s: 86400}", "history: {every_s: 86401}", "history.every_s"),
    ("state_path: /run/" + "x" * 4000, "state_path: /run/" + "x" * 4091, "state_path"),
    ("state_path: /run/x", 'state_path: "/run/\\0x"', "state_path"),
])
def test_every_policy_number_has_an_upper_bound(ok, bad, field):
    policy_from_text(ok + "\n", "p.yaml")
    with pytest.raises(InputError, match=f"^p.yaml:1: {field}: expected"):
        policy_from_text(bad + "\n", "p.yaml")


def test_on_this_host_a_reserve_must_leave_cpu_and_memory(tmp_path):
    path = tmp_path / "p.yaml"
    host = HostFacts(cpu_cores=4.0, memory_bytes=8 * 2**30)
    path.write_text("reserve:\n  cpu_cores: 3.5\n  memory_bytes: 7GiB\n")
    assert load_policy(path, host=host)[0].reserve.memory_bytes == 7 * 2**30
    path.write_text("reserve:\n  memory_bytes: 8GiB\n")
    with pytest.raises(InputError, match=r"p.yaml:2: reserve.memory_bytes: expected less than this host's memory"):
        load_policy(path, host=host)
    path.write_text("reserve:\n  cpu_cores: 4\n")
    with pytest.raises(InputError, match=r"p.yaml:2: reserve.cpu_cores: expected less than this host's 4 CPUs"):
        load_policy(path, host=host)
    assert load_policy(path)[0].reserve.cpu_cores == 4.0  # without a host: nothing to compare with
    facts = HostFacts.this_host()
    assert facts is not None and facts.memory_bytes > 0 and facts.cpu_cores >= 1


def _fake_sysfs(root):
    """A /sys with one whole disk (vda), a loop device, a NIC (eth0), a bridge (br0) and lo."""
    for name, device in (("vda", True), ("loop0", False)):
        node = root / "block" / name
        (node / "queue").mkdir(parents=True)
        (node / "dev").write_text("254:0\n" if device else "7:0\n")
        if device:
            (node / "device").mkdir()
    (root / "class" / "net" / "eth0" / "device").mkdir(parents=True)
    (root / "class" / "net" / "br0").mkdir()
    (root / "class" / "net" / "lo").mkdir()
    for name, kind in (("eth0", 1), ("br0", 1), ("lo", 772)):  # ARPHRD_ETHER, ARPHRD_LOOPBACK
        (root / "class" / "net" / name / "type").write_text(f"{kind}\n")
    return root


POLICY_WITH_DEVICES = ("enforce: [cpu, memory, io, net]\ncapacity:\n  disks:\n    vda: {read_bytes_per_s: 1e9, write_bytes_per_s: 1e9}\n"
                       "    sdz: {read_bytes_per_s: 1e9, write_bytes_per_s: 1e9}\n"
                       "  nics:\n    eth0: {bits_per_s: 1e9}\n    br0: {bits_per_s: 1e8}\n    eth9: {bits_per_s: 1e9}\n")


def test_on_this_host_a_disk_or_nic_it_does_not_have_is_a_warning_in_drfgov_runs_words(tmp_path):
    """The audit: check-config passed capacity.disks.sdz and a NIC that did not exist, which
    drfgov run then logged as not governed. check-config warns of them now, in the same words
    (one rule: absent_devices), with the line."""
    from governor.service.hostsetup import _network, set_up

    sysfs = _fake_sysfs(tmp_path / "sys")
    meminfo = tmp_path / "proc" / "meminfo"
    meminfo.parent.mkdir()
    meminfo.write_text("MemTotal:       8388608 kB\n")
    facts = HostFacts.this_host(str(meminfo.parent), str(sysfs))
    assert (facts.disks, facts.interfaces, facts.nics, facts.loopbacks) == (("vda",), ("br0", "eth0", "lo"), ("eth0",),
                                                                            ("lo",))
    path = tmp_path / "p.yaml"
    path.write_text(POLICY_WITH_DEVICES)
    policy, warnings = load_policy(path, trusted_uids=None, host=facts)
    assert warnings == [f"{path}:5: capacity.disks.sdz: no such disk here (have: vda); its I/O is not governed",
                        f"{path}:9: capacity.nics.eth9: no such interface here (NICs: eth0); it is not shaped"]
    unshaped = tmp_path / "unshaped.yaml"  # drfgov run shapes nothing then: a NIC's capacity is not used
    unshaped.write_text(POLICY_WITH_DEVICES.replace("enforce: [cpu, memory, io, net]\n", ""))
    assert [w.split(": ")[1] for w in load_policy(unshaped, trusted_uids=None, host=facts)[1]] == ["capacity.disks.sdz"]
    assert load_policy(path, trusted_uids=None, host=HostFacts(4.0, 2**33))[1] == []  # devices not known: nothing said
    assert load_policy(path, trusted_uids=None)[1] == []
    # drfgov run's notes: the same words after the file
    mountinfo = "".join(line + "\n" for line in (FIXTURES / "mountinfo" / "hybrid.txt").read_text().splitlines()
                        if " - cgroup" not in line)
    notes = set_up(policy, True, lambda: 0.0, mountinfo=mountinfo, sysfs=str(sysfs)).notes
    assert f"{path}: capacity.disks.sdz: no such disk here (have: vda); its I/O is not governed" in notes
    # on /proc the disk it has is not governed either, and its note says why: not also "none configured"
    # (the admin audit of 2026-11-27: a pasted calibrate io was told to see calibrate io)
    assert "capacity.disks.vda: /proc does not tell I/O per disk; its I/O is not governed" in notes
    assert not any("no disk has a configured bandwidth" in note for note in notes), notes
    notes = []
    from monitors.capacity import host_capacity
    shaper = _network(policy, host_capacity(None, 0, str(sysfs), "/proc"), lambda: 0.0, notes, str(sysfs))
    assert notes == [f"{path}: capacity.nics.eth9: no such interface here (NICs: eth0); it is not shaped"]
    assert sorted(str(r) for r in shaper.links) == ["net:br0:rx", "net:br0:tx", "net:eth0:rx", "net:eth0:tx"]


def test_long_name_lists_cost_a_bounded_number_of_lookups(monkeypatch):
    looked_up = []

    def by_name(name):
        looked_up.append(name)
        raise KeyError(name)

    def by_id(uid):
        raise KeyError(uid)

    monkeypatch.setattr(policy_module, "LOOKUPS", 5)
    monkeypatch.setattr(names_module, "USERS", names_module.Database(
        "user", "uid", by_name, by_id, lambda: [names_module.Entry("u1", 2001), names_module.Entry("u2", 2002)]))
    names = ", ".join(f"u{i}" for i in range(20))
    _, warnings = policy_from_text(f"governed: {{exempt_users: [{names}]}}\n", "p.yaml")
    assert len(looked_up) == 5 and "u1" not in looked_up
    assert warnings[-1].endswith("13 more user names not looked up (at most 5 lookups a list): not in this host's "
                                 "user list")


# -- who may write the policy file -------------------------------------------------------------------------

def test_the_policy_must_be_writable_only_by_trusted_owners(tmp_path):
    me = os.geteuid()
    good = tmp_path / "p.yaml"
    good.write_text("mode: dry-run\n")
    os.chmod(good, 0o644)
    check_trusted_file(good, {0, me})
    assert load_policy(good)[0].mode == "dry-run"  # the default: root or the invoking user
    owned = f"^{good}: owned by uid {me}.*, not root: .*fix: chown root:root .*; chmod 644"
    with pytest.raises(InputError, match=owned):
        check_trusted_file(good, {me + 1})
    os.chmod(good, 0o664)
    with pytest.raises(InputError, match=rf"^{good}: group-writable \(mode 0664\).*chmod 644"):
        load_policy(good)
    assert load_policy(good, trusted_uids=None)[0].mode == "dry-run"  # this test says so: no check
    os.chmod(good, 0o644)
    link = tmp_path / "link.yaml"
    target_dir = tmp_path / "open"
    target_dir.mkdir()
    target = target_dir / "real.yaml"
    target.write_text("mode: enforce\n")
    os.chmod(target, 0o666)
    link.symlink_to(target)
    with pytest.raises(InputError, match=rf"^{link} \(→ {target}\): world-writable \(mode 0666\)"):
        load_policy(link)
    os.chmod(target, 0o644)
    os.chmod(target_dir, 0o777)
    with pytest.raises(InputError, match=rf"the directory {target_dir} above it is world-writable .*chmod go-w"):
        load_policy(link)
    os.chmod(target_dir, 0o1777)  # sticky, as /tmp: others cannot replace what they do not own
    assert load_policy(link)[0].mode == "enforce"
    assert stat.S_IMODE(os.stat("/tmp").st_mode) & stat.S_ISVTX


# -- problem files and --discrete ------------------------------------------------------------------------

def parse(text):
    return parse_problem(loads(text, "p.yaml"))


@pytest.mark.parametrize("text, message", [
    ("capacity: {cpu: 1.0e+19}\nusers: {}\n", "p.yaml:1: capacity.cpu: expected a number ≤ 1e+18, got 1e+19"),
    ("capacity: {cpu: 1}\nusers:\n  A: {demand: {cpu: 1.0e-13}}\n",
     "p.yaml:3: users.A.demand.cpu: expected 0 or a number ≥ 1e-12"),
    ("capacity: {cpu: 1}\nusers:\n  A: {demand: {cpu: 1}, max_units: 1.0e+16}\n",
     "p.yaml:3: users.A.max_units: expected a number ≤ 1e+15"),
    ("capacity: {cpu: 1}\nusers:\n  A: {demand: {cpu: 1}, weight: {cpu: 2.0e+6}}\n",
     "p.yaml:3: users.A.weight.cpu: expected a number ≤ 1e+06"),
    ("capacity: {cpu: 1}\nusers:\n  A: {demand: {cpu: 1}, allocated: {cpu: .nan}}\n",
     "p.yaml:3: users.A.allocated.cpu: expected a finite number ≥ 0, got nan"),
])
def test_problem_amounts_are_bounded(text, message):
    with pytest.raises(InputError) as info:
        parse(text)
    assert str(info.value).startswith(message), str(info.value)


def test_problem_size_is_bounded(monkeypatch):
    monkeypatch.setattr(problem_module, "MAX_USERS", 2)
    with pytest.raises(InputError, match="p.yaml:2: users: expected at most 2 users, got 3"):
        parse("capacity: {cpu: 1}\nusers: {a: {demand: {}}, b: {demand: {}}, c: {demand: {}}}\n")
    monkeypatch.setattr(problem_module, "MAX_CELLS", 3)
    with pytest.raises(InputError, match="2 users × 2 resources: expected at most 3"):
        parse("capacity: {cpu: 1, mem: 1}\nusers: {a: {demand: {}}, b: {demand: {}}}\n")


def test_sparse_arrays_match_the_named_entries():
    C, D, W, M, H = parse("capacity: {cpu: 9, memory: 18, disk: 3}\nusers:\n"
                          "  A: {demand: {memory: 4}, weight: {disk: 3}, allocated: {cpu: 1}}\n"
                          "  B: {demand: {cpu: 3, disk: 1}, max_units: 5, weight: 2}\n").arrays()
    assert D.tolist() == [[0, 4, 0], [3, 0, 1]] and W.tolist() == [[1, 1, 3], [2, 2, 2]]
    assert H.tolist() == [[1, 0, 0], [0, 0, 0]] and M.tolist() == [float("inf"), 5]


def test_discrete_work_is_refused_before_it_starts_naming_the_user():
    problem = parse("capacity: {cpu: 1.0e+9, memory: 1.0e+9}\nusers:\n  small: {demand: {cpu: 1}, max_units: 10}\n"
                    "  big: {demand: {cpu: 1, memory: 1}}\n")
    with pytest.raises(InputError, match=r"p.yaml:4: users.big: --discrete would hand out up to 1e\+09 units"):
        solve(problem, discrete=True)
    assert solve(problem).users["big"].units > 0  # progressive filling: no such limit
    fine = parse(f"capacity: {{cpu: {MAX_DISCRETE_UNITS}}}\nusers:\n  a: {{demand: {{cpu: 1000}}}}\n")
    assert solve(fine, discrete=True).users["a"].units == 1000


instances = st.integers(1, 5).flatmap(lambda m: st.tuples(
    st.lists(st.floats(0, 40), min_size=m, max_size=m),
    st.lists(st.tuples(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5, 7.0]), min_size=m, max_size=m),
                       st.sampled_from([float("inf"), 0.0, 3.0, 10.0]),
                       st.lists(st.sampled_from([0.0, 0.0, 1.0]), min_size=m, max_size=m)), min_size=1, max_size=6)))


@settings(max_examples=200, deadline=None)
@given(instances)
def test_units_bound_is_never_below_what_algorithm_1_hands_out(instance):
    capacity, users = instance
    capacity = [max(c, 0.0) for c in capacity]
    holdings = [h for _, _, h in users]
    for r, c in enumerate(capacity):  # holdings within capacity
        total = sum(h[r] for h in holdings)
        if total > c:
            capacity[r] = total
    scheduler = DiscreteDRF(capacity)
    for i, (demand, cap, held) in enumerate(users):
        scheduler.add_user(i, demand, max_tasks=None if cap == float("inf") else int(cap), holdings=held)
    handed = len(scheduler.schedule())
    total, per_user = units_bound(capacity, [d for d, _, _ in users], [c for _, c, _ in users], holdings)
    assert handed <= total + 1e-9
    assert all(scheduler.tasks(i) <= per_user[i] for i in range(len(users)))


# -- traces and simulate ------------------------------------------------------------------------------------

def test_trace_lines_are_bounded(tmp_path):
    path = tmp_path / "t.jsonl"
    for text, message in (
        ('{"cluster": {"machines": 100001, "capacity": {"cpu": 1}}}\n',
         "t.jsonl:1: cluster.machines: expected a whole number ≤ 100000"),
        ('{"user": "a", "tasks": 10000001, "duration_s": 1, "demand": {"cpu": 1}}\n',
         "t.jsonl:1: tasks: expected a whole number ≤ 10000000"),
        ('{"user": "a", "tasks": 1, "tasks": 2, "duration_s": 1, "demand": {"cpu": 1}}\n', "t.jsonl:1: tasks: duplicate key"),
        ('{"user": "a\\u0000", "tasks": 1, "duration_s": 1, "demand": {"cpu": 1}}\n', "t.jsonl:1: user: expected a user name"),
        ('{"user": "a", "tasks": 1, "duration_s": 2e9, "demand": {"cpu": 1}}\n', "t.jsonl:1: duration_s: expected a number ≤ 1e+09"),
        ('{"user": "a", "tasks": 1, "duration_s": 1, "demand": {"cpu": 1e19}}\n', "t.jsonl:1: demand.cpu: expected a number ≤ 1e+18"),
        ('{"weights": {"a": 0}}\n{"user": "a", "tasks": 1, "duration_s": 1, "demand": {"cpu": 1}}\n',
         "t.jsonl:1: weights.a: expected a number > 0"),
    ):
        path.write_text(text)
        with pytest.raises(InputError) as info:
            load_trace(path)
        assert str(info.value).startswith(str(tmp_path / message)), str(info.value)


def test_simulation_work_is_bounded_before_it_starts(tmp_path):
    jobs = [Job(0.0, "a", 80, 30.0, (1.0,), True, line=2), Job(0.0, "b", 10, 1.0, (1.0,), False, line=3)]
    trace = Trace(jobs, ["cpu"], file="t.jsonl", cluster_line=1)
    check_work(trace, Cluster(48, {"cpu": 8.0}), 600.0)  # 80 × 21 + 10 runs
    fast = Trace([Job(0.0, "a", 80, 1e-6, (1.0,), True, line=2)], ["cpu"], file="t.jsonl", cluster_line=1)
    with pytest.raises(InputError, match=r"^t.jsonl:2: tasks: the trace would run up to 4\.8e\+10 tasks"):
        check_work(fast, Cluster(48, {"cpu": 8.0}), 600.0)
    many = Trace([Job(0.0, "a", 10**6, 1.0, (1.0,), False, line=2)], ["cpu"], file="t.jsonl", cluster_line=1)
    with pytest.raises(InputError, match=r"^t.jsonl:1: cluster.machines: 1e\+06 task runs × 20,000 machines"):
        check_work(many, Cluster(20_000, {"cpu": 8.0}), None)
    with pytest.raises(InputError, match=r"^--machines: expected a whole number ≤ 100000"):
        check_work(many, Cluster(10**12, {"cpu": 8.0}), None, machines_from="--machines")
    with pytest.raises(InputError, match=r"^--duration-s: expected a number ≤ 1e\+09"):
        check_work(many, Cluster(2, {"cpu": 8.0}), 1e12, horizon_from="--duration-s")


def test_samples_are_thinned_to_a_bound_without_changing_the_outcome(monkeypatch):
    jobs = [Job(0.0, "a", 4, 50_000.0, (1.0,)), Job(10.0, "b", 4, 90_000.0, (1.0,))]
    cluster = Cluster(1, {"cpu": 2.0})
    wide = simulate(parse_scheduler("drf", ["cpu"]), cluster, jobs)
    assert len(wide.series.time_s) <= engine.MAX_SAMPLES
    monkeypatch.setattr(engine, "MAX_SAMPLES", 10**9)
    full = simulate(parse_scheduler("drf", ["cpu"]), cluster, jobs)
    assert len(full.series.time_s) > engine.MAX_SAMPLES > 0 or len(full.series.time_s) > 1000
    assert (wide.jobs_completed, wide.mean_response_s, wide.end_s) == (full.jobs_completed, full.mean_response_s, full.end_s)
    step = wide.series.time_s[1] - wide.series.time_s[0]
    assert wide.series.time_s == pytest.approx([i * step for i in range(len(wide.series.time_s))])
    assert set(full.series.time_s) >= set(wide.series.time_s)
    assert all(len(v) == len(wide.series.time_s) for v in (*wide.series.dominant_share.values(),
                                                           *wide.series.committed.values()))


def test_problem_files_report_lines_from_json_too(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"capacity": {"cpu": 9},\n "users": {\n  "A": {"demand": {"cpu": 1}, "weight": 0}}}\n')
    with pytest.raises(InputError, match=r"p.json:3: users.A.weight: expected a number > 0, got 0"):
        load_problem(path)


def test_json_lines_of_a_big_document_skip_what_is_not_on_the_path():
    users = ",\n".join(f'  "u{i}": {{"demand": {{"cpu": 1, "memory": [1, 2, {{"x": "}}]"}}]}}, "weight": 1}}'
                       for i in range(3000))
    text = '{"capacity": {"cpu": 9},\n "users": {\n' + users + "\n}}\n"
    located = loads(text, "p.json")
    assert located.line(("users", "u2999", "weight")) == 3002
    assert located.line(("users", "u1500", "demand", "memory", 2, "x")) == 1503
    assert located.line(("users", "u10", "no-such-field")) == 13  # the nearest field that exists
    assert located.line(("users", "nobody")) == 2
    assert error(text.replace('"u2999"', '"u7"'), "p.json") == "p.json:3002: users.u7: duplicate key (first on line 10)"


def test_a_shared_sticky_directory_is_refused_with_a_fix_that_is_not_chmod(tmp_path):
    """The audit: a state directory in /tmp was refused with "fix: chmod go-w /tmp", which would
    break /tmp for every user. A world-writable sticky directory is shared by design: the fix is
    to point the setting elsewhere. A plain world-writable one keeps its chmod fix."""
    from governor.config.source import check_trusted_directory

    shared, loose = tmp_path / "shared", tmp_path / "loose"
    shared.mkdir()
    loose.mkdir()
    shared.chmod(0o1777)
    loose.chmod(0o777)
    with pytest.raises(InputError, match="mode 1777") as refused:
        check_trusted_directory(shared, {os.geteuid()})
    assert "chmod" not in str(refused.value).replace("do not chmod it", "")
    assert "point the setting at a directory only root may write, such as /run/drfgov or /var/lib/drfgov" in str(refused.value)
    with pytest.raises(InputError, match=rf"fix: chmod go-w {loose}$"):
        check_trusted_directory(loose, {os.geteuid()})


def test_a_loopback_device_in_capacity_nics_is_a_warning_and_is_not_shaped(tmp_path):
    """The admin audit of 2026-11-27: capacity.nics.lo was taken without a word and shaped,
    where what leaves through it never leaves the host (and the ingress marks leave it alone)."""
    from governor.service.hostsetup import _network
    from monitors.capacity import host_capacity

    sysfs = _fake_sysfs(tmp_path / "sys")
    meminfo = tmp_path / "proc" / "meminfo"
    meminfo.parent.mkdir()
    meminfo.write_text("MemTotal:       8388608 kB\n")
    facts = HostFacts.this_host(str(meminfo.parent), str(sysfs))
    path = tmp_path / "p.yaml"
    path.write_text("enforce: [cpu, memory, net]\ncapacity:\n  nics:\n    eth0: {bits_per_s: 1e9}\n"
                    "    lo: {bits_per_s: 1e10}\n")
    policy, warnings = load_policy(path, trusted_uids=None, host=facts)
    said = ("capacity.nics.lo: a loopback device: traffic between local users stays on the host and is never "
            "shaped; it is not shaped")
    assert warnings == [f"{path}:5: {said}"]
    notes = []
    shaper = _network(policy, host_capacity(None, 0, str(sysfs), "/proc"), lambda: 0.0, notes, str(sysfs))
    assert notes == [f"{path}: {said}"]
    assert sorted(str(r) for r in shaper.links) == ["net:eth0:rx", "net:eth0:tx"]
