"""Under steady load, no component falls below min_endpoint or below what the load needs.

"What the load needs" is the suite's own floor: the workers the steady rate needs if engines were
1.5 times faster than the suite's calibration says (a conformant throughput loop predicts at
least that much), judged from the moment a conformant planner could have reached it
(``planner_checks.ScenarioRun.step_allowance``) to the end. min_endpoint holds throughout.
"""

from __future__ import annotations

from conformance.suite import features
from conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from conformance.tests.planner_scaling import _assertions as planner_assertions
from conformance.tests.planner_scaling import _checks as planner_checks
from conformance.tests.planner_scaling import _scenarios as planner_scenarios


async def check(ctx: TestContext) -> None:
    run = await planner_checks.run(ctx, planner_scenarios.STEADY)
    planner_assertions.workers_must_never_fall_below_min_endpoint(run)
    planner_assertions.workers_must_cover_sustained_load(run, planner_scenarios.STEADY_SETTLED_AT, run.end_s)


TEST = ConformanceTest(
    short_name="PlannerScalingNeverBelowFloor",
    description="Worker counts never fall below min_endpoint, nor below the floor that steady load needs.",
    features=(features.PLANNER_VIRTUAL_CONNECTOR, features.PLANNER_SCALING_BOUNDS),
    environments=frozenset({"process"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Step 4: Proposal and Lower Bound",
        "When both throughput and load scaling are enabled, throughput-based scaling writes a lower bound; "
        "the faster load-based proposer can scale above that bound but will not scale below it.",
        note="min_endpoint is checked too (Runtime Pipeline); the floor's size (the steady load's need with engines 1.5x "
        "faster than calibrated) is the suite's.",
    ),
)
