"""Under a x4 step and a ramp, no component gains or loses more than one worker per load interval.

Judged from the workers the harness started and stopped (ground truth), with a quarter interval
of tolerance for timer jitter: two changes of one component closer than that are a violation,
and so is one decision moving a component by two.
"""

from __future__ import annotations

from conformance.suite import features
from conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from conformance.tests.planner_scaling import _assertions as planner_assertions
from conformance.tests.planner_scaling import _checks as planner_checks
from conformance.tests.planner_scaling import _scenarios as planner_scenarios

SCENARIOS = {"step-x4": planner_scenarios.STEP_X4, "ramp": planner_scenarios.RAMP}


async def check(ctx: TestContext) -> None:
    run = await planner_checks.run(ctx, SCENARIOS[ctx.params["scenario"]])
    planner_assertions.changes_must_be_one_worker_per_interval(run)


TEST = ConformanceTest(
    short_name="PlannerScalingOneStepPerInterval",
    description="Each component changes by at most one worker per load interval, however far the load moves.",
    features=(features.PLANNER_VIRTUAL_CONNECTOR, features.PLANNER_LOAD_BASED_SCALING),
    environments=frozenset({"process"}),
    cases=tuple(Case(name, {"scenario": name}) for name in SCENARIOS),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Scaling Decisions",
        "Only scales by +/-1 per interval (non-blocking with pending-desired guard: metrics continue to be observed while "
        "scaling is in progress, but no new scaling action is issued until the previous one completes)",
        note="The seed states +/-1 for load-based scaling; the suite holds every change to it, including one toward a "
        "throughput lower bound far above the current count.",
    ),
)
