"""The PLANNER-SCALING scenarios as data: load shapes in simulated seconds and engines' worth.

Level 1.0 of a shape is ``peak_engines`` engines' worth of load (``ENGINE_RPS`` requests per
simulated second each), so ``STEP_X4`` goes from 0.8 to 3.2 engines' worth: one worker of each
component suffices before the step, four are needed after it. Durations are as short as the
checks allow (the whole profile must run in well under two minutes at the default time scale);
the moments the checks judge are named beside each scenario.
"""

from __future__ import annotations

import dataclasses

from servecert.adapters.contract import AGG
from servecert.conformance.tests.planner_scaling._checks import Scenario
from servecert.harness.planner import calibration as cal
from servecert.harness.planner.calibration import ENGINE_RPS
from servecert.load.shapes.burst import Burst
from servecert.load.shapes.constant import Constant
from servecert.load.shapes.diurnal import Diurnal
from servecert.load.shapes.ramp import Ramp
from servecert.load.shapes.step import Step
from servecert.load.shapes.trace import TraceEntry, TraceReplay, synthetic

STEP_AT = 14.0
STEP_X4 = Scenario("step-x4", Step(70.0, ((0.0, 0.25), (STEP_AT, 1.0))), peak_engines=3.2)
# On a cluster one engine start-up in the allowance is what the added pods took (ScenarioRun.engine_startup_s), and the
# x4 step's allowance counts four: 20 + 4 x start-up. Pods that took 9 s (a busy machine's kubelet and probes) ended it
# at t=70, leaving STEP_X4 no request to judge; 110 s leaves at least 16 s of load to judge up to start-ups of 15 s.
STEP_X4_ON_PODS = dataclasses.replace(STEP_X4, shape=Step(110.0, ((0.0, 0.25), (STEP_AT, 1.0))))

RISE_AT, FALL_AT = 10.0, 36.0
UP_AND_DOWN = Scenario("step-up-and-down", Step(72.0, ((0.0, 0.2), (RISE_AT, 1.0), (FALL_AT, 0.2))), peak_engines=3.0)

RAMP = Scenario("ramp", Ramp(56.0, ((0.0, 0.25), (28.0, 1.0))), peak_engines=3.2)

FALL_FROM = 6  # workers of each component at the start: the first throughput floor (t=12) finds several above it
FALL_BUDGET = 16  # GPUs: room for the six of each
FALL = Scenario("fall", Step(44.0, ((0.0, 1.0), (8.0, 0.15))), peak_engines=3.2)  # 3.2 -> 0.48 engines' worth at t=8

STEADY_SETTLED_AT = 22.0
STEADY = Scenario("steady", Constant(52.0), peak_engines=2.5)

LOW = Scenario("low-load", Constant(28.0), peak_engines=0.4)  # one worker of each serves it

# Load-rule scenarios: one component does all the work. One engine's worth of each mix is measured with
# `servecert bench planner-calibrate --isl I --osl O` (>= 95% within SLA at 0.9 and 2.0 requests/s, not at 1.0 and 2.4).
# The SLA is judged from LOAD_RULES_SETTLED_AT: with the load rules alone, the backlog that builds while two engines
# serve 2.5-2.8 engines' worth must drain, and a decode engine's long sequences keep it busier than a new one, so
# "ALL engines above the SLA" holds only once they finish (one sequence lasts ~13 s at the ITL SLA).
LOAD_RULES_SETTLED_AT = 40.0
DECODE_BOUND = Scenario("decode-bound", Constant(64.0), peak_engines=2.8, isl=64, osl=128, engine_rps=0.85)
# NB: 2.8, not 2.5: at 2.5 (2.4 requests/s on each of two engines) the median TTFT stayed under the SLA (899 ms; 69% within,
# measured with spread prompts), so a planner following seed 003's "scale up if ALL engines' estimated TTFT > SLA" with an
# accurate estimate holds two engines and misses the 95% (Dynamo 1.6.1: estimates 720-870 ms, 88.6%). At 2.8 (2.66 each)
# two engines are overloaded for any estimate (p50 3.9 s), three serve 1.77 each (100% within at 2.0).
PREFILL_BOUND = Scenario("prefill-bound", Constant(64.0), peak_engines=2.8, isl=192, osl=8, engine_rps=1.9)

# Aggregated mode (seed 003 "--mode agg"): one set of aggregated workers, each running chunked prefill with the decode
# step piggybacked. Each scenario makes one signal the overloaded one and leaves the other's SLA out of reach, so a
# planner that reads only one signal (or removes a worker when only one allows it) is told apart. Measured with
#   servecert bench planner-calibrate --agg 1 --rps R --seconds 80 --itl-ms 2000                        (agg-ttft-bound)
#   servecert bench planner-calibrate --agg 1 --isl 32 --osl 128 --rps R --seconds 80 --ttft-ms 5000    (agg-itl-bound)
# agg-ttft-bound: 100% within SLA at 0.9 requests/s (TTFT p95 853 ms), 42% at 1.0 (TTFT p50 1030 ms); TPOT p95 never
#   above 1.32 s even at 1.1 (a step carries at most one chunk), so the 2 s ITL target is never reached.
# agg-itl-bound: 100% at 0.9 (TPOT p95 68 ms), 15% at 1.1 (TPOT p50 115 ms); TTFT p95 634 ms even at 1.5, far under 3 s.
#   Offered at 3.0 engines' worth (1.35 requests/s on each of two; 1.3 measured TPOT p50 190 ms): at 2.5 and 2.8 (1.125
#   and 1.26 each) the two engines' TPOT hovered at 101-104 ms for 16 s, too close to the target to tell a slow rule
#   from a missing one.
# Both are judged from AGG_SETTLED_AT: the load needs ~8 s to overload two engines (the queue, or the long sequences'
# KV, builds up), the 2-D model needs 5 averaged rows (3 intervals with two engines), then one worker starts (3 s).
AGG_SETTLED_AT = 24.0
AGG_TTFT_BOUND = Scenario(
    "agg-ttft-bound", Constant(64.0), peak_engines=2.5, isl=256, osl=32, engine_rps=0.9, miss_rps=(1.0, 1.0), mode=AGG,
    sla_ms=(1000.0, 2000.0),
)
AGG_ITL_BOUND = Scenario(
    "agg-itl-bound", Constant(64.0), peak_engines=3.0, isl=32, osl=128, engine_rps=0.9, miss_rps=(1.1, 1.1), mode=AGG,
    sla_ms=(3000.0, 100.0),
)

# Load that rises and falls back, aggregated (seed 003: "scale down only if both signal underload" must still scale
# down once both do): the agg-ttft-bound mix and SLA, 0.15 -> 1.0 -> 0.15 of 2.7 requests/s (three engines' worth at
# the 0.9 one engine serves), at the times of UP_AND_DOWN. Low is 0.41 requests/s, not UP_AND_DOWN's 0.2 (0.54): a
# throughput floor that plans engines 60% busy (the reference's) puts one engine's share at 0.54-0.57, and window noise
# then raised the reference's floor to two at t=60 s, a boundary this scenario is not about.
AGG_UP_AND_DOWN = dataclasses.replace(
    AGG_TTFT_BOUND,
    name="agg-step-up-and-down",
    shape=Step(72.0, ((0.0, 0.15), (RISE_AT, 1.0), (FALL_AT, 0.15))),
    peak_engines=3.0,
)

PROFILED = Scenario("profiled-steady", Constant(48.0), peak_engines=1.65)  # 1.98 requests/s


def _shared_prefix_trace(seconds: float, rate_rps: float, shared_blocks: int, block_tokens: int, osl: int) -> TraceReplay:
    """Evenly spaced requests whose prompts share ``shared_blocks`` blocks (a system prompt) and end in one block of
    their own: once an engine has prefilled the system prompt, each request brings it one block of new tokens."""
    count = int(seconds * rate_rps)
    prompt = (shared_blocks + 1) * block_tokens
    return TraceReplay(tuple(
        TraceEntry(round(i * 1000.0 / rate_rps, 3), prompt, osl, (*range(shared_blocks), shared_blocks + i)) for i in range(count)
    ))


# Seed 003's KV hit rate ("input features for capacity estimation"): PROFILED's rate, prompts of 8 blocks of 64 tokens of
# which 7 are a shared system prompt, so after each prefill engine's first request 7/8 of every prompt is a cache hit.
PREFIX_BLOCKS, PREFIX_BLOCK_TOKENS = 7, 64
PREFIX_REUSE = Scenario(
    "prefix-reuse",
    Constant(90.0),
    peak_engines=1.65,
    isl=(PREFIX_BLOCKS + 1) * PREFIX_BLOCK_TOKENS,
    block_tokens=PREFIX_BLOCK_TOKENS,
    trace=_shared_prefix_trace(90.0, 1.65 * ENGINE_RPS, PREFIX_BLOCKS, PREFIX_BLOCK_TOKENS, cal.OSL),
)
PREFIX_NEW_TOKENS = PREFIX_BLOCK_TOKENS  # what each request makes a warm prefill engine compute

# Seed 003's accept length: the decode engines speculate (4 tokens per step on average), 1.0 requests/s of ISL 256 / OSL
# 128 for 90 s: a request takes ~32 decode steps, not 128. At 3 tokens a step the reference held 4-5 decode workers, one
# under the bound of 6; at 4 its floor is ceil(128 / (4 x 11.5)) = 3.
SPECULATIVE = Scenario("speculative", Constant(90.0), peak_engines=1.0 / ENGINE_RPS, osl=128, spec_accept_length=4.0)

# A short idle period inside sustained demand (seed 003: the floor "keeps capacity that was predicted for near-future
# demand from being removed because of short idle periods"): 1.7 requests/s, no request at all for DIP_S from DIP_AT.
# Judged with a throughput window of DIP_WINDOW_S, three times the dip: any such window still averages >= 1.13 req/s.
# The dip is 20 s (it was 10 s with a 30 s window): a planner whose floor follows the dip sheds its 4-7 idle workers one
# load interval and one worker's exit at a time (about 2 s a step quiet, more under load); in 10 s, beside the reference's
# whole profile in make test, it once had not reached one worker before requests came back (CI of a07aa90).
DIP_AT, DIP_S, DIP_WINDOW_S = 136.0, 20.0, 60.0  # DIP_AT: from 2 W + one added worker + 3 L (133 s), as the check judges
SHORT_DIP = Scenario(
    "short-dip", Step(170.0, ((0.0, 1.0), (DIP_AT, 0.0), (DIP_AT + DIP_S, 1.0))), peak_engines=1.7 / ENGINE_RPS
)

OVER_BUDGET = Scenario("over-budget", Burst(32.0, base=0.25, start=4.0, length=28.0), peak_engines=4.0)

BURST = Scenario("burst", Burst(60.0, base=0.33, start=10.0, length=24.0), peak_engines=3.0)
DIURNAL = Scenario("diurnal", Diurnal(64.0, period_s=64.0, low=0.33, high=1.0), peak_engines=3.0)
TRACE = Scenario(
    "trace-replay",
    Constant(44.0),
    peak_engines=2.5,  # ISL 192-448 (mean ~320) at 1.5 engines' worth of request rate: ~2 engines' worth of work
    trace=TraceReplay(tuple(synthetic(66, rate_rps=1.5 * ENGINE_RPS, seed=3, block_tokens=64, sessions=6, system_blocks=2,
                                      turn_blocks=1, output_length=32))),
)
