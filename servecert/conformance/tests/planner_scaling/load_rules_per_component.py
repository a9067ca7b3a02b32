"""With the throughput loop off, each component scales on its own signal: decode on ITL, prefill on TTFT.

Seed 003's load rules, judged alone (``enable_throughput_scaling=False``, so no floor masks them).
The busy component starts at two workers, the idle one at one:
- ``decode-bound``: short prompts, long outputs (ISL 64, OSL 128) at 2.8 decode engines' worth
  (0.85 requests/s each, measured): two engines are a quarter over what they serve, so decode's ITL
  passes the SLA on both within seconds and stays there until a third serves; prefill stays far
  under its TTFT.
- ``prefill-bound``: longer prompts, few outputs (ISL 192, OSL 8) at 2.8 prefill engines' worth
  (1.9 requests/s each): two engines take 2.66 requests/s each, a third over the 2.0 they serve, so
  even the median TTFT is far over the SLA; decode stays far under its ITL. At 2.5 the median stayed
  under the SLA, and a planner whose estimate was accurate held two engines by the seed's own rule.

For the busy component: from t=40 s (``_scenarios.LOAD_RULES_SETTLED_AT``: the backlog of the
first seconds has drained) the SLA holds; and once a conformant planner could have added the one
worker the load needs (2 L + start-up, then 3 L to settle: t=13 s at the defaults) it holds no
more than the smallest count that serves the load plus one step (no over-provisioning: with ALL
engines' estimates required above the SLA, a new, empty engine stops the climb). A planner that
adds on ANY engine over the SLA climbs while the old engines drain their long sequences: 5 decode
workers for 12 s from t=24-26 s, in six runs quiet and under ``stress --cpu 2``. The
idle component never grows past its one worker: a planner that scales both components on one
signal, or judges decode on TTFT, grows it.
All from the harness's engines and the suite's client, never from the planner's account.
"""

from __future__ import annotations

import dataclasses

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios

SCENARIOS = {s.name: s for s in (planner_scenarios.DECODE_BOUND, planner_scenarios.PREFILL_BOUND)}
BUSY = {"decode-bound": "decode", "prefill-bound": "prefill"}


async def check(ctx: TestContext) -> None:
    name = ctx.params["scenario"]
    busy = BUSY[name]
    idle = "prefill" if busy == "decode" else "decode"
    start = {busy: 2, idle: 1}
    run = await planner_checks.run(
        ctx,
        SCENARIOS[name],
        prefill=start["prefill"],
        decode=start["decode"],
        tweak=lambda spec: dataclasses.replace(spec, enable_throughput_scaling=False),
    )
    planner_assertions.workers_must_stay_at_min_endpoint(run, idle)
    settled = planner_scenarios.LOAD_RULES_SETTLED_AT
    planner_assertions.requests_must_meet_sla(run, settled, what=f"{name} ({busy} on its own load rule)")
    grown = run.step_allowance(run.scenario.needed_at(0.0) - start[busy])
    planner_assertions.workers_must_not_over_provision(run, busy, grown)


TEST = ConformanceTest(
    short_name="PlannerScalingLoadRulesPerComponent",
    description="With throughput scaling off, decode scales on ITL and prefill on TTFT, each to what its load needs and no further.",
    features=(features.PLANNER_LOAD_BASED_SCALING,),
    environments=planner_checks.ALGORITHM_JUDGED_IN,
    cases=tuple(Case(name, {"scenario": name}) for name in SCENARIOS),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Scaling Decisions",
        "Prefill/Decode: Scale up if ALL engines’ estimated TTFT/ITL > SLA; scale down if ALL < SLA * sensitivity",  # noqa: RUF001 (the seed's apostrophe)
        note="Regression Models: prefill estimates TTFT, decode estimates ITL. The bound on over-provisioning (the "
        "smallest count that serves the load, from the suite's calibration of its own engines, plus one step) is the "
        "suite's reading of 'scale down if ALL < SLA * sensitivity'.",
    ),
)
