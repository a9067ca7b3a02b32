"""Given a perf model the suite wrote, the planner never holds fewer workers than the floor that model implies.

The suite hands the planner a pre-deployment profile (``PlannerSpec.profile``, seed 003's
"profile_results_dir" data: throughput per GPU against TTFT at ISL 256, against ITL at context
272) that is conservative: it says an engine serves 192 prefill tokens/s (0.75 requests/s) within
the TTFT SLA and 24 decode tokens/s (0.75 requests/s) within the ITL SLA, while the engines really
serve about 1.7. Under a steady 1.98 requests/s the throughput loop must then write a floor of
at least ceil(1.98 x 256 / 192) = 3 prefill and ceil(1.98 x 32 / 24) = 3 decode workers (seed 003
sizes replicas as predicted load over capacity at the SLA; a planner may add headroom, never
less), and the load loop, which alone would be content with two of each (each serving 0.99
requests/s), must not go below it. Judged from the moment a conformant planner can hold it to
the end (the first floor needs a full throughput window, and the next one writes it: 2 W; then
two added workers, 2 L + start-up each, and 3 L to settle: t=32 s at the defaults), from the
workers the harness runs.
"""

from __future__ import annotations

import dataclasses

from conformance.suite import features
from conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from conformance.tests.planner_scaling import _assertions as planner_assertions
from conformance.tests.planner_scaling import _checks as planner_checks
from conformance.tests.planner_scaling import _scenarios as planner_scenarios
from fixtures import planner_calibration as cal
from protocol.perf_profile import PerfProfile

PROFILE = PerfProfile(
    isl=cal.ISL,
    context=cal.ISL + cal.OSL // 2,
    prefill=((0.0, 400.0), (192.0, cal.TTFT_MS), (256.0, 3 * cal.TTFT_MS)),
    decode=((0.0, 20.0), (24.0, cal.ITL_MS), (32.0, 3 * cal.ITL_MS)),
)
BUDGET = 16  # room for a planner that plans with headroom over the profile's floor
FLOOR = 3  # ceil(1.98 x 256 / 192) and ceil(1.98 x 32 / 24): the workers one starts with (1) plus two


async def check(ctx: TestContext) -> None:
    run = await planner_checks.run(
        ctx, planner_scenarios.PROFILED, tweak=lambda spec: dataclasses.replace(spec, profile=PROFILE, max_gpu_budget=BUDGET)
    )
    settled = 2 * ctx.timeouts.planner_throughput_interval_s + run.step_allowance(FLOOR - 1)
    planner_assertions.workers_must_hold_the_profile_floor(run, PROFILE, settled)


TEST = ConformanceTest(
    short_name="PlannerScalingFloorFromPerfModel",
    description="With a pre-deployment profile the suite wrote, workers never fall below the floor it implies at the SLA.",
    features=(features.PLANNER_VIRTUAL_CONNECTOR, features.PLANNER_SCALING_BOUNDS),
    environments=frozenset({"process"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Step 4: Proposal and Lower Bound",
        "throughput-based scaling writes a lower bound; the faster load-based proposer can scale above that bound but "
        "will not scale below it.",
        note="Step 4 also: 'The throughput proposer converts predicted load and per-engine capacity into replica targets.' "
        "Step 3: the perf model is bootstrapped from 'profile_results_dir NPZ/JSON fallback data'; Performance "
        "Interpolation: 'Prefill interpolator: Maps (throughput_per_gpu, ISL) -> TTFT'. The floor the suite demands is "
        "ceil(offered requests/s x tokens per request / (profiled tokens/s per GPU at the SLA x GPUs)).",
    ),
)
