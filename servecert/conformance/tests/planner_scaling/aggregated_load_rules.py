"""Aggregated mode: one worker set, scaled up on TTFT or on ITL, and down only when both allow it.

Seed 003, Aggregated Mode: engines "handle both prefill and decode via chunked prefill"; "Scale
up if either prefill or decode signals overload; scale down only if both signal underload". The
load rules are judged alone (``enable_throughput_scaling=False``, so no floor masks them), with the
planner in ``mode="agg"`` and the deployment's workers all aggregated: the decisions scale them
through ``num_decode_workers`` (Dynamo scales agg workers as its decode component) and never ask
for a prefill worker (the harness refuses one: the deployment has no prefill component).

Each case overloads one signal and puts the other's SLA out of reach (``_scenarios.AGG_*``:
measured with ``servecert bench planner-calibrate --agg 1``), two aggregated workers at the start:
- ``agg-ttft-bound``: ISL 256 / OSL 32 at 2.25 requests/s (an engine serves 0.9 and misses at 1.0),
  TTFT 1000 ms and ITL 2000 ms. Only TTFT can call for a
  third worker: a planner that counts agg workers as decode (ITL alone, as this suite's reference
  did before aggregated mode) never adds one.
- ``agg-itl-bound``: ISL 32 / OSL 128 at 2.7 requests/s (serves 0.9, misses at 1.1), TTFT 3000 ms
  and ITL 100 ms. Only ITL can; a planner that
  prices aggregated engines on TTFT alone never adds one.
In ``agg-ttft-bound`` ITL is far below its target the whole time, so a planner that removes a
worker when *either* signal allows it drops below the three the load needs once it has them. (In
``agg-itl-bound`` TTFT does not allow it: two engines would be busier than the estimate's 85%
saturation guard, so that case cannot tell "either" from "both".)

Judged from the harness's engines and the suite's client: from t=40 s (the backlog of the first
seconds drained) >= 95% of requests meet both SLAs; from t=24 s (``_scenarios.AGG_SETTLED_AT``:
two engines overloaded, five averaged rows for the 2-D model, one worker started; on a cluster
plus what a pod's start-up took beyond the model load, ``ScenarioRun.engine_startup_s``) the set holds
at least the three that serve the load; once a conformant planner could have added the one
worker (2 L + start-up, then 3 L) it holds at most three plus one step.

When the two engines were over the SLA later than that calibration assumes, by ground truth
(``ScenarioRun.overload_seen_at``: every engine's time from one decoding pass to the next, from its
``/events/fpm``, or the median TTFT the suite's client saw, over one load interval), the set is
judged from that moment plus one worker's allowance (2 L + start-up), and never later than t=40 s.
In ``agg-itl-bound`` the decode KV builds for a sequence's whole life (~13 s), so the ITL crosses
its SLA slowly and at a moment that moves from run to run: t=16 in the process environment,
17.5-18.0 in three runs on the embedded cluster, where the reference then decided at t=18.1-19.6.
The fixed t=24 failed the reference there 1 run in 3 (the worker decided at t=21.0, Ready 4.6 s
later). A planner that never adds the worker still fails: the engines stay over the SLA.
"""

from __future__ import annotations

import dataclasses

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios

SCENARIOS = {s.name: s for s in (planner_scenarios.AGG_TTFT_BOUND, planner_scenarios.AGG_ITL_BOUND)}
START = 2  # aggregated workers at t=0; the load needs three


async def check(ctx: TestContext) -> None:
    scenario = SCENARIOS[ctx.params["scenario"]]
    run = await planner_checks.run(
        ctx, scenario, decode=START, tweak=lambda spec: dataclasses.replace(spec, enable_throughput_scaling=False),
        record_passes=True,
    )
    grown = run.step_allowance(run.scenario.needed_at(0.0) - START)
    # NB: AGG_SETTLED_AT counts one worker's start-up as the model load (3 s); on the cluster a pod takes longer to be
    # Ready (scheduling, the pod runner, the probe), and the reference's third worker was Ready after t=24 in 2 of 3 runs.
    settled = planner_scenarios.AGG_SETTLED_AT + run.startup_beyond_model_load_s
    seen = run.overload_seen_at()
    if seen is not None:  # the engines were over the SLA later than the calibration assumed: one worker's time from then
        settled = min(max(settled, seen + run.worker_allowance), planner_scenarios.LOAD_RULES_SETTLED_AT)
    ctx.log.info(f"first engines all over an SLA from t={seen} s (ground truth); the worker set judged from t={settled:.1f} s")
    planner_assertions.workers_must_cover_sustained_load(run, settled, run.end_s)
    planner_assertions.requests_must_meet_sla(
        run, planner_scenarios.LOAD_RULES_SETTLED_AT, what=f"{scenario.name} (aggregated, load rules alone)"
    )
    planner_assertions.workers_must_not_over_provision(run, "decode", grown)


TEST = ConformanceTest(
    short_name="PlannerScalingAggregatedLoadRules",
    description="In aggregated mode the one worker set scales up on TTFT or on ITL, and down only when both allow it.",
    features=(features.PLANNER_LOAD_BASED_SCALING,),
    environments=planner_checks.ALGORITHM_JUDGED_IN,
    cases=tuple(Case(name, {"scenario": name}) for name in SCENARIOS),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Aggregated Mode",
        "Scale up if either prefill or decode signals overload; scale down only if both signal underload.",
        note="Scaling Decisions: 'Agg: Scale up if (ALL TTFT > SLA) OR (ALL ITL > SLA); scale down if (ALL TTFT < SLA * "
        "sensitivity) AND (ALL ITL < SLA * sensitivity)'. The bounds on the worker count (at least what serves the load, "
        "at most one step more) come from the suite's calibration of its own aggregated engines.",
    ),
)
