"""Per-user network shaping: an HTB class per governed user on each interface, egress
classified by the sending socket's owner through nftables.

* :mod:`governor.shaping.classes` — pure: class ids per uid, rate and ceil per user;
* :mod:`governor.shaping.htb` — the HTB tree through pyroute2;
* :mod:`governor.shaping.nft` — the ``inet drfgov`` table mapping uids to classes.

Ingress shaping (through an IFB device with the connection mark restored), network demand in
the DRF loop and the daemon's use of this layer are not built yet.
"""
