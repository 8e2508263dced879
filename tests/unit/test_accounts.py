"""Names and groups from one pass over the databases (monitors/accounts.py, issue 16): the same
answers as a lookup per user, read once for all the users who appear together."""

import grp
import os
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


def test_first_entries_win_and_repeats_are_kept_as_getgrouplist_keeps_them():
    snapshot = AccountsSnapshot.of(
        [pw("alice", 1001, 100), pw("alias", 1001, 200), pw("bob", 1002, 999)],
        [gr("users", 100, ["alice"]), gr("hpc", 300, ["alice", "bob"]), gr("hpc-again", 300, ["alice"]),
         gr("users2", 100)])
    assert snapshot.names[1001] == "alice"
    # primary first, named by its first entry; both entries of gid 300 listing her, each named
    # by gid 300's first entry (glibc's files backend keeps the repeat); users2 is her primary gid
    assert snapshot.groups_of("alice") == ["users", "hpc", "hpc"]
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
    ("passwd: files\ngroup: files\ninitgroups: files ldap\n", False),  # getgrouplist follows initgroups
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


CRAFTED_PASSWD = """\
root:x:0:0:root:/root:/bin/bash
alice:x:4001:4100::/home/alice:/bin/sh
alias:x:4001:4101::/home/alias:/bin/sh
bob:x:4002:4999::/home/bob:/bin/sh
carol:x:4003:4100::/home/carol:/bin/sh
"""
CRAFTED_GROUP = """\
root:x:0:
staff:x:4100:alice
hpc:x:4300:alice,bob
hpc-again:x:4300:alice
staff-alias:x:4100:carol
gpu:x:4400:bob,alice
empty:x:4500:
"""

COMPARE = """
import grp, json, os, pwd, sys
sys.path.insert(0, sys.argv[1])
from governor.config.identity import groups_of
from monitors.accounts import AccountsSnapshot
snapshot = AccountsSnapshot.of(pwd.getpwall(), grp.getgrall())
print(json.dumps({e.pw_name: [snapshot.names[e.pw_uid], pwd.getpwuid(e.pw_uid).pw_name,
                              snapshot.groups_of(e.pw_name), groups_of(e.pw_name)] for e in pwd.getpwall()}))
"""


def test_a_snapshot_answers_as_glibc_on_a_crafted_database(tmp_path):
    """Repeated gids, a gid with two names, a second name for a uid, a primary gid without a
    group entry, a member of her own primary group: in a private mount namespace the crafted
    files stand in for /etc/passwd and /etc/group, and the snapshot must give what pwd and
    getgrouplist give there (as root: unshare -m and bind mounts, as tier 1 runs)."""
    import json
    import subprocess
    import sys

    from tests.cli.conftest import REPO

    assert os.geteuid() == 0, "tier 1 runs as root (unshare -m, bind mounts)"
    (tmp_path / "passwd").write_text(CRAFTED_PASSWD)
    (tmp_path / "group").write_text(CRAFTED_GROUP)
    out = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$1" /etc/passwd && mount --bind "$2" /etc/group '
                          '&& exec "$3" -c "$4" "$5"', "sh", str(tmp_path / "passwd"), str(tmp_path / "group"),
                          sys.executable, COMPARE, str(REPO)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert set(found) == {"root", "alice", "alias", "bob", "carol"}
    for name, (snap_name, looked_up_name, snap_groups, looked_up_groups) in found.items():
        assert snap_name == looked_up_name and snap_groups == looked_up_groups, (name, found[name])
    assert found["alice"][3] == ["staff", "hpc", "hpc", "gpu"]  # the case is the one crafted
