"""drf-governor: per-user weighted Dominant Resource Fairness for shared Linux hosts.

Layers (see README): :mod:`governor.drf` (progressive filling, pure), :mod:`governor.discrete`
(Algorithm 1 scheduler, pure), :mod:`governor.problem` / :mod:`governor.allocate` (named
problems), :mod:`governor.cli` (the ``drfgov`` command).
"""

__version__ = "0.1.0"
