"""Per-user network shaping: an HTB class per governed user on each shaped interface, egress
classified by the sending socket's owner and ingress (through an IFB device) by the
connection's mark, both set through nftables.

* :mod:`governor.shaping.classes` — pure: class ids per uid, rate and ceil per user;
* :mod:`governor.shaping.classbatch` — per-tick class changes and counters in one netlink round trip;
* :mod:`governor.shaping.htb` — the HTB tree on one interface (pyroute2 for the tree);
* :mod:`governor.shaping.ingress` — the redirect of arriving traffic to an IFB device;
* :mod:`governor.shaping.nft` — the ``inet drfgov`` table mapping uids to classes and marks;
* :mod:`governor.shaping.shaper` — all of it for the control loop (``net:IF:tx``/``net:IF:rx``);
* :mod:`governor.shaping.probe` — which kernel pieces this host has (for ``drfgov doctor``).
"""
