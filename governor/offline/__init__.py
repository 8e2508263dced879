"""What-if tools that never touch the host.

* :mod:`governor.offline.problem` — problem files (capacities, demands, weights);
* :mod:`governor.offline.allocate` — ``drfgov allocate``; :mod:`governor.offline.compare` — ``drfgov compare``;
* :mod:`governor.offline.simulation` — ``drfgov simulate``, a discrete-event cluster simulation.
"""
