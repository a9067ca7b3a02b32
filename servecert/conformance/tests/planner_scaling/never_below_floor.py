"""Under steady load, no component falls below min_endpoint or below what the load needs.

Cases:
- ``steady``: 2.5 engines' worth, min_endpoint 1. "What the load needs" is the suite's own floor:
  the workers the steady rate needs if engines were 1.5 times faster than the suite's calibration
  says (a conformant throughput loop predicts at least that much), judged from the moment a
  conformant planner could have reached it (``_checks.ScenarioRun.step_allowance``) to the end.
- ``min-endpoint-2``, ``min-endpoint-3``: 0.4 engines' worth, started at min_endpoint workers of each
  component. One worker of each would serve this load, and both loops propose one; only
  min_endpoint keeps the count up, so a planner that ignores it, or holds min_endpoint - 1, drops.

min_endpoint holds throughout, in every case.
"""

from __future__ import annotations

import dataclasses

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios

MIN_ENDPOINT = {"steady": 1, "min-endpoint-2": 2, "min-endpoint-3": 3}


async def check(ctx: TestContext) -> None:
    case = ctx.params["case"]
    floor = MIN_ENDPOINT[case]
    scenario = planner_scenarios.STEADY if case == "steady" else planner_scenarios.LOW
    run = await planner_checks.run(
        ctx, scenario, prefill=floor, decode=floor, tweak=lambda spec: dataclasses.replace(spec, min_endpoint=floor)
    )
    planner_assertions.workers_must_never_fall_below_min_endpoint(run)
    if case == "steady":
        planner_assertions.workers_must_cover_sustained_load(run, planner_scenarios.STEADY_SETTLED_AT, run.end_s)


TEST = ConformanceTest(
    short_name="PlannerScalingNeverBelowFloor",
    description="Worker counts never fall below min_endpoint (1, 2 and 3), nor below the floor that steady load needs.",
    features=(features.PLANNER_SCALING_BOUNDS,),
    environments=planner_checks.ALGORITHM_JUDGED_IN,
    cases=tuple(Case(name, {"case": name}) for name in MIN_ENDPOINT),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Step 4: Proposal and Lower Bound",
        "When both throughput and load scaling are enabled, throughput-based scaling writes a lower bound; "
        "the faster load-based proposer can scale above that bound but will not scale below it.",
        note="min_endpoint: Runtime Pipeline, 'the engine adapter applies the local planner's final min_endpoint and "
        "GPU-budget invariants before returning any scaling effect'. The floor's size under steady load (the load's need "
        "with engines 1.5x faster than calibrated) is the suite's.",
    ),
)
