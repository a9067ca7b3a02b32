"""The engines of PLANNER-SCALING scenarios, and how much load one of them serves within the SLA.

The suite owns the engines, so it knows their speed: ``timing.json`` (the fake engines'
timing-table format) makes a prefill iteration cost 40 ms + 2 ms per new token and a decode step
16 ms + 0.056 ms per active KV token, in simulated time (a slow model: few requests per simulated
second keep the real request rate low on a shared 2-core machine). With the scenarios' request mix
(ISL 256, OSL 32) and SLA (TTFT 1000 ms, ITL 100 ms), one prefill engine keeps TTFT within the SLA up to
about ``PREFILL_RPS`` requests per simulated second and one decode engine keeps ITL within it
up to about ``DECODE_RPS`` (measured with ``servecert/benchmarks/planner_calibrate.py``: fixed workers, no
planner, the largest rate at which >= 95% of requests meet the SLA), and misses it at
``*_MISS_RPS``: fewer engines than the offered rate over that are sure to miss it, the floor the
suite holds a planner to. Scenarios state their load in *engines' worth* (``ENGINE_RPS``, a little
under the smaller of the two), so "x4" means what it says.
"""

from __future__ import annotations

from pathlib import Path

TIMING_TABLE = Path(__file__).with_name("timing.json")
TIMING = f"table:{TIMING_TABLE}"
MODEL = "servecert-planner-model"
ISL = 256
ISL_SPREAD = 0.25
"""Prompt lengths vary ±25 % around a scenario's ISL (``load_generator.prompt_lengths``), the mean unchanged: a real
workload's do, and a planner whose perf model fits TTFT against prompt length (Dynamo's needs two distinct prefill
lengths) learns nothing from identical prompts. The suite's number, not the seed's."""
MAX_NUM_BATCHED_TOKENS = 512  # two requests per prefill iteration: iterations stay shorter than a load interval
OSL = 32
TTFT_MS = 1000.0
ITL_MS = 100.0
# Measured with the other component doubled, so only one is the bottleneck (60 simulated s per rate):
#   servecert bench planner-calibrate --decode 2 --rps 1.7 --rps 1.9 --seconds 60   -> 100% within SLA, 0%
#   servecert bench planner-calibrate --prefill 2 --rps 1.6 --rps 1.8 --seconds 60  -> 100% within SLA, 1%
# and again with prompts ISL ± ISL_SPREAD (2026-12-02): the same, 100% and 0% (prefill), 100% and 1.2% (decode).
PREFILL_RPS, PREFILL_MISS_RPS = 1.7, 1.9  # the largest rate served within the SLA; the lowest measured to miss it
DECODE_RPS, DECODE_MISS_RPS = 1.6, 1.8
ENGINE_RPS = 1.2  # a little under the smaller of the two, so 'one engine's worth' is comfortably served
# All workers share one host: KV transfers are priced as local, so topology adds nothing to TTFT.
DOMAINS = {"zone": "z0", "rack": "r0", "host": "h0"}
