"""The fairness math (pure: no I/O, no clock, no logging).

* :mod:`governor.fairness.drf` — weighted DRF by exact progressive filling (paper §4, §4.3);
* :mod:`governor.fairness.discrete` — the paper's Algorithm 1, one task at a time;
* :mod:`governor.fairness.alternatives` — asset fairness, CEEI, slots and CPU-only fairness
  behind the same interface (paper §5);
* :mod:`governor.fairness.properties` — checks of sharing incentive, strategy-proofness,
  envy-freeness and Pareto efficiency (paper §4.1).
"""
