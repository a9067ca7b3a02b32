"""The reference planner's Prometheus surface: seed 003's names, the decision enum, per-engine FPM gauges."""

from __future__ import annotations

from prometheus_client import generate_latest

from servecert.reference_impl.planner.diagnostics import Diagnostics, TickRecord
from servecert.reference_impl.planner.estimate import EngineLoad


def _exposition(d: Diagnostics) -> str:
    return generate_latest(d.registry).decode()


def _tick(prefill_reason: str, decode_reason: str) -> TickRecord:
    return TickRecord(4.0, 2, 3, 2, 3, 1, 2, 700.0, 60.0, 2.5, 2.75, prefill_reason, decode_reason, "hold")


def test_each_tick_sets_the_seeds_gauges_and_one_decision_state_per_component() -> None:
    d = Diagnostics()
    d.record(_tick("within_band", "all_above_sla"))
    text = _exposition(d)
    for line in ("dynamo_planner_estimated_itl_ms 60.0", "dynamo_planner_num_prefill_replicas 2.0",
                 "dynamo_planner_num_decode_replicas 3.0", "dynamo_planner_observed_requests_per_second 2.5",
                 "dynamo_planner_predicted_requests_per_second 2.75"):
        assert line in text
    enum = 'dynamo_planner_load_scaling_decision{component="decode",dynamo_planner_load_scaling_decision="%s"} %s'
    assert enum % ("all_above_sla", "1.0") in text
    assert enum % ("within_band", "0.0") in text


def test_a_reason_outside_the_enum_is_other_and_still_counted_by_name() -> None:
    d = Diagnostics()
    d.record(_tick("a_vendor_reason", "within_band"))
    text = _exposition(d)
    assert 'dynamo_planner_load_scaling_decision{component="prefill",dynamo_planner_load_scaling_decision="other"} 1.0' in text
    assert 'dynamo_planner_load_scaling_decisions_total{component="prefill",reason="a_vendor_reason"} 1.0' in text


def test_engine_gauges_follow_the_engines_of_each_tick() -> None:
    d = Diagnostics()
    d.record(_tick("within_band", "within_band"), [EngineLoad("p1", 384.0, 0.0, 0.0, 0.5, 3), EngineLoad("d1", 0.0, 2048.0, 0.0, 0.4, 9)])
    text = _exposition(d)
    assert 'dynamo_planner_engine_queued_prefill_tokens{dp_rank="0",worker_id="p1"} 384.0' in text
    assert 'dynamo_planner_engine_inflight_decode_kv_tokens{dp_rank="0",worker_id="d1"} 2048.0' in text
    d.record(_tick("within_band", "within_band"), [EngineLoad("d1", 0.0, 1024.0, 0.0, 0.2, 9)])
    text = _exposition(d)
    assert 'worker_id="p1"' not in text
    assert 'dynamo_planner_engine_inflight_decode_kv_tokens{dp_rank="0",worker_id="d1"} 1024.0' in text
