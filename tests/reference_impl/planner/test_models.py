"""Predictors, perf models and the latency estimates."""

from __future__ import annotations

import math

import pytest

from reference_impl.planner import estimate, predictors, throughput_scaling
from reference_impl.planner.fpm import FpmSample
from reference_impl.planner.perf_model.regression import RegressionPerfModel


@pytest.mark.parametrize("name", ["constant", "arima", "kalman"])
def test_every_predictor_follows_a_steady_series_and_never_goes_negative(name: str) -> None:
    p = predictors.make(name)
    assert p.predict() == 0.0
    for v in [10, 10.5, 9.5, 10, 10.2, 9.8, 10.1, 10]:
        p.add(v)
    assert 8.0 <= p.predict() <= 12.0


def test_kalman_extrapolates_a_trend() -> None:
    p = predictors.make("kalman")
    for v in range(1, 20):
        p.add(float(v))
    assert p.predict() > 19.0


def test_regression_recovers_a_linear_iteration_cost_and_falls_back_to_proportional() -> None:
    m = RegressionPerfModel(min_observations=3)
    for tokens in (100, 200, 300, 400):
        m.observe_prefill(tokens, 40 + 2 * tokens)
    assert m.prefill_ready() and m.prefill_ms(500) == pytest.approx(1040)
    single = RegressionPerfModel(min_observations=3)
    for _ in range(3):
        single.observe_prefill(512, 1064)
    assert single.prefill_ready() and single.prefill_ms(256) == pytest.approx(532)


def _sample(ms: float, queued: int = 0, kv: int = 0) -> FpmSample:
    return FpmSample(0.0, ms, 256, queued, kv, 0, 1)


def test_ttft_grows_with_the_waiting_queue_and_consolidation_past_saturation_is_infinite() -> None:
    m = RegressionPerfModel(min_observations=2)
    for tokens in (256, 512):
        m.observe_prefill(tokens, 40 + 2 * tokens)
    idle = estimate.summarise("e", [_sample(552)], 2000)
    busy = estimate.summarise("e", [_sample(552, queued=1024)] * 3, 2000)
    assert estimate.ttft_ms(busy, m, 256, 512) > estimate.ttft_ms(idle, m, 256, 512)
    assert math.isinf(estimate.ttft_ms(busy, m, 256, 512, spread=2.0))


def test_an_engine_silent_for_a_window_with_queued_work_counts_as_saturated() -> None:
    load = estimate.summarise("e", [], 2000, last=_sample(1064, queued=2048))
    assert load.busy_fraction == 1.0 and load.waiting_prefill_tokens == 2048


def test_decode_capacity_is_the_rate_that_keeps_itl_within_the_sla() -> None:
    m = RegressionPerfModel(min_observations=2)
    for kv in (272, 2720):
        m.observe_decode(kv, 16 + 0.056 * kv)
    rps = throughput_scaling.decode_capacity_rps(m, 256, 32, 100)
    assert 1.0 < rps < 3.0
    assert throughput_scaling.replicas(3.0, rps) >= 2
