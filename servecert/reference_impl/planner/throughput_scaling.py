"""PROPOSE, throughput-based: replicas = ceil(predicted rate / per-engine capacity at the SLA).

Capacity comes from a pre-deployment throughput sweep when the planner was given one
(``servecert.protocol.perf_profile``: the largest tokens/s per GPU whose profiled latency meets the SLA,
times the engine's GPUs, over the tokens one request brings: ISL for prefill, OSL for decode, as
Dynamo sizes ``ceil(num_req x isl / interval / thpt_per_gpu / gpus)``), else from the perf model
(Dynamo: ``prefill_replicas = ceil(rps / prefill_capacity)``):

- prefill: the largest batch of B tokens (a whole number of requests, at most one chunk) whose
  iteration time t(B) keeps a request's TTFT within the SLA when it waits for one iteration and
  is served in the next (2 t(B) <= ttft); capacity = B / isl / t(B). At least one request per
  iteration is assumed even if it alone breaks the SLA (the load loop then adds engines).
- decode: the largest number n of concurrent requests whose decode step over n x (isl + osl/2)
  KV tokens stays within the ITL SLA; capacity = n / (osl x step time).

The planner asks for capacity at SLA x sensitivity and multiplies it by a target utilisation:
the load loop reacts only once estimates pass the SLA, so a floor sized exactly at the SLA would
leave a steady state hovering at the boundary, with half the requests over it. The result is only
a floor (the load loop scales above it) and is computed from a prediction of the next window, so
a short lull does not remove capacity that sustained demand needs.
"""

from __future__ import annotations

import math

from servecert.protocol.perf_profile import PerfProfile
from servecert.reference_impl.planner.perf_model.protocol import DecodeCost, PrefillCost

MAX_BATCH_REQUESTS = 1024
MAX_DECODE_CONCURRENCY = 4096
FLOOR_HYSTERESIS = 0.2


def prefill_capacity_rps(perf: PrefillCost, isl: float, ttft_ms: float, chunk: int) -> float:
    isl = max(1.0, isl)
    best = 1000.0 / max(perf.prefill_ms(isl), 1e-6)
    for k in range(2, MAX_BATCH_REQUESTS):
        tokens = k * isl
        if tokens > chunk:
            break
        t = perf.prefill_ms(tokens)
        if 2 * t > ttft_ms:
            break
        best = max(best, k * 1000.0 / max(t, 1e-6))
    return best


def decode_capacity_rps(perf: DecodeCost, isl: float, osl: float, itl_ms: float, accept_length: float = 1.0) -> float:
    """With speculative decoding a step yields ``accept_length`` tokens: a token's ITL is step / accept length, and a
    request needs osl / accept length steps."""
    osl = max(1.0, osl)
    context = isl + osl / 2
    step_budget = itl_ms * accept_length
    n = 1
    while n < MAX_DECODE_CONCURRENCY and perf.decode_ms((n + 1) * context) <= step_budget:
        n += 1
    step = max(perf.decode_ms(n * context), 1e-6)
    return n * 1000.0 * accept_length / (osl * step)


def profiled_capacity_rps(profile: PerfProfile, component: str, sla_ms: float, tokens_per_request: float, gpus: int) -> float:
    """Requests per second one engine of ``gpus`` GPUs serves within ``sla_ms``, by the profile."""
    return profile.capacity_per_gpu(component, sla_ms) * gpus / max(1.0, tokens_per_request)


def replicas(rps: float, capacity_rps: float) -> int:
    return max(0, math.ceil(rps / capacity_rps - 1e-9)) if capacity_rps > 0 else 0


def floor(rps: float, capacity_rps: float, previous: int | None, min_endpoint: int, hysteresis: float = FLOOR_HYSTERESIS) -> int:
    """The new floor, with a dead band so a rate hovering at a boundary (noise in a short window) does not
    flip it every window: it drops only when the prediction is ``hysteresis`` below what one fewer engine
    serves, and rises only when it is ``hysteresis / 2`` above what the current floor serves (the target
    utilisation leaves that much headroom, and the load loop still reacts to real SLA pressure)."""
    wanted = max(min_endpoint, replicas(rps, capacity_rps))
    if previous is not None and wanted < previous and rps > (previous - 1) * capacity_rps * (1 - hysteresis):
        return previous
    if previous is not None and wanted > previous and rps <= previous * capacity_rps * (1 + hysteresis / 2):
        return previous
    return wanted
