"""``drfgov compare``: every policy's allocation of one problem, and which of the paper's
properties (§3) each satisfies there (:mod:`governor.fairness.properties`).

Pure: a :class:`~governor.offline.problem.Problem` in, a :class:`Comparison` out.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from governor.offline.allocate import Result, named_result, policy_cpu_index, solve_fill
from governor.fairness.alternatives import DEFAULT_SLOTS, ALLOCATORS, AllocatorError, allocate_with
from governor.offline.problem import Problem
from governor.fairness.properties import PropertyCheck, check_all

__all__ = ["MAX_COMPARE_RESOURCES", "MAX_COMPARE_USERS", "Comparison", "PolicyOutcome", "compare"]

#: Users a comparison takes: it checks envy between every pair and runs each policy once per
#: misreport tried (:data:`governor.fairness.properties.MISREPORT_BUDGET`), which keeps it to
#: seconds; ``drfgov allocate`` takes up to :data:`governor.offline.problem.MAX_USERS`.
MAX_COMPARE_USERS = 200
MAX_COMPARE_RESOURCES = 32  # each user's lies are one per resource and factor


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
                           "properties": {p.name: {"holds": p.holds, "witness": p.witness,
                                                   **({"searched": {"tried": p.searched[0], "possible": p.searched[1]}}
                                                      if p.searched else {})}
                                          for p in o.properties}}
                for o in self.outcomes}


def compare(problem: Problem, slots: int = DEFAULT_SLOTS, policies: tuple[str, ...] = ALLOCATORS) -> Comparison:
    """Run each policy and check its properties. cpu-fair is left out when no resource is
    named ``cpu``.

    Raises:
        AllocatorError: more than :data:`MAX_COMPARE_USERS` users or :data:`MAX_COMPARE_RESOURCES`
            resources.
    """
    if len(problem.users) > MAX_COMPARE_USERS:
        raise AllocatorError(f"users: compare takes at most {MAX_COMPARE_USERS} users, got {len(problem.users):,} (it "
                             "checks envy between every pair and reruns each policy per misreport it tries); "
                             "drfgov allocate --policy takes larger problems")
    if len(problem.resources) > MAX_COMPARE_RESOURCES:
        raise AllocatorError(f"capacity: compare takes at most {MAX_COMPARE_RESOURCES} resources, got "
                             f"{len(problem.resources):,} (it tries a misreport per resource for each user); "
                             "drfgov allocate --policy takes larger problems")
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
