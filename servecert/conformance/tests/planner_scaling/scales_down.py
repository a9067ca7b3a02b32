"""After load falls back, workers are removed within the stated bound, down to where they were.

The first removal of a component must come within two throughput intervals (the window of the
throughput floor must see the lower load) plus ``planner_scale_down_intervals`` load intervals;
each further one within ``planner_scale_down_intervals`` more, until the component is back at
the count it had before the load rose. Cases: ``both-loops`` (the planner as configured by
default) and ``load-only`` (``enable_throughput_scaling=False``): the load rule's own scale-down,
"ALL < SLA * sensitivity", with no floor to fall with the load. ``agg-both-loops`` and
``agg-load-only`` do the same in aggregated mode (``_scenarios.AGG_UP_AND_DOWN``: one aggregated
worker at the start, three engines' worth from t=10 to t=36 s): there a worker goes only when
both TTFT and ITL allow it (seed 003, Aggregated Mode), which must still happen once the load has
fallen, and the aggregated throughput floor must fall with it.
"""

from __future__ import annotations

import dataclasses

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios

CASES = {
    "both-loops": (planner_scenarios.UP_AND_DOWN, True),
    "load-only": (planner_scenarios.UP_AND_DOWN, False),
    "agg-both-loops": (planner_scenarios.AGG_UP_AND_DOWN, True),
    "agg-load-only": (planner_scenarios.AGG_UP_AND_DOWN, False),
}


async def check(ctx: TestContext) -> None:
    scenario, throughput = CASES[ctx.params["loops"]]
    run = await planner_checks.run(
        ctx, scenario, tweak=lambda spec: dataclasses.replace(spec, enable_throughput_scaling=throughput)
    )
    planner_assertions.workers_must_scale_down_after(run, planner_scenarios.FALL_AT, planner_scenarios.RISE_AT)


TEST = ConformanceTest(
    short_name="PlannerScalingScalesDownAfterLoadFalls",
    description="When load falls, the planner removes the extra workers within the stated number of intervals.",
    features=(features.PLANNER_STABILITY,),
    environments=planner_checks.ALGORITHM_JUDGED_IN,
    cases=tuple(Case(name, {"loops": name}) for name in CASES),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Scaling Decisions",
        "scale down if ALL < SLA * sensitivity",
        note="The seed gives the condition, no deadline; the bound (two throughput intervals for the floor's window to see "
        "the lower load, then planner_scale_down_intervals load intervals per worker) is the suite's.",
    ),
)
