"""Limits on a load run's summary: syntax, which figure, missed or met, and a run that measured nothing."""

from __future__ import annotations

import pytest

from servecert.load import verdict
from servecert.load.metrics import Sample, Thresholds, summarise
from servecert.load.verdict import Limit


def _summary(ttft_ms: float, failed: int = 0) -> dict[str, object]:
    ok = [Sample(float(i), True, "", ttft_ms, 40.0, ttft_ms + 1200, 32) for i in range(20)]
    bad = [Sample(20.0 + i, False, "http_503", None, None, 5.0, 0) for i in range(failed)]
    return summarise(ok + bad, Thresholds(1000.0, 100.0))


def test_a_limit_reads_figure_operator_and_bound() -> None:
    assert Limit.parse(" ttft_ms.p95 <= 1000 ") == Limit("ttft_ms.p95", "<=", 1000.0)
    assert str(Limit.parse("goodput.fraction>=0.95")) == "goodput.fraction>=0.95"
    for bad in ("ttft_ms.p95 < 1000", "p95", "ttft_ms.p95<=fast", "ttft_ms.p95<=1.2.3"):
        with pytest.raises(verdict.LimitSyntaxError, match=r"FIGURE<=BOUND|not a number"):
            Limit.parse(bad)


def test_each_missed_limit_names_itself_and_the_measured_value() -> None:
    limits = [Limit.parse(t) for t in ("ttft_ms.p95<=1000", "error_rate<=0", "goodput.fraction>=0.95", "tpot_ms.p99<=100")]
    assert verdict.judge(_summary(900.0), limits) == []
    missed = verdict.judge(_summary(1500.0, failed=2), limits)
    assert missed == ["ttft_ms.p95<=1000: measured 1500", "error_rate<=0: measured 0.09091", "goodput.fraction>=0.95: measured 0"]


def test_a_figure_the_run_did_not_measure_is_missed() -> None:
    nothing = summarise([Sample(0.0, False, "transport", None, None, 3.0, 0)], Thresholds(1000.0, 100.0))
    assert verdict.judge(nothing, [Limit.parse("ttft_ms.p95<=1000")]) == [
        "ttft_ms.p95<=1000: not measured (the run has no ttft_ms.p95: 0 requests succeeded)"
    ]
    assert verdict.judge(nothing, [Limit.parse("ttft_ms.p95x<=1")])[0].startswith("ttft_ms.p95x<=1: not measured")


def test_an_override_replaces_the_profiles_limit_on_its_figure_and_adds_the_rest() -> None:
    limits = verdict.merged(("error_rate<=0", "goodput.fraction>=0.95"), ("goodput.fraction>=0.5", "itl_ms.p99<=150"))
    assert [str(x) for x in limits] == ["error_rate<=0", "goodput.fraction>=0.5", "itl_ms.p99<=150"]
