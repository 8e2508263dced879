"""Names and groups from one pass over the databases (monitors/accounts.py, issue 16): the same
answers as a lookup per user, read once for all the users who appear together."""

import grp
import pwd
from types import SimpleNamespace

import pytest

from governor.config.identity import groups_of
from monitors.accounts import SNAPSHOT_TTL_S, Accounts, AccountsSnapshot, load_local, local_databases


def test_a_snapshot_answers_as_this_hosts_own_lookups_for_every_account():
    snapshot = AccountsSnapshot.of(pwd.getpwall(), grp.getgrall())
    accounts = pwd.getpwall()
    assert len(accounts) > 5
    for entry in accounts:
        assert snapshot.names[entry.pw_uid] == pwd.getpwuid(entry.pw_uid).pw_name
        assert snapshot.groups_of(entry.pw_name) == groups_of(entry.pw_name), entry.pw_name
    assert snapshot.groups_of("no-such-user-xyz") == []


def pw(name, uid, gid):
    return SimpleNamespace(pw_name=name, pw_uid=uid, pw_gid=gid)


def gr(name, gid, members=()):
    return SimpleNamespace(gr_name=name, gr_gid=gid, gr_mem=list(members))


def test_first_entries_win_and_each_gid_counts_once():
    snapshot = AccountsSnapshot.of(
        [pw("alice", 1001, 100), pw("alias", 1001, 200), pw("bob", 1002, 999)],
        [gr("users", 100, ["alice"]), gr("hpc", 300, ["alice", "bob"]), gr("hpc-again", 300, ["alice"]),
         gr("users2", 100)])
    assert snapshot.names[1001] == "alice"
    # primary first, named by its first entry; hpc once (two entries of gid 300, the first named)
    assert snapshot.groups_of("alice") == ["users", "hpc"]
    # a primary gid with no group entry is left out, as getgrgid's KeyError was
    assert snapshot.groups_of("bob") == ["hpc"]


@pytest.mark.parametrize("text,local", [
    (None, True),
    ("passwd: files systemd\ngroup: files systemd\n", True),
    ("passwd:  files\ngroup: files [NOTFOUND=return] systemd  # comment\n", True),
    ("passwd: files sss\ngroup: files sss\n", False),
    ("passwd: files\ngroup: files ldap\n", False),
    ("passwd: compat\ngroup: files\n", False),
    ("hosts: files dns\n", True),  # neither line: glibc's default, files
    ("passwd:\ngroup: files\n", False),  # an empty line of sources: not what we can vouch for
])
def test_only_local_databases_are_read_whole(text, local):
    assert local_databases(text) is local


def test_a_snapshot_serves_the_users_who_appear_together_and_is_taken_again_later():
    now = [0.0]
    loads = []

    def load():
        loads.append(now[0])
        return AccountsSnapshot.of([pw("alice", 1001, 100)], [gr("users", 100)])
    accounts = Accounts(clock=lambda: now[0], load=load)
    for _ in range(1000):
        assert accounts.name_of(1001) == "alice" and accounts.known_groups("alice") == ["users"]
    assert loads == [0.0]
    now[0] = SNAPSHOT_TTL_S
    accounts.name_of(1001)
    assert loads == [0.0, SNAPSHOT_TTL_S]


def test_what_a_snapshot_lacks_is_looked_up():
    """Not local (load gives None), or a user the enumeration did not list (sss without
    enumerate): her name is looked up, and her groups are left to the caller's lookup."""
    for load in (lambda: None, lambda: AccountsSnapshot.of([], [])):
        accounts = Accounts(load=load)
        assert accounts.name_of(0) == "root" and accounts.known_groups("root") is None
        assert accounts.name_of(2**31 - 2) is None and accounts.known_groups("no-such-user-xyz") is None


def test_the_policy_weights_take_the_groups_read_and_look_up_the_rest():
    from governor.config.identity import PolicyWeights
    from governor.config.policy import Policy
    from monitors.model import GovernedUser

    asked = []
    weights = PolicyWeights(Policy(), lambda name: asked.append(name) or (["hpc"] if name == "alice" else None))
    weights(GovernedUser(1001, "alice", None))
    weights(GovernedUser(0, "root", None))
    assert asked == ["alice", "root"]


def test_this_host_is_read_whole():
    """The machines here list files and systemd: the snapshot path is the one tested above."""
    snapshot = load_local()
    assert snapshot is not None and snapshot.names[0] == "root"
