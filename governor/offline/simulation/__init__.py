"""``drfgov simulate``: DRF and its alternatives placing jobs of tasks on a cluster over time.

* :mod:`governor.offline.simulation.trace` — the trace format (JSON lines or CSV) and its loader;
* :mod:`governor.offline.simulation.schedulers` — how each policy orders users and fits tasks;
* :mod:`governor.offline.simulation.engine` — the discrete-event simulation;
* :mod:`governor.offline.simulation.plot` — dominant shares and utilization over time (matplotlib).
"""
