"""drf-governor: per-user weighted Dominant Resource Fairness for shared Linux hosts.

The folders are the layers; imports point down this list only (``tests/unit/test_layers.py``
checks it):

* :mod:`governor.cli` — the ``drfgov`` command (typer), thin;
* :mod:`governor.service` — ``drfgov run`` as a daemon: host setup, state, history, snapshot,
  notify, doctor, calibrate;
* :mod:`governor.offline` — what-if tools: problem files, allocate, compare, simulate;
* :mod:`governor.config` — the policy file: YAML → validated frozen dataclasses;
* :mod:`governor.enforce`, :mod:`governor.shaping` — adapters that write the kernel (cgroup
  limits through systemd or cgroupfs; tc and nftables), each with a pure ``model`` module;
* :mod:`governor.control` — pure: model types, demand estimation, limit planning, the tick;
* :mod:`governor.fairness` — pure: DRF, Algorithm 1, its alternatives, the paper's properties.

Beside them: :mod:`cgroups` (the cgroup v2 file layer) and :mod:`monitors` (measurement).
"""

__version__ = "0.1.0"
