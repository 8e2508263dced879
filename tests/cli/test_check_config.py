"""`drfgov check-config` through the installed command."""

import json


def test_example_is_ok(drfgov):
    out = drfgov("check-config", "configs/drfgov.yaml")
    assert out.returncode == 0 and out.stdout.startswith("OK: configs/drfgov.yaml: mode enforce")


def test_error_exit_2_one_line(drfgov, tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("interval_s: 1\nweights:\n  users:\n    alice: 0\n")
    out = drfgov("check-config", bad)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == f"drfgov: error: {bad}:4: weights.users.alice: expected a number > 0, got 0"


def test_json(drfgov, tmp_path):
    good = tmp_path / "p.yaml"
    good.write_text("weights:\n  users: {no-such-user-q: 2}\n")
    doc = json.loads(drfgov("check-config", good, "--json").stdout)
    assert doc["ok"] is True and doc["warnings"][0].endswith("no user 'no-such-user-q' on this host (yet)")
    bad = tmp_path / "bad.yaml"
    bad.write_text("mode: maybe\n")
    out = drfgov("check-config", bad, "--json")
    assert out.returncode == 2 and json.loads(out.stdout)["ok"] is False


def test_metrics_address_a_name_is_exit_2_and_every_interface_a_warning(drfgov, tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text('interval_s: 1\nmetrics:\n  listen: "localhost:9798"\n')
    out = drfgov("check-config", bad)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"drfgov: error: {bad}:3: metrics.listen: expected IP:PORT such as '127.0.0.1:9798' "
                                  "or '[::1]:9798': the host must be an IP address, not a name, got text 'localhost:9798'")
    wide = tmp_path / "w.yaml"
    wide.write_text('metrics: {listen: "0.0.0.0:9798"}\n')
    out = drfgov("check-config", wide)
    assert out.returncode == 0 and "metrics.listen: 0.0.0.0 listens on every interface" in out.stderr


def test_a_state_or_history_directory_drfgov_run_refuses_is_refused_here_too(drfgov, tmp_path):
    """The audit: state_path in /tmp passed check-config, then drfgov run refused it with the fix
    "chmod go-w /tmp", which would break /tmp for everyone (doctor said the same). Now
    check-config applies run's directory rules, and a shared sticky directory is not to be chmod-ed."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp
    for text, field, line in ((f"mode: dry-run\nstate_path: {shared}/state.json\n", "state_path", 2),
                              (f"history:\n  retention_days: 7\n  path: {shared}/history.db\n", "history.path", 3)):
        policy = tmp_path / "p.yaml"
        policy.write_text(text)
        out = drfgov("check-config", policy)
        assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1, out.stderr
        # the line that sets it, as for every other field (the CLI audit of 2026-11-27: none before)
        assert out.stderr.startswith(f"drfgov: error: {policy}:{line}: {field}: "), out.stderr
        assert f": {field}: {shared}: world-writable (mode 1777)" in out.stderr
        assert out.stderr.count(str(shared)) == 1, out.stderr  # the directory named once (the fix: elsewhere)
        assert "such as /run/drfgov or /var/lib/drfgov" in out.stderr and "chmod go-w" not in out.stderr
    policy.write_text(f"state_path: {shared}/run/state.json\nhistory: {{path: {shared}/lib/history.db}}\n")
    assert drfgov("check-config", policy).returncode == 0  # made by the daemon under it, and checked then
    private = tmp_path / "private"
    private.mkdir(mode=0o755)
    policy.write_text(f"state_path: {private}/run/state.json\nhistory: {{path: {private}/lib/history.db}}\n")
    assert drfgov("check-config", policy).returncode == 0


def test_a_textfile_directory_drfgov_run_refuses_is_refused_here_too(drfgov, tmp_path):
    """The audit's leftovers: check-config said OK to a metrics.textfile in a world-writable
    directory (or under a file), then drfgov run refused it at its start (exit 1, after its
    setup). Now both refuse it first, exit 2, naming the line and the fix."""
    from tests.textfiledirs import textfile_dirs

    shared, private, a_file, outputs = textfile_dirs(tmp_path)
    policy = tmp_path / "p.yaml"
    for directory, judged, said in ((shared, shared, f"{shared}: world-writable (mode 0777)"),
                                    (shared / "sub", shared, f"{shared}: world-writable (mode 0777)"),  # run makes it
                                    (a_file, a_file, f"{a_file}: not a directory (a regular file)")):
        policy.write_text(f"mode: dry-run\nmetrics:\n  textfile: {directory}/drfgov.prom\n{outputs}")
        for command in (("check-config", policy), ("run", "--dry-run", "--config", policy)):
            out = drfgov(*command)
            error = out.stderr.splitlines()[-1]  # run logs its host's interface first
            assert out.returncode == 2 and out.stderr.count("drfgov: error:") == 1, (command, out.stderr)
            assert error.startswith(f"drfgov: error: {policy}:3: metrics.textfile: "), out.stderr
            assert f"metrics.textfile: {said}" in error, out.stderr
            assert error.partition("; fix: ")[0].count(str(judged)) == 1, error  # named once, then in the fix
        assert not (private / "run").exists()  # refused before anything was made
    policy.write_text(f"metrics:\n  textfile: {private}/prom/drfgov.prom\n{outputs}")
    out = drfgov("check-config", policy)
    assert out.returncode == 0 and out.stderr == "", out.stderr  # made by the daemon, 0755, and checked then


def test_a_max_uid_below_min_uid_is_exit_2_naming_file_line_and_field(drfgov, tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("governed:\n  min_uid: 5000\n  max_uid: 4999\n")
    out = drfgov("check-config", bad)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"drfgov: error: {bad}:3: governed.max_uid: expected a uid ≥ governed.min_uid (5000), "
                                  "got 4999: no uid would be governed")
    bad.write_text("governed:\n  min_uid: 70000\n")  # LDAP users only: no upper bound by default
    assert drfgov("check-config", bad).returncode == 0


def test_infinity_names_the_bound_it_breaks_and_exponent_text_reads_as_written(drfgov, tmp_path):
    """The audit: `weight: .inf` said "expected a number > 0, got inf" (inf is > 0), and
    `1e-7` said "got text '1e-7'" though the number rule reads it as a number."""
    bad = tmp_path / "p.yaml"
    for text, message in (("weights:\n  default: .inf\n", "2: weights.default: expected a number ≤ 1e+06, got inf"),
                          ("interval_s: 1e400\n", "1: interval_s: expected a number ≤ 86400, got 1e400"),
                          ("weights:\n  default: 1e-7\n", "2: weights.default: expected a weight ≥ 1e-06 (weights span "
                                                          "10^-6 … 10^6), got 1e-7")):
        bad.write_text(text)
        out = drfgov("check-config", bad)
        assert out.returncode == 2 and out.stderr.strip() == f"drfgov: error: {bad}:{message}", out.stderr


def test_a_decimal_byte_unit_is_refused_saying_what_to_write(drfgov, tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("reserve:\n  memory_bytes: 1GB\n")
    out = drfgov("check-config", bad)
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1
    assert out.stderr.strip() == (f"drfgov: error: {bad}:2: reserve.memory_bytes: expected bytes: a whole number or a size "
                                  "like 512M, 512MiB or 2GiB (binary units: K, M, G, T are KiB, MiB, GiB, TiB), got text "
                                  "'1GB': 'GB' is ambiguous (10^9 or 2^30 bytes?), write GiB")
    bad.write_text("reserve:\n  memory_bytes: 1G\n")
    assert drfgov("check-config", bad).returncode == 0


def test_a_disk_or_nic_this_host_lacks_is_a_warning_as_drfgov_run_gives_it(drfgov, tmp_path):
    """The audit: check-config said OK to capacity.disks.sdz, and drfgov run then logged
    "capacity.disks.sdz: no such disk here (have: vda); its I/O is not governed"."""
    policy = tmp_path / "p.yaml"
    policy.write_text("enforce: [cpu, memory, io, net]\n"
                      "capacity:\n  disks:\n    nosuchdisk9: {read_bytes_per_s: 1e9, write_bytes_per_s: 1e9}\n"
                      "  nics:\n    nosuchnic9: {bits_per_s: 1e9}\n")
    out = drfgov("check-config", policy)
    assert out.returncode == 0 and out.stdout.startswith(f"OK: {policy}")
    disk, nic = out.stderr.splitlines()
    assert disk.startswith(f"drfgov: warning: {policy}:4: capacity.disks.nosuchdisk9: no such disk here (have: ")
    assert disk.endswith("); its I/O is not governed")
    assert nic.startswith(f"drfgov: warning: {policy}:6: capacity.nics.nosuchnic9: no such interface here (NICs: ")
    assert nic.endswith("); it is not shaped")
    doc = json.loads(drfgov("check-config", policy, "--json").stdout)
    assert doc["ok"] is True and [w.split(": ", 2)[1] for w in doc["warnings"]] == ["capacity.disks.nosuchdisk9",
                                                                                    "capacity.nics.nosuchnic9"]


def test_a_nul_in_a_user_or_group_name_is_exit_2_naming_file_line_and_field(drfgov, tmp_path):
    """The policy audit: `"a\u0000b": 2` under weights.users was a traceback (ValueError:
    embedded null byte), exit 1, here and in every command that loads the policy."""
    bad = tmp_path / "oddname.yaml"
    for text, where in (
            ('weights:\n  users:\n    "a\\u0000b": 2\n', "3: weights.users.a\\x00b: expected a login name"),
            ('weights:\n  groups:\n    "a\\u0000b": 2\n', "3: weights.groups.a\\x00b: expected a group name"),
            ('governed:\n  exempt_users: ["a\\0b"]\n', "2: governed.exempt_users.0: expected a login name"),
            ('governed:\n  exempt_groups: ["a\\0b"]\n', "2: governed.exempt_groups.0: expected a group name")):
        bad.write_text(text)
        out = drfgov("check-config", bad)
        assert out.returncode == 2 and out.stdout == "" and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.strip() == (f"drfgov: error: {bad}:{where}, got 'a\\x00b': control character U+0000 at "
                                      "character 2 (names have none)")


def test_a_uid_where_a_login_name_goes_is_exit_2_naming_whose_uid_it_is(drfgov, tmp_path):
    """The audit: exempt_users: [1000] warned "no user '1000' on this host (yet)" and exempted no
    one. uid 0 is root on every host."""
    bad = tmp_path / "p.yaml"
    bad.write_text("governed:\n  exempt_users: [0]\n")
    out = drfgov("check-config", bad)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"drfgov: error: {bad}:2: governed.exempt_users.0: expected a login name, got the "
                                  "number 0 (uid 0 is root on this host); a name of digits goes in quotes")
    bad.write_text('weights:\n  users:\n    "0": 2\n')
    out = drfgov("check-config", bad)
    assert out.returncode == 2 and out.stderr.strip() == (
        f"drfgov: error: {bad}:3: weights.users.0: expected a login name, got '0' (uid 0 is root on this host; no user "
        "is named '0')")


def test_a_control_character_in_the_file_names_line_and_column(drfgov, tmp_path):
    bad = tmp_path / "bel.yaml"
    bad.write_bytes(b"interval_s: 1\nmode: dry-run\x07\n")
    out = drfgov("check-config", bad)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip() == (f"drfgov: error: {bad}:2: not valid YAML/JSON: control character U+0007 at column 14 "
                                  "(YAML allows tab, newline and printable characters only)")


def test_weights_that_can_never_apply_are_warnings_and_a_range_of_nobody_alone_is_exit_2(drfgov, tmp_path):
    """root (uid 0) is below min_uid and nobody (65534) is never governed on every host."""
    policy = tmp_path / "p.yaml"
    policy.write_text("weights:\n  users:\n    root: 2\n    nobody: 3\ngoverned:\n  exempt_users: [root, root]\n")
    out = drfgov("check-config", policy)
    assert out.returncode == 0 and out.stdout.startswith(f"OK: {policy}"), out.stderr
    assert out.stderr.splitlines() == [
        f"drfgov: warning: {policy}:3: weights.users.root: 'root' is uid 0, below governed.min_uid (1000), so never "
        "governed: this weight never applies",
        f"drfgov: warning: {policy}:4: weights.users.nobody: 'nobody' is uid 65534, the overflow uid (nobody), "
        "which is never governed: this weight never applies",
        f"drfgov: warning: {policy}:6: governed.exempt_users: 'root' listed twice (items 0 and 1)",
    ]
    policy.write_text("governed:\n  min_uid: 65534\n  max_uid: 65534\n")
    out = drfgov("check-config", policy)
    assert out.returncode == 2 and out.stderr.strip() == (
        f"drfgov: error: {policy}:3: governed.max_uid: expected a range with a uid other than 65534 (nobody, never "
        "governed), got 65534 … 65534: no uid would be governed")


def test_two_files_the_daemon_writes_being_one_is_exit_2_naming_both_fields(drfgov, tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text("mode: dry-run\nstate_path: /run/drfgov/m.prom\nmetrics:\n  textfile: /run/drfgov/m.prom\n")
    out = drfgov("check-config", policy)
    assert out.returncode == 2 and out.stderr.strip() == (
        f"drfgov: error: {policy}:4: metrics.textfile: expected another file than state_path ('/run/drfgov/m.prom'), "
        "got '/run/drfgov/m.prom': the daemon writes each of them")
    policy.write_text(f"mode: dry-run\nhistory:\n  path: {policy}\n")
    out = drfgov("check-config", policy)
    assert out.returncode == 2 and out.stderr.startswith(
        f"drfgov: error: {policy}:3: history.path: expected another file than the policy file itself, got "), out.stderr


def test_disk_bandwidth_takes_iec_strings(drfgov, tmp_path):
    policy = tmp_path / "p.yaml"
    policy.write_text("capacity:\n  disks:\n    vda: {read_bytes_per_s: 1GiB, write_bytes_per_s: 500MiB}\n")
    out = drfgov("check-config", policy, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["ok"] is True, out.stderr
