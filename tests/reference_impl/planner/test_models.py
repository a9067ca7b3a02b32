"""Predictors, perf models and the latency estimates."""

from __future__ import annotations

import math

import pytest

from servecert.protocol.perf_profile import PerfProfile
from servecert.reference_impl.planner import estimate, predictors, throughput_scaling, traffic
from servecert.reference_impl.planner.fpm import FpmSample
from servecert.reference_impl.planner.perf_model.regression import RegressionPerfModel


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


PROFILE = PerfProfile(isl=256, context=272, prefill=((0.0, 400.0), (192.0, 1000.0), (256.0, 3000.0)), decode=((0.0, 20.0), (24.0, 100.0)))


@pytest.mark.parametrize(
    ("component", "sla_ms", "tokens_per_gpu"),
    [("prefill", 1000.0, 192.0), ("prefill", 700.0, 96.0), ("prefill", 2000.0, 224.0), ("prefill", 300.0, 0.0),
     ("decode", 100.0, 24.0), ("decode", 500.0, 24.0)],
    ids=["prefill-at-a-point", "prefill-between-points", "prefill-on-the-steep-part", "prefill-below-the-curve",
         "decode-at-a-point", "decode-past-the-sweep"],
)
def test_a_profile_gives_the_largest_throughput_within_the_sla(component: str, sla_ms: float, tokens_per_gpu: float) -> None:
    assert PROFILE.capacity_per_gpu(component, sla_ms) == pytest.approx(tokens_per_gpu)


def test_profiled_capacity_is_per_engine_requests_and_sizes_the_floor_seed_003s_way() -> None:
    # 192 tokens/s per GPU x 2 GPUs / 256 tokens per request = 1.5 requests/s per engine; 4 requests/s need 3 engines
    rps = throughput_scaling.profiled_capacity_rps(PROFILE, "prefill", 1000.0, 256, 2)
    assert rps == pytest.approx(1.5)
    assert throughput_scaling.replicas(4.0, rps) == 3


def test_consolidation_spreads_the_whole_load_however_unevenly_the_router_sent_it() -> None:
    # one decode engine carried everything, the other idled: the one engine left after consolidation carries the same
    m = RegressionPerfModel(min_observations=2)
    for kv in (272, 2720):
        m.observe_decode(kv, 16 + 0.056 * kv)
    busy = estimate.EngineLoad("a", 0.0, 200.0, 10.0, 0.75, 48)
    idle = estimate.EngineLoad("b", 0.0, 0.0, 0.0, 0.0, 0)
    spread = estimate.itl_ms(estimate.mean([busy, idle]), m, 272, 2.0)
    alone = estimate.itl_ms(busy, m, 272, 1.0)
    assert spread == pytest.approx(alone, rel=0.2)  # NB: the fixed point adds the slowdown of more sequences per step
    assert spread < 80.0 < estimate.itl_ms(busy, m, 272, 2.0)  # scaling the busy engine's own load doubled it


def test_two_windows_merge_into_one_rate_with_request_weighted_lengths() -> None:
    both = traffic.merged(traffic.TrafficSample(12, 200, 30, 6.0), traffic.TrafficSample(24, 300, 36, 6.0))
    assert both.rps == pytest.approx(3.0)
    assert (both.isl, both.osl) == (pytest.approx(800 / 3), pytest.approx(34.0))


def test_the_floor_plans_for_a_rise_at_once_and_a_fall_over_two_windows() -> None:
    before, rising, falling = (traffic.TrafficSample(n, 200, 30, 6.0) for n in (8, 18, 6))
    assert traffic.planned_rps(traffic.merged(before, rising).rps, rising) == pytest.approx(3.0)  # not the 2.17 of both
    assert traffic.planned_rps(traffic.merged(rising, falling).rps, falling) == pytest.approx(2.0)  # not the 1.0 of the last


def test_speculation_multiplies_decode_capacity_by_the_accept_length_at_the_same_step_budget() -> None:
    perf = RegressionPerfModel(min_observations=2)
    for kv, ms in ((1000, 16 + 0.056 * 1000), (8000, 16 + 0.056 * 8000)):
        perf.observe_decode(kv, ms)
    one = throughput_scaling.decode_capacity_rps(perf, 256, 128, 100.0)
    three = throughput_scaling.decode_capacity_rps(perf, 256, 128, 100.0, accept_length=3.0)
    assert three > 3 * one  # each step yields 3 tokens, and a token's ITL allows a 3x longer step: more in flight too
