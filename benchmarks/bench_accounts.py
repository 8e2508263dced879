"""Naming and grouping every user at first sight (the daemon's first tick) with local accounts.

    python benchmarks/bench_accounts.py [--accounts 1000,10000]     # as root

For each count, /etc/passwd and /etc/group gain that many accounts (each with a group of her
own and in one shared group) in a private mount namespace (``unshare -m``, bind mounts: the
host's files are untouched); then every account is named and grouped as the daemon does —
one lookup per user (``pwd.getpwuid``, ``getgrouplist``: glibc's files backend scans the
files each time) and through :class:`monitors.accounts.Accounts` (one pass over each). Prints
the CPU seconds of each way.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIRST_UID = 200_000

MEASURE = """
import sys, time
sys.path.insert(0, __REPO__)
from governor.config.identity import PolicyWeights, groups_of
from governor.config.policy import Policy
from monitors.accounts import Accounts
from monitors.model import GovernedUser

uids = range(__FIRST__, __FIRST__ + __N__)
t = time.process_time()
import pwd
names = [pwd.getpwuid(uid).pw_name for uid in uids]
weights = PolicyWeights(Policy())
for uid, name in zip(uids, names):
    weights(GovernedUser(uid, name, None))
per_user = time.process_time() - t
t = time.process_time()
accounts = Accounts()
names = [accounts.name_of(uid) for uid in uids]
weights = PolicyWeights(Policy(), accounts.known_groups)
for uid, name in zip(uids, names):
    weights(GovernedUser(uid, name, None))
one_pass = time.process_time() - t
print(f"{__N__:,} local accounts named and grouped: one lookup per user {per_user:.3f} s, "
      f"one pass (monitors.accounts) {one_pass:.4f} s CPU")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", default="1000,10000")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench_accounts: run as root (it bind-mounts copies over /etc/passwd and /etc/group)")
    for n in (int(x) for x in args.accounts.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            passwd, group = Path(tmp) / "passwd", Path(tmp) / "group"
            uids = range(FIRST_UID, FIRST_UID + n)
            passwd.write_text(Path("/etc/passwd").read_text()
                              + "".join(f"b{u}:x:{u}:{u}::/nonexistent:/usr/sbin/nologin\n" for u in uids))
            group.write_text(Path("/etc/group").read_text() + "".join(f"b{u}:x:{u}:\n" for u in uids)
                             + f"benchall:x:{FIRST_UID - 1}:" + ",".join(f"b{u}" for u in uids) + "\n")
            code = MEASURE.replace("__REPO__", repr(str(REPO))).replace("__FIRST__", str(FIRST_UID)).replace("__N__", str(n))
            subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$1" /etc/passwd && mount --bind "$2" /etc/group '
                            '&& exec "$3" -c "$4"', "sh", str(passwd), str(group), sys.executable, code], check=True)


if __name__ == "__main__":
    main()
