"""With load needing eight workers, GPUs held never exceed the budget, counted in GPUs, not workers.

Prefill engines take 2 GPUs and decode engines 4, so the budget of 14 GPUs binds on the way up
(one worker of each holds 6; the load needs four of each, 24) while 14 workers would not: a
planner that counts its budget in workers, or gives every engine one GPU, holds more than 14
GPUs here. A worker holds its GPUs from the moment the harness starts it (model loading
included) until it is stopped, as a pod does; the sum over prefill and decode workers is
compared with ``max_gpu_budget`` at every change.
"""

from __future__ import annotations

import dataclasses

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios

BUDGET = 14
PREFILL_GPUS, DECODE_GPUS = 2, 4


async def check(ctx: TestContext) -> None:
    run = await planner_checks.run(
        ctx,
        planner_scenarios.OVER_BUDGET,
        tweak=lambda spec: dataclasses.replace(
            spec, max_gpu_budget=BUDGET, prefill_engine_num_gpu=PREFILL_GPUS, decode_engine_num_gpu=DECODE_GPUS
        ),
    )
    planner_assertions.gpus_must_stay_within_budget(run)


TEST = ConformanceTest(
    short_name="PlannerScalingGpuBudgetNeverExceeded",
    description="Prefill (2 GPUs each) and decode (4 GPUs each) workers together never hold more GPUs than max_gpu_budget.",
    features=(features.PLANNER_SCALING_BOUNDS,),
    environments=frozenset({"process", "cluster"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Runtime Pipeline",
        "GPU-budget invariants before returning any scaling effect.",
        note="Builtin Shared State: 'component GPU counts and runtime capabilities used to clamp final targets to "
        "min_endpoint and GPU budgets'. The suite checks the GPUs actually held (a worker's from its start, model loading "
        "included, until stopped; prefill and decode summed) against max_gpu_budget.",
    ),
)
