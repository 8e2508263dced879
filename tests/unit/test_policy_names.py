"""User and group names in the policy (governor/config/names.py, policy.py): what a name may be,
a uid or gid written where a name goes, and weights that can never apply — against a fake user
and group database, so that no test depends on this host's accounts."""

import pytest

from governor.config import names
from governor.config.names import NAME_MAX_BYTES, Database, Entry, name_problem
from governor.config.policy import InputError, load_policy, policy_from_text

USERS = [Entry("root", 0, gid=0), Entry("daemon", 1, gid=1), Entry("cloudsdk", 1000, gid=1000),
         Entry("alice", 1001, gid=100), Entry("bob", 1002, gid=100), Entry("carol", 1003, gid=5000),
         Entry("2000", 3000, gid=100), Entry("ldap-user", 70000, gid=100), Entry("nobody", 65534, gid=65534)]
GROUPS = [Entry("root", 0), Entry("users", 100), Entry("cloudsdk", 1000), Entry("admins", 5000, members=("bob",)),
          Entry("staff", 5001, members=("alice",))]


def _database(what: str, id_word: str, entries: list[Entry]) -> Database:
    by_name, by_id = {e.name: e for e in entries}, {e.id: e for e in entries}
    return Database(what, id_word, lambda name: by_name[name], lambda number: by_id[number], lambda: list(entries))


@pytest.fixture(autouse=True)
def host(monkeypatch):
    monkeypatch.setattr(names, "USERS", _database("user", "uid", USERS))
    monkeypatch.setattr(names, "GROUPS", _database("group", "gid", GROUPS))


def refused(text: str) -> str:
    with pytest.raises(InputError) as info:
        policy_from_text(text, "p.yaml")
    return str(info.value)


# -- what a name may be ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, problem", [
    ("", "it is empty"),
    ("a\0b", "control character U+0000 at character 2 (names have none)"),
    ("a\nroot", "control character U+000A at character 2 (names have none)"),
    ("tab\t", "control character U+0009 at character 4 (names have none)"),
    ("esc\x1b[31m", "control character U+001B at character 4 (names have none)"),
    ("del\x7f", "control character U+007F at character 4 (names have none)"),
    ("rtl\u202eeve", "unprintable character U+202E at character 4 (names have none)"),
    ("no\u00a0break", "unprintable character U+00A0 at character 3 (names have none)"),
    ("a:b", "':' at character 2 (it separates the fields of /etc/passwd and /etc/group)"),
    ("../etc", "'/' at character 3 (names become paths: home directories, /run/user)"),
    (".", "'.' and '..' are directories, not names"),
    ("..", "'.' and '..' are directories, not names"),
    (" alice", "a space at its start or end"),
    ("alice ", "a space at its start or end"),
    ("+nis", "'+' first (in /etc/passwd, the mark of a NIS entry)"),
    ("-nis", "'-' first (in /etc/passwd, the mark of a NIS entry)"),
    ("x" * (NAME_MAX_BYTES + 1), "256 bytes (at most 255: LOGIN_NAME_MAX)"),
    ("é" * 128, "256 bytes (at most 255: LOGIN_NAME_MAX)"),
])
def test_what_no_name_may_be(name, problem):
    assert name_problem(name) == problem


@pytest.mark.parametrize("name", ["alice", "DOMAIN\\alice", "alice@example.com", "John Smith", "zoë", "1000", "a.b",
                                  "_apt", "x" * NAME_MAX_BYTES, "user$"])
def test_what_a_name_may_be_sssd_samba_and_ldap_names_included(name):
    assert name_problem(name) is None


@pytest.mark.parametrize("text, expected", [
    ('weights:\n  users:\n    "a\\u0000b": 2\n',
     "p.yaml:3: weights.users.a\\x00b: expected a login name, got 'a\\x00b': control character U+0000 at character 2 "
     "(names have none)"),
    ('weights:\n  groups:\n    "staff\\nroot": 2\n',
     "p.yaml:3: weights.groups.staff\\nroot: expected a group name, got 'staff\\nroot': control character U+000A at "
     "character 6 (names have none)"),
    ('governed:\n  exempt_users: [alice, "b\\0b"]\n',
     "p.yaml:2: governed.exempt_users.1: expected a login name, got 'b\\x00b': control character U+0000 at character 2 "
     "(names have none)"),
    ('governed:\n  exempt_groups:\n    - "x\\0"\n',
     "p.yaml:3: governed.exempt_groups.0: expected a group name, got 'x\\x00': control character U+0000 at character 2 "
     "(names have none)"),
    ("governed:\n  exempt_users: [../../etc]\n",
     "p.yaml:2: governed.exempt_users.0: expected a login name, got '../../etc': '/' at character 3 (names become "
     "paths: home directories, /run/user)"),
    ('weights:\n  users:\n    "": 2\n', "p.yaml:3: weights.users.: expected a login name, got '': it is empty"),
    ("governed:\n  exempt_users: [true]\n",
     "p.yaml:2: governed.exempt_users.0: expected a login name, got a boolean (true)"),
    ("governed:\n  exempt_groups: admins\n",
     "p.yaml:2: governed.exempt_groups: expected a list of group names, got text 'admins'"),
])
def test_a_name_no_user_or_group_can_have_is_an_error_naming_file_line_and_field(text, expected):
    """The audit: a NUL in a name was a traceback (ValueError: embedded null byte) in
    check-config and every command that loads the policy, and a reload logged it with no line."""
    assert refused(text) == expected


def test_a_nul_in_a_name_fails_a_load_as_a_reload_does_naming_the_line(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text('interval_s: 1\nweights:\n  users:\n    "a\\u0000b": 2\n')
    with pytest.raises(InputError) as info:
        load_policy(path, trusted_uids=None)
    assert str(info.value).startswith(f"{path}:4: weights.users.a\\x00b: expected a login name")


def test_names_from_directories_of_every_kind_pass():
    policy, warnings = policy_from_text('weights:\n  users: {"DOMAIN\\\\alice": 2, "alice@example.com": 3}\n', "p.yaml")
    assert policy.user_weights == {"DOMAIN\\alice": 2.0, "alice@example.com": 3.0}
    assert warnings == ["p.yaml:2: weights.users.DOMAIN\\alice: no user 'DOMAIN\\\\alice' on this host (yet)",
                        "p.yaml:2: weights.users.alice@example.com: no user 'alice@example.com' on this host (yet)"]


# -- a uid where a name goes -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("governed: {exempt_users: [1000]}\n",
     "p.yaml:1: governed.exempt_users.0: expected a login name, got the number 1000 (uid 1000 is cloudsdk on this "
     "host); a name of digits goes in quotes"),
    ("governed: {exempt_users: [alice, 4242]}\n",
     "p.yaml:1: governed.exempt_users.1: expected a login name, got the number 4242 (no user has uid 4242 on this "
     "host); a name of digits goes in quotes"),
    ("governed: {exempt_groups: [5000]}\n",
     "p.yaml:1: governed.exempt_groups.0: expected a group name, got the number 5000 (gid 5000 is admins on this "
     "host); a name of digits goes in quotes"),
    ('weights: {users: {"1000": 7}}\n',
     "p.yaml:1: weights.users.1000: expected a login name, got '1000' (uid 1000 is cloudsdk on this host; no user is "
     "named '1000')"),
    ("weights:\n  users:\n    1001: 7\n",
     "p.yaml:3: weights.users.1001: expected a login name, got '1001' (uid 1001 is alice on this host; no user is "
     "named '1001')"),
    ('governed: {exempt_users: ["1000"]}\n',
     "p.yaml:1: governed.exempt_users.0: expected a login name, got '1000' (uid 1000 is cloudsdk on this host; no "
     "user is named '1000')"),
    ("weights:\n  groups:\n    100: 2\n",
     "p.yaml:3: weights.groups.100: expected a group name, got '100' (gid 100 is users on this host; no group is "
     "named '100')"),
])
def test_a_uid_or_gid_where_a_name_goes_is_an_error_naming_whose_it_is(text, expected):
    """The audit: exempt_users: [1000] warned "no user '1000' on this host (yet)" though uid 1000
    exists, and weights.users "1000": 7 left that user at weight 1: names are compared with login
    names, so an id never matches and does nothing. A warning was too weak: it is an error."""
    assert refused(text) == expected


def test_a_user_literally_named_by_digits_stays_valid_and_unknown_digits_stay_a_warning():
    policy, warnings = policy_from_text('weights:\n  users:\n    "2000": 3\n    "4242": 2\n'
                                        'governed:\n  exempt_users: ["2000"]\n', "p.yaml")
    assert policy.user_weights == {"2000": 3.0, "4242": 2.0} and policy.governed.exempt_users == ("2000",)
    assert warnings == ["p.yaml:3: weights.users.2000: '2000' is in governed.exempt_users: this weight never applies",
                        "p.yaml:4: weights.users.4242: no user '4242' on this host (yet)"]


# -- settings that can never take effect ------------------------------------------------------------------

def test_weights_that_can_never_apply_are_warnings_in_the_files_order():
    _, warnings = policy_from_text(
        "weights:\n  users:\n    root: 2\n    daemon: 2\n    nobody: 3\n    alice: 2\n    bob: 2\n    carol: 2\n"
        "    ldap-user: 2\n    cloudsdk: 2\n  groups:\n    admins: 2\n    users: 2\n"
        "governed:\n  max_uid: 60000\n  exempt_users: [alice]\n  exempt_groups: [admins]\n", "p.yaml")
    never = "this weight never applies"
    assert warnings == [
        f"p.yaml:3: weights.users.root: 'root' is uid 0, below governed.min_uid (1000), so never governed: {never}",
        f"p.yaml:4: weights.users.daemon: 'daemon' is uid 1, below governed.min_uid (1000), so never governed: {never}",
        f"p.yaml:5: weights.users.nobody: 'nobody' is uid 65534, above governed.max_uid (60000), so never governed: "
        f"{never}",
        f"p.yaml:6: weights.users.alice: 'alice' is in governed.exempt_users: {never}",
        f"p.yaml:7: weights.users.bob: 'bob' is in exempt group 'admins' (governed.exempt_groups): {never}",
        f"p.yaml:8: weights.users.carol: 'carol' is in exempt group 'admins' (governed.exempt_groups): {never}",
        f"p.yaml:9: weights.users.ldap-user: 'ldap-user' is uid 70000, above governed.max_uid (60000), so never "
        f"governed: {never}",
        "p.yaml:12: weights.groups.admins: 'admins' is in governed.exempt_groups: its members are never governed, so "
        "this weight never applies",
    ]


def test_nobody_is_never_governed_even_inside_the_range():
    _, warnings = policy_from_text("weights: {users: {nobody: 2, cloudsdk: 2}}\n", "p.yaml")
    assert warnings == ["p.yaml:1: weights.users.nobody: 'nobody' is uid 65534, the overflow uid (nobody), which is "
                        "never governed: this weight never applies"]


@pytest.mark.parametrize("overflow_uid", [65534, 1002])  # the kernel's; then bob's, to see who follows the rule
def test_the_policy_warns_of_exactly_the_uids_the_monitors_never_govern(monkeypatch, overflow_uid):
    """The audit's leftovers: the rule of uids never governed (below min_uid, above max_uid,
    nobody) had two copies, monitors.users.is_governed and the policy's warnings. Now one,
    monitors.model.uid_never_governed: moved (nobody's uid changed where the rule lives), both
    sides follow it — before, neither did — and they agree on every user of the host."""
    from monitors import model
    from monitors.users import is_governed

    monkeypatch.setattr(model, "OVERFLOW_UID", overflow_uid)
    for min_uid, max_uid in ((1000, 4294967294), (1001, 60000), (0, 1002), (1003, 70000)):
        text = (f"governed: {{min_uid: {min_uid}, max_uid: {max_uid}}}\n"
                "weights:\n  users:\n" + "".join(f"    {e.name!r}: 2\n" for e in USERS))
        _, warnings = policy_from_text(text, "p.yaml")
        warned = {w.split(": ")[1].removeprefix("weights.users.") for w in warnings if "never governed" in w}
        never = {e.name for e in USERS if not is_governed(e.id, e.name, min_uid, max_uid, exempt=())}
        assert warned == never, (min_uid, max_uid)
        if min_uid <= 1002 <= max_uid:  # bob's uid in the range: never governed only as the overflow uid
            assert ("bob" in never) is (overflow_uid == 1002)


def test_a_name_listed_twice_in_an_exempt_list_is_a_warning():
    policy, warnings = policy_from_text("governed:\n  exempt_users: [alice, bob, alice]\n"
                                        "  exempt_groups:\n    - staff\n    - staff\n", "p.yaml")
    assert policy.governed.exempt_users == ("alice", "bob", "alice")
    assert warnings == ["p.yaml:2: governed.exempt_users: 'alice' listed twice (items 0 and 2)",
                        "p.yaml:5: governed.exempt_groups: 'staff' listed twice (items 0 and 1)"]


@pytest.mark.parametrize("text, expected", [
    ("governed:\n  min_uid: 65534\n  max_uid: 65534\n",
     "p.yaml:3: governed.max_uid: expected a range with a uid other than 65534 (nobody, never governed), got 65534 … "
     "65534: no uid would be governed"),
    ("governed:\n  min_uid: 2000\n  max_uid: 1999\n",
     "p.yaml:3: governed.max_uid: expected a uid ≥ governed.min_uid (2000), got 1999: no uid would be governed"),
])
def test_a_uid_range_that_governs_no_one_is_refused_as_the_empty_one_is(text, expected):
    assert refused(text) == expected
    for fine in ("governed: {min_uid: 65533, max_uid: 65534}\n", "governed: {min_uid: 65534, max_uid: 65535}\n",
                 "governed: {min_uid: 65534}\n"):
        policy_from_text(fine)


def test_long_lists_are_matched_against_one_enumeration_and_digits_still_caught(monkeypatch):
    from governor.config import policy as policy_module

    monkeypatch.setattr(policy_module, "LOOKUPS", 3)
    listed = ", ".join(["alice", "bob", "carol", "cloudsdk", "root"] + [f"x{i}" for i in range(5)])
    _, warnings = policy_from_text(f"governed: {{exempt_users: [{listed}]}}\n", "p.yaml")
    assert [w.split(": ", 2)[2] for w in warnings] == [
        "no user 'x0' on this host (yet)", "no user 'x1' on this host (yet)", "no user 'x2' on this host (yet)",
        "2 more user names not looked up (at most 3 lookups a list): not in this host's user list"]
    numbers = ", ".join(['"1000"'] + [f"x{i}" for i in range(5)])
    with pytest.raises(InputError, match="uid 1000 is cloudsdk"):
        policy_from_text(f"governed: {{exempt_users: [{numbers}]}}\n", "p.yaml")
