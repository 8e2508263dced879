"""Weighted DRF on the real kernel, end to end (issue 14): each scenario of
:mod:`tests.scenarios.catalog` measures every workload alone, runs the users together under
the installed ``drfgov run`` and compares what each got with her expected DRF allocation,
her reaction in ticks, and the kernel's OOM evidence. A scenario fails on any of them."""

import pytest

from tests.scenarios.catalog import SCENARIOS
from tests.scenarios.report import table
from tests.scenarios.runner import run_scenario
from tests.scenarios.watchdog import Watchdog


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_scenario(scenario, rig, workload_log, results, stocks):
    with Watchdog(scenario.name, rig) as watchdog:
        try:
            result = run_scenario(scenario, rig, workload_log, stocks)
        except Exception:
            if watchdog.fired:
                pytest.fail(f"{scenario.name}: the watchdog fired after {watchdog.budget_s:g} s (its dump is in the "
                            "log above), and the scenario then raised", pytrace=True)
            raise
    if watchdog.fired:
        result.failures.insert(0, f"the watchdog fired after {watchdog.budget_s:g} s (its dump is in the log above)")
    results.append(result)
    print("\n" + table(result), flush=True)
    if result.failures:
        pytest.fail(f"{scenario.name}:\n" + "\n".join(result.failures), pytrace=False)
