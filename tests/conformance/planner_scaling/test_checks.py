"""A failed SLA check says which requests missed and why: the error a failed request got, or its latencies."""

from __future__ import annotations

from typing import Any, cast

import pytest

from conformance.suite.timeouts import Timeouts
from conformance.tests.planner_scaling import _assertions as planner_assertions
from conformance.tests.planner_scaling import _checks as planner_checks
from conformance.tests.planner_scaling import _scenarios as planner_scenarios
from fixtures.load_generator import Result


def run_of(results: list[Result]) -> planner_checks.ScenarioRun:
    t = Timeouts()
    harness = cast(Any, None)  # NB: the SLA share reads only the client's results and the scenario's shape
    return planner_checks.ScenarioRun(planner_scenarios.BURST, t, planner_checks.planner_spec(t), results, harness, end_s=60.0)


def ok(sent_s: float, ttft_s: float = 0.01) -> Result:
    return Result(sent_s, True, "", ttft_s, 0.001, 8, 0.1)


def test_the_misses_name_each_failed_request_with_its_error_and_each_slow_one_with_its_latency() -> None:
    failed = Result(2.2, False, "http_502", None, None, 0, 0.1, detail='{"error": {"message": "worker decode-1 unreachable"}}')
    run = run_of([ok(1.0), ok(1.5, ttft_s=9.0), failed])  # NB: before the burst (excused from t=10 s)
    scale = run.scale
    assert run.misses() == (
        f"2 missed: t={2.2 * scale:.1f}s ttft=- tpot=- failed: http_502 {failed.detail}, "
        f"t={1.5 * scale:.1f}s ttft={9.0 * scale * 1000:.0f} tpot={0.001 * scale * 1000:.0f}"
    )
    with pytest.raises(AssertionError, match="worker decode-1 unreachable"):
        planner_assertions.requests_must_meet_sla(run, 0.0)


def test_nothing_missed_says_so() -> None:
    assert run_of([ok(1.0), ok(2.0)]).misses() == "none missed"
