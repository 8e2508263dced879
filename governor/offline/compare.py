"""``drfgov compare``: every policy's allocation of one problem, and which of the paper's
properties (§3) each satisfies there (:mod:`governor.fairness.properties`).

Pure: a :class:`~governor.offline.problem.Problem` in, a :class:`Comparison` out.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from governor.offline.allocate import Result, named_result, policy_cpu_index, solve_fill
from governor.fairness.alternatives import DEFAULT_SLOTS, ALLOCATORS, allocate_with
from governor.offline.problem import Problem
from governor.fairness.properties import PropertyCheck, check_all

__all__ = ["Comparison", "PolicyOutcome", "compare"]


@dataclass(frozen=True)
class PolicyOutcome:
    policy: str
    result: Result
    properties: list[PropertyCheck]


@dataclass(frozen=True)
class Comparison:
    outcomes: list[PolicyOutcome]

    def to_json(self) -> dict:
        return {o.policy: {**o.result.to_json(),
                           "properties": {p.name: {"holds": p.holds, "witness": p.witness} for p in o.properties}}
                for o in self.outcomes}


def compare(problem: Problem, slots: int = DEFAULT_SLOTS, policies: tuple[str, ...] = ALLOCATORS) -> Comparison:
    """Run each policy and check its properties. cpu-fair is left out when no resource is
    named ``cpu``."""
    C, D, W, M, H = problem.arrays()
    names = [u.name for u in problem.users]
    cpu = policy_cpu_index(problem)
    outcomes = []
    for policy in policies:
        if policy == "cpu-fair" and cpu is None:
            continue
        fill = solve_fill(problem, policy=policy, slots=slots)
        run = partial(allocate_with, policy, slots=slots, cpu=cpu)
        outcomes.append(PolicyOutcome(policy, named_result(problem.resources, names, fill),
                                      check_all(run, C, D, W, M, fill, names, H)))
    return Comparison(outcomes)
