"""Aggregated mode as units: the 2-D perf model, its views, the either/both rule, and the limits."""

from __future__ import annotations

import random

import pytest

from servecert.reference_impl.planner import estimate, load_scaling
from servecert.reference_impl.planner.config import AGG, PlannerConfig, PlannerConfigError
from servecert.reference_impl.planner.perf_model.aggregated import AggregatedPerfModel, DecodeView, PrefillView, WindowRow
from servecert.reference_impl.planner.reconcile import Targets, reconcile


def engine_ms(prefill: int, decode_kv: int) -> float:
    """An aggregated engine like the fakes' planner table: 40 + 2/token prefill, 16 + 0.056/KV-token decode."""
    return (40 + 2 * prefill if prefill else 0.0) + (16 + 0.056 * decode_kv if decode_kv else 0.0)


def trained(rows: int = 12, seed: int = 1) -> AggregatedPerfModel:
    rng = random.Random(seed)
    model = AggregatedPerfModel(min_observations=5)
    for _ in range(rows):
        iterations = []
        for _ in range(40):
            p = rng.choice([0, 0, rng.randint(64, 512)])
            d = rng.choice([0, rng.randint(200, 4000)])
            if p or d:
                iterations.append((p, d, engine_ms(p, d)))
        row = WindowRow.of(iterations)
        assert row is not None
        model.observe(row)
    return model


def test_window_averages_recover_the_iteration_cost_of_every_mix() -> None:
    model = trained()
    assert model.ready()
    for p, d in ((512, 0), (0, 3000), (256, 1500), (64, 200)):
        assert model.iteration_ms(float(p > 0), float(d > 0), p, d) == pytest.approx(engine_ms(p, d), rel=0.02)


def test_heartbeats_alone_give_no_row_and_too_few_rows_are_not_ready() -> None:
    assert WindowRow.of([(0, 0, 0.0), (0, 0, 0.0)]) is None
    assert not trained(rows=4).ready()


def test_a_noisy_negative_coefficient_is_dropped_not_kept() -> None:
    model = AggregatedPerfModel(min_observations=2)
    for kv, ms in ((1000, 80.0), (1010, 70.0), (990, 90.0)):  # time falls as KV rises: noise at one load
        model.observe(WindowRow(0.0, 1.0, 0.0, kv, ms))
    assert all(c >= 0 for c in model.coefficients())
    assert model.iteration_ms(0.0, 1.0, 0.0, 2000) >= model.iteration_ms(0.0, 1.0, 0.0, 1000)


def test_prefill_carries_the_decode_step_and_decode_carries_the_average_prefill() -> None:
    model = trained()
    chunk_alone, chunk_with_decode = PrefillView(model, 0.0).prefill_ms(512), PrefillView(model, 3000.0).prefill_ms(512)
    assert chunk_with_decode == pytest.approx(chunk_alone + 16 + 0.056 * 3000, rel=0.03)
    quiet, busy = DecodeView(model, 0.0, 0.0).decode_ms(3000), DecodeView(model, 0.5, 256.0).decode_ms(3000)
    assert busy == pytest.approx(quiet + 0.5 * 40 + 2 * 256, rel=0.03)
    load = estimate.EngineLoad("e", waiting_prefill_tokens=1024, active_decode_kv_tokens=3000, residual_ms=0, busy_fraction=0.5,
                               iterations=10)
    assert estimate.ttft_ms(load, PrefillView(model, 3000.0), 256, 512) > estimate.ttft_ms(load, PrefillView(model, 0.0), 256, 512)


SLA_TTFT, SLA_ITL = load_scaling.Signal((), (), 1000.0), load_scaling.Signal((), (), 100.0)


def signal(sla: load_scaling.Signal, now: list[float], after: list[float]) -> load_scaling.Signal:
    return load_scaling.Signal(now, after, sla.sla)


@pytest.mark.parametrize(
    ("ttft", "itl", "target", "reason"),
    [
        (([1200, 1100], []), ([50, 60], []), 3, load_scaling.UP_TTFT),  # prefill alone overloaded
        (([200, 300], []), ([150, 120], []), 3, load_scaling.UP_ITL),  # decode alone overloaded
        (([1200, 900], []), ([150, 90], []), 2, load_scaling.HOLD),  # neither signal on ALL engines
        (([100, 100], [300]), ([30, 30], [50]), 1, load_scaling.DOWN),  # both consolidate below SLA x 0.8
        (([100, 100], [300]), ([30, 30], [85]), 2, load_scaling.HOLD),  # TTFT would allow it, ITL does not
        (([100, 100], [900]), ([30, 30], [50]), 2, load_scaling.HOLD),  # ITL would allow it, TTFT does not
    ],
)
def test_either_signal_adds_a_worker_and_only_both_remove_one(
    ttft: tuple[list[float], list[float]], itl: tuple[list[float], list[float]], target: int, reason: str
) -> None:
    proposal = load_scaling.decide_aggregated(2, signal(SLA_TTFT, *ttft), signal(SLA_ITL, *itl), 0.8, 1)
    assert (proposal.target, proposal.reason) == (target, reason)


def test_aggregated_mode_has_no_prefill_component() -> None:
    cfg = PlannerConfig(mode=AGG, min_endpoint=2, max_gpu_budget=4, decode_engine_num_gpu=2)
    target, _ = reconcile(Targets(0, 2), Targets(0, 3), None, cfg)
    assert target == Targets(0, 2)  # the budget (4 GPUs) holds two agg workers of 2 GPUs; prefill is never raised to 2
    assert reconcile(Targets(0, 3), Targets(0, 1), None, cfg)[0] == Targets(0, 2)
    with pytest.raises(PlannerConfigError, match="mode"):
        PlannerConfig(mode="both")
    with pytest.raises(PlannerConfigError, match="drop profile"):
        PlannerConfig(mode=AGG, profile="table.json")
