"""Under steady load between two worker counts' capacity, the planner settles instead of flapping.

The load is 2.5 engines' worth: two workers of a component are too few, three are enough. After
the settling allowance, the direction of scaling (up or down, from the workers the harness
started and stopped) may change at most ``planner_max_direction_changes`` times in any
``planner_flap_window_intervals`` load intervals.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios


async def check(ctx: TestContext) -> None:
    run = await planner_checks.run(ctx, planner_scenarios.STEADY)
    planner_assertions.scaling_must_not_flap(run, planner_scenarios.STEADY_SETTLED_AT, run.end_s)


TEST = ConformanceTest(
    short_name="PlannerScalingNoFlapping",
    description="Under steady load the scaling direction changes at most once in ten load intervals.",
    features=(features.PLANNER_STABILITY,),
    environments=planner_checks.ALGORITHM_JUDGED_IN,
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Why Two Scaling Loops?",
        "This avoids reacting to short-lived metric noise and gives scale-out enough time to complete before the predicted load arrives.",
        note="The seed says this of the throughput loop and gives load-based scale-down a sensitivity band (Scaling "
        "Decisions); at most planner_max_direction_changes per planner_flap_window_intervals under steady load is the suite's.",
    ),
)
