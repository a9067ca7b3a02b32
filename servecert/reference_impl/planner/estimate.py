"""Estimated TTFT of a prefill engine and ITL of a decode engine, from one interval of its FPM.

Per engine, the interval's iterations are summarised time-weighted (``summarise``): how many
prefill tokens were waiting, how much decode KV was active, and the mean residual of the
iteration in progress (``sum(ms^2) / 2 / window``: a request arriving at a random moment lands
in an iteration with probability proportional to its length). Idle time counts as no load.

- TTFT of a new request of ``isl`` tokens = residual + chunked prefill of (waiting + isl) tokens,
  in chunks of ``max_num_batched_tokens`` priced by the perf model (Dynamo simulates chunked
  prefill the same way).
- ITL = one decode step with the active KV plus one more request's context (``isl + osl/2``).
- Consolidation (the scale-down guard) re-estimates with the load of N engines spread over N-1:
  the engines' mean load (``mean``: the router may have sent all of it to one engine, but the
  N-1 left share it) times N/(N-1); prefill with the waiting tokens and residual scaled so, and
  not at all (infinite) when the engine's busy fraction would exceed ``MAX_UTILISATION`` — a queue near saturation grows without
  bound, which a snapshot of today's short queue cannot show; decode by solving for the new
  number of sequences in flight, since each extra sequence makes every step slower, which keeps
  every sequence in flight longer (n' = spread x n x step(n') / step(n)); no fixed point means
  the engine would saturate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servecert.reference_impl.planner.fpm import FpmSample
from servecert.reference_impl.planner.perf_model.protocol import DecodeCost, PrefillCost

MAX_UTILISATION = 0.85  # a prefill engine busier than this after consolidation is taken as saturated
FIXED_POINT_ITERATIONS = 50
SATURATION_FACTOR = 20.0  # decode KV growing past this multiple of the spread load: no fixed point


@dataclass(frozen=True)
class EngineLoad:
    engine_id: str
    waiting_prefill_tokens: float
    active_decode_kv_tokens: float
    residual_ms: float
    busy_fraction: float
    iterations: int
    prefill_share: float = 0.0  # of the iterations, the share that prefilled (aggregated engines' piggybacked prefill)
    prefill_tokens: float = 0.0  # prefill tokens per iteration, on average


def summarise(engine_id: str, samples: Sequence[FpmSample], window_ms: float, last: FpmSample | None = None) -> EngineLoad:
    """Time-weighted load of one engine over a window of ``window_ms`` simulated milliseconds.

    ``last`` is the engine's newest record from before the window: when the window holds no
    iteration at all but that record left work queued, the engine is inside an iteration longer
    than the window — saturated, not idle (records are published when an iteration ends).
    """
    work = [s for s in samples if s.iteration_ms > 0]
    if not work and not samples and last is not None and last.queued_prefill_tokens + last.queued_decode_kv_tokens > 0:
        decode_kv = float(last.scheduled_decode_kv_tokens + last.queued_decode_kv_tokens)
        return EngineLoad(engine_id, float(last.queued_prefill_tokens), decode_kv, last.iteration_ms / 2, 1.0, 0)
    busy = sum(s.iteration_ms for s in work)
    span = max(window_ms, busy, 1e-9)
    return EngineLoad(
        engine_id=engine_id,
        waiting_prefill_tokens=sum(s.iteration_ms * s.queued_prefill_tokens for s in work) / span,
        active_decode_kv_tokens=sum(s.iteration_ms * (s.scheduled_decode_kv_tokens + s.queued_decode_kv_tokens) for s in work) / span,
        residual_ms=sum(s.iteration_ms**2 for s in work) / 2 / span,
        busy_fraction=busy / span,
        iterations=len(work),
        prefill_share=sum(s.scheduled_prefill_tokens > 0 for s in work) / len(work) if work else 0.0,
        prefill_tokens=sum(s.scheduled_prefill_tokens for s in work) / len(work) if work else 0.0,
    )


def mean(loads: Sequence[EngineLoad]) -> EngineLoad:
    """The load of an average engine: what each of the engines gets when the router spreads the whole evenly."""
    n = max(1, len(loads))
    return EngineLoad(
        engine_id="mean",
        waiting_prefill_tokens=sum(x.waiting_prefill_tokens for x in loads) / n,
        active_decode_kv_tokens=sum(x.active_decode_kv_tokens for x in loads) / n,
        residual_ms=sum(x.residual_ms for x in loads) / n,
        busy_fraction=sum(x.busy_fraction for x in loads) / n,
        iterations=round(sum(x.iterations for x in loads) / n),
        prefill_share=sum(x.prefill_share for x in loads) / n,
        prefill_tokens=sum(x.prefill_tokens for x in loads) / n,
    )


def chunked_prefill_ms(perf: PrefillCost, tokens: float, chunk: int) -> float:
    full = math.floor(tokens / chunk)
    rest = tokens - full * chunk
    return full * perf.prefill_ms(chunk) + perf.prefill_ms(rest)


def ttft_ms(load: EngineLoad, perf: PrefillCost, isl: float, chunk: int, spread: float = 1.0) -> float:
    """Estimated TTFT on this engine; ``spread`` multiplies its load (N/(N-1) for consolidation)."""
    if spread > 1.0 and load.busy_fraction * spread > MAX_UTILISATION:
        return math.inf
    return load.residual_ms * spread + chunked_prefill_ms(perf, load.waiting_prefill_tokens * spread + isl, chunk)


def itl_ms(load: EngineLoad, perf: DecodeCost, context_tokens: float, spread: float = 1.0) -> float:
    """Estimated ITL of one more request on this engine, with its load multiplied by ``spread``."""
    kv = load.active_decode_kv_tokens
    if spread <= 1.0 or kv <= 0:
        return perf.decode_ms(kv * spread + context_tokens)
    step_now = max(perf.decode_ms(kv), 1e-9)
    target = kv * spread
    for _ in range(FIXED_POINT_ITERATIONS):
        following = kv * spread * perf.decode_ms(target) / step_now
        if following > kv * spread * SATURATION_FACTOR:
            return math.inf
        if abs(following - target) < 1.0:
            break
        target = following
    return perf.decode_ms(target + context_tokens)
