"""Exact timing of a stream and the summary computed from exact samples."""

from __future__ import annotations

import pytest

from servecert.load import sse
from servecert.load.metrics import Sample, Thresholds, summarise


def _chunk(text: str, finish: str | None = None) -> bytes:
    import json

    return b"data: " + json.dumps({"choices": [{"text": text, "finish_reason": finish}]}).encode()


def test_stream_timing_is_exact_per_token() -> None:
    t = sse.StreamTiming(sent=10.0)
    for at, line in ((10.2, _chunk("a")), (10.25, _chunk("b")), (10.35, _chunk("c")), (10.4, _chunk("", "length")),
                     (10.4, b"data: [DONE]")):
        t.feed(line, at)
    t.finish(10.4)
    assert t.tokens == 3 and not t.error
    assert t.ttft_s == pytest.approx(0.2)
    assert t.itls_s == pytest.approx([0.05, 0.1])
    assert t.tpot_s == pytest.approx(0.075)


def test_errors_are_kept_by_kind() -> None:
    cut = sse.StreamTiming(sent=0.0)
    cut.feed(_chunk("a"), 0.1)
    cut.finish(0.2)
    assert cut.error == sse.STREAM_CUT
    err = sse.StreamTiming(sent=0.0)
    err.feed(b'data: {"error": {"code": "upstream_cut"}}', 0.1)
    err.feed(b"data: [DONE]", 0.1)
    err.finish(0.1)
    assert (err.error, err.error_detail) == (sse.STREAM_ERROR, "upstream_cut")


def test_summary_percentiles_are_exact_and_goodput_counts_both_thresholds() -> None:
    samples = [
        Sample(float(i), True, "", ttft_ms=float(i), tpot_ms=10.0 + i % 2 * 30, e2e_ms=100.0, output_tokens=8) for i in range(1, 101)
    ]
    samples.append(Sample(200.0, False, "http_503", None, None, 1.0, 0))
    s = summarise(samples, Thresholds(ttft_ms=50.0, itl_ms=20.0))
    assert s["ttft_ms"]["p50"] == pytest.approx(50.5)
    assert s["errors"] == {"http_503": 1}
    assert s["goodput"]["requests"] == 25  # ttft <= 50 and the even-indexed (tpot 10) half of them


def test_a_request_the_run_cut_at_its_end_is_counted_apart_not_as_a_failure() -> None:
    ok = Sample(start=0.0, ok=True, error="", ttft_ms=5.0, tpot_ms=1.0, e2e_ms=20.0, output_tokens=4)
    cut = Sample(start=1.0, ok=False, error=sse.CUT_AT_END, ttft_ms=5.0, tpot_ms=None, e2e_ms=60_000.0, output_tokens=2)
    summary = summarise([ok, cut, cut], Thresholds())
    assert (summary["requests"], summary["failed"], summary["error_rate"], summary["unfinished_at_end"]) == (1, 0, 0.0, 2)
    assert summarise([cut], Thresholds()) == {"requests": 0, "unfinished_at_end": 1}
