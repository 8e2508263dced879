"""``drfgov simulate``: DRF and its alternatives placing jobs of tasks on a cluster over time.

* :mod:`governor.simulation.trace` — the trace format (JSON lines or CSV) and its loader;
* :mod:`governor.simulation.policies` — how each policy orders users and fits tasks;
* :mod:`governor.simulation.engine` — the discrete-event simulation;
* :mod:`governor.simulation.plot` — dominant shares and utilization over time (matplotlib).
"""
