"""RECONCILE and CONSTRAIN: one target per component from the proposals, within every limit.

Order (Dynamo's engine adapter): the load-based proposal (or the current count without load
scaling), raised to the throughput floor; at most ``max_step`` away from the current count (so
a floor far above is approached step by step, one per decision); at least ``min_endpoint`` (prefill:
none in aggregated mode, whose one worker set is the decode component); and
finally the GPU budget over both components: increases are given back first (decode's, then
prefill's), and a count already above the budget is lowered, the larger GPU user first, never
below ``min_endpoint``.
"""

from __future__ import annotations

from dataclasses import dataclass

from servecert.reference_impl.planner.config import PlannerConfig


@dataclass(frozen=True)
class Targets:
    prefill: int
    decode: int


def gpus(t: Targets, cfg: PlannerConfig) -> int:
    return t.prefill * cfg.prefill_engine_num_gpu + t.decode * cfg.decode_engine_num_gpu


def _clamp(value: int, current: int, cfg: PlannerConfig, least: int) -> int:
    stepped = min(current + cfg.max_step, max(current - cfg.max_step, value))
    return max(least, stepped)


def reconcile(current: Targets, load: Targets | None, floor: Targets | None, cfg: PlannerConfig) -> tuple[Targets, list[str]]:
    """The constrained target and the constraints that changed it (for diagnostics)."""
    notes: list[str] = []
    base = load or current
    p, d = base.prefill, base.decode
    if floor is not None:
        if floor.prefill > p or floor.decode > d:
            notes.append("throughput_floor")
        p, d = max(p, floor.prefill), max(d, floor.decode)
    clamped = Targets(_clamp(p, current.prefill, cfg, cfg.prefill_min_endpoint), _clamp(d, current.decode, cfg, cfg.min_endpoint))
    if clamped != Targets(p, d):
        notes.append("step_or_min_endpoint")
    target = fit_budget(clamped, current, cfg)
    if target != clamped:
        notes.append("gpu_budget")
    return target, notes


def fit_budget(target: Targets, current: Targets, cfg: PlannerConfig) -> Targets:
    p, d = target.prefill, target.decode
    while gpus(Targets(p, d), cfg) > cfg.max_gpu_budget:
        if d > current.decode:
            d -= 1
        elif p > current.prefill:
            p -= 1
        elif d > cfg.min_endpoint and (d * cfg.decode_engine_num_gpu >= p * cfg.prefill_engine_num_gpu or p <= cfg.prefill_min_endpoint):
            d -= 1
        elif p > cfg.prefill_min_endpoint:
            p -= 1
        else:
            break  # NB: unreachable with a valid config (min_endpoint fits the budget, checked at start)
    return Targets(p, d)
