"""Given a perf model the suite wrote, the planner never holds fewer workers than the floor that model implies.

The suite hands the planner a pre-deployment profile (``PlannerSpec.profile``, seed 003's
"profile_results_dir" data: throughput per GPU against TTFT at ISL 256, against ITL at context
272), so the suite can compute the floor itself: ceil(offered requests/s x tokens per request /
profiled tokens/s per GPU at the SLA) workers (seed 003 sizes replicas as predicted load over
capacity; a planner may add headroom, never less). The offered rate at t is the lowest mean rate of
any throughput window ending in the last two windows (``workers_must_hold_the_profile_floor``).
From the workers the harness runs. Two cases:

- ``steady``: a conservative profile (an engine serves 192 prefill tokens/s, 0.75 requests/s,
  within the TTFT SLA, and 24 decode tokens/s within the ITL SLA; the engines really serve about
  1.7) under a steady 1.98 requests/s: the floor is ceil(1.98 x 256 / 192) = 3 prefill and
  ceil(1.98 x 32 / 24) = 3 decode workers, while the load loop alone would be content with two
  of each. Judged from 2 W + two added workers (2 L + start-up each) + 3 L: t=32 s at the defaults.
- ``short-dip``: seed 003's "short idle periods". 1.7 requests/s with no request at all for 20 s
  from t=136 s, a throughput window W of 60 s (not the default 6), a load interval of 1 s (not 2:
  a load loop that sheds does so within the dip) and a flat profile of 1.0 requests/s per engine
  (latency flat up to 256 prefill and 32 decode tokens/s, then steep, so capacity at the SLA and at
  SLA x sensitivity agree). Every 60 s window averages at least 1.13 requests/s, so the floor is 2
  of each throughout the dip; with the load loop alone, idle engines go down to one. Judged from
  2 W + one added worker + 3 L (t=133 s) to the end (t=170 s). The dip is long enough for a planner
  whose floor follows it to shed its 4-7 workers one at a time under load (10 s was not, once).
- ``prefix-reuse``: seed 003's KV hit rate, "input features for capacity estimation", with last-
  value semantics. ``PROFILED``'s 1.98 requests/s for 90 s, but each prompt is 8 blocks of 64
  tokens of which 7 are a shared system prompt: once a prefill engine has seen it, a request
  brings it 64 new tokens (the engines' prefix-cache counters give the hit rate, 7/8 when warm).
  With ``PROFILE`` the floor is ceil(1.98 x 64 / 192) = 1 prefill and 3 decode workers (decode
  holds every prompt's whole KV). From t=60 s, fewer than ceil(1.98 x 512 / 192) = 6 prefill
  workers must serve: what a planner that sizes prefill for whole prompts holds even with no
  headroom (the reference planner, so broken, climbs one step at a time to 10, the budget's share
  beside decode's 6: 6 serving at t=27.5 s; the reference itself holds 1-2).
- ``speculative``: the accept length of speculative decoding, the same seed sentences. 1.0
  requests/s of ISL 256 / OSL 128 for 90 s; the decode engines speculate, emitting 4 tokens per
  step on average (``WorkerSpec.spec_accept_length``; ``vllm:spec_decode_*`` count the drafts), so
  a request takes ~32 decode steps. Floors: ceil(1.0 x 256 / 192) = 2 prefill and
  ceil(1.0 x 128 / 4 / 24) = 2 decode; from t=60 s fewer than ceil(1.0 x 128 / 24) = 6 decode
  workers, what a planner that takes a token for a step holds with no headroom (the reference
  planner, so broken, holds 12: the budget's share beside prefill's 4).
"""

from __future__ import annotations

import dataclasses

from servecert import features
from servecert.adapters.contract import PlannerSpec
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _assertions as planner_assertions
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios
from servecert.harness.planner import calibration as cal
from servecert.protocol.perf_profile import PerfProfile

PROFILE = PerfProfile(
    isl=cal.ISL,
    context=cal.ISL + cal.OSL // 2,
    prefill=((0.0, 400.0), (192.0, cal.TTFT_MS), (256.0, 3 * cal.TTFT_MS)),
    decode=((0.0, 20.0), (24.0, cal.ITL_MS), (32.0, 3 * cal.ITL_MS)),
)
DIP_PROFILE = PerfProfile(  # flat, then steep: 1.0 requests/s per engine at the SLA and at SLA x 0.8 alike
    isl=cal.ISL,
    context=cal.ISL + cal.OSL // 2,
    prefill=((0.0, cal.TTFT_MS / 2), (float(cal.ISL), cal.TTFT_MS / 2), (cal.ISL + 4.0, 3 * cal.TTFT_MS)),
    decode=((0.0, cal.ITL_MS / 2), (float(cal.OSL), cal.ITL_MS / 2), (cal.OSL + 0.5, 3 * cal.ITL_MS)),
)
BUDGET = 16  # room for a planner that plans with headroom over the profile's floor
CASES = {
    # case: (scenario, profile, throughput interval W (None: the default), load interval L (None: the default), floor)
    "steady": (planner_scenarios.PROFILED, PROFILE, None, None, 3),  # ceil(1.98 x 256 / 192), ceil(1.98 x 32 / 24)
    "short-dip": (planner_scenarios.SHORT_DIP, DIP_PROFILE, planner_scenarios.DIP_WINDOW_S, 1.0, 2),  # ceil(1.13 / 1.0)
    "prefix-reuse": (planner_scenarios.PREFIX_REUSE, PROFILE, None, None, 3),  # decode ceil(1.98 x 32 / 24); prefill 1
    "speculative": (planner_scenarios.SPECULATIVE, PROFILE, None, None, 2),  # ceil(1.0 x 256 / 192), ceil(1.0 x 128 / 4 / 24)
}
BLIND_FROM_S = 60.0  # prefix-reuse: a cache-blind floor of 6 prefill workers is reached one step at a time (t=27.5 s measured)


async def check(ctx: TestContext) -> None:
    scenario, profile, window, interval, floor = CASES[ctx.params["case"]]

    def tweak(spec: PlannerSpec) -> PlannerSpec:
        return dataclasses.replace(
            spec,
            profile=profile,
            max_gpu_budget=BUDGET,
            throughput_interval_s=window or spec.throughput_interval_s,
            load_interval_s=interval or spec.load_interval_s,
        )

    run = await planner_checks.run(ctx, scenario, tweak=tweak)
    settled = 2 * run.planner.throughput_interval_s + run.step_allowance(floor - 1)
    if scenario is planner_scenarios.PREFIX_REUSE:
        planner_assertions.workers_must_hold_the_profile_floor(run, profile, settled, prefill_tokens=planner_scenarios.PREFIX_NEW_TOKENS)
        why = "7/8 of every prompt is a prefix-cache hit"
        planner_assertions.workers_must_stay_below_the_blind_floor(run, profile, "prefill", BLIND_FROM_S, why)
    elif scenario is planner_scenarios.SPECULATIVE:
        steps = scenario.osl / scenario.spec_accept_length
        planner_assertions.workers_must_hold_the_profile_floor(run, profile, settled, decode_steps=steps)
        why = f"speculative decoding emits {scenario.spec_accept_length:g} tokens per decode step"
        planner_assertions.workers_must_stay_below_the_blind_floor(run, profile, "decode", BLIND_FROM_S, why)
    else:
        planner_assertions.workers_must_hold_the_profile_floor(run, profile, settled)


TEST = ConformanceTest(
    short_name="PlannerScalingFloorFromPerfModel",
    description="With a pre-deployment profile the suite wrote, workers never fall below the floor it implies at the SLA.",
    features=(features.PLANNER_SCALING_BOUNDS,),
    environments=planner_checks.ALGORITHM_JUDGED_IN,
    cases=tuple(Case(name, {"case": name}) for name in CASES),
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
        "ceil(offered requests/s x tokens per request / (profiled tokens/s per GPU at the SLA x GPUs)). Short idle periods "
        "(Architecture): 'When both loops are enabled, throughput-based scaling sets the replica lower bound ... This keeps "
        "capacity that was predicted for near-future demand from being removed because of short idle periods.' KV hit "
        "rate and accept length (Step 2, Step 3): 'KV hit rate and speculative decode accept length use last-value "
        "semantics ... Cold start falls back to no KV hit-rate discount and accept length 1.0'; 'Runtime metadata such as KV "
        "hit rate and speculative accept length are applied as input features'.",
    ),
)
