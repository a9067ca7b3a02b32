"""With load needing eight workers and a budget of five GPUs, GPUs held never exceed the budget.

A worker holds its GPUs from the moment the harness starts it (model loading included) until it
is stopped, as a pod does; the sum over prefill and decode workers is compared with
``max_gpu_budget`` at every change.
"""

from __future__ import annotations

import dataclasses

from conformance.suite import features
from conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from conformance.tests.planner_scaling import _assertions as planner_assertions
from conformance.tests.planner_scaling import _checks as planner_checks
from conformance.tests.planner_scaling import _scenarios as planner_scenarios

BUDGET = 5


async def check(ctx: TestContext) -> None:
    run = await planner_checks.run(
        ctx, planner_scenarios.OVER_BUDGET, tweak=lambda spec: dataclasses.replace(spec, max_gpu_budget=BUDGET)
    )
    planner_assertions.gpus_must_stay_within_budget(run)


TEST = ConformanceTest(
    short_name="PlannerScalingGpuBudgetNeverExceeded",
    description="Prefill and decode workers together never hold more GPUs than max_gpu_budget, even when load needs more.",
    features=(features.PLANNER_VIRTUAL_CONNECTOR, features.PLANNER_SCALING_BOUNDS),
    environments=frozenset({"process"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Runtime Pipeline",
        "GPU-budget invariants before returning any scaling effect.",
        note="The seed clamps final targets to the budget; the suite checks the GPUs actually held (a worker's from its "
        "start, model loading included, until stopped; prefill and decode summed) against max_gpu_budget.",
    ),
)
