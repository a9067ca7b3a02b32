"""Under a x4 step, a ramp and a fall, no component gains or loses more than one worker per load interval.

The rising cases start from one worker of each component; in ``fall`` the deployment starts at
six of each under 3.2 engines' worth of load (budget 16 GPUs), which falls to 0.48 at t=8 s: one
worker would do, the first throughput floor (at 2 W) is one or two while four or five still run,
and a planner that goes straight to it (or whose load rule proposes the count it needs rather than one less) removes
several at once. ``fall-load-only`` is the same fall with ``enable_throughput_scaling=False``:
the load rule's own steps down, with no floor; ``step-x4-load-only`` the step with no floor, so every rise is
the load rule's. Judged from the workers the harness started and stopped (ground truth), with a
quarter interval of tolerance for timer jitter: two changes of one component closer than that
are a violation, and so is one decision moving a component by two, except, with the throughput
loop on, a rise to the throughput lower bound: seed 003 gives the load-based rule its +/-1 and the
floor none ("load-based scaling ... handles real-time adjustments above that floor"), and Dynamo
1.6.1, whose planner the seed describes, raises a load rule's +1 to its floor in one decision. The
rise may reach what the offered load needs plus one (``_assertions.rise_bound``, the suite's bound).
"""

from __future__ import annotations

import dataclasses

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios

SCENARIOS = {
    "step-x4": planner_scenarios.STEP_X4,
    "step-x4-load-only": planner_scenarios.STEP_X4,
    "ramp": planner_scenarios.RAMP,
    "fall": planner_scenarios.FALL,
    "fall-load-only": planner_scenarios.FALL,
}


async def check(ctx: TestContext) -> None:
    name = ctx.params["scenario"]
    falls = SCENARIOS[name] is planner_scenarios.FALL
    start = planner_scenarios.FALL_FROM if falls else 1
    throughput = not name.endswith("load-only")
    run = await planner_checks.run(
        ctx, SCENARIOS[name], prefill=start, decode=start,
        tweak=lambda spec: dataclasses.replace(
            spec, enable_throughput_scaling=throughput, max_gpu_budget=max(spec.max_gpu_budget, planner_scenarios.FALL_BUDGET)
        ),
    )
    planner_assertions.changes_must_be_one_worker_per_interval(run, floor_may_raise=throughput)
    if falls:
        planner_assertions.workers_must_have_moved(run, direction=-1)


TEST = ConformanceTest(
    short_name="PlannerScalingOneStepPerInterval",
    description="Each component changes by at most one worker per load interval, however far the load rises or falls.",
    features=(features.PLANNER_LOAD_BASED_SCALING,),
    environments=planner_checks.ALGORITHM_JUDGED_IN,
    cases=tuple(Case(name, {"scenario": name}) for name in SCENARIOS),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Scaling Decisions",
        "Only scales by +/-1 per interval (non-blocking with pending-desired guard: metrics continue to be observed while "
        "scaling is in progress, but no new scaling action is issued until the previous one completes)",
        note="The seed states +/-1 for load-based scaling. With the throughput loop on, a rise of several workers to the "
        "throughput lower bound is allowed up to what the offered load needs plus one (the suite's bound; Co-existence with "
        "Throughput-Based Scaling: the floor is not stepped); removals are always one at a time.",
    ),
)
