"""``servecert bench clients``: AIPerf's token counts against the engine's usage and ground truth.

The first test reads AIPerf-shaped artifacts written here, so the agreement figures are shown to
catch a disagreement without AIPerf. The second runs the bench for real when AIPerf is installed
(``SERVECERT_AIPERF`` or ``aiperf`` on PATH) and otherwise skips, saying how to install it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from servecert.benchmarks import clients_bench

NEAR_ZERO = 0.05
"""The most of a real client's prompt tokens the engines may serve from cache: its prompts are random text (the suite's)."""


def _record(output: int, usage_out: int, isl: int, usage_in: int) -> dict[str, Any]:
    values = {"output_token_count": output, "usage_completion_tokens": usage_out}
    values |= {"input_sequence_length": isl, "usage_prompt_tokens": usage_in}
    return {"metadata": {}, "metrics": {k: {"value": v, "unit": "tokens"} for k, v in values.items()}}


def _artifacts(folder: Path, records: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True)
    stats = {"p50": 1.0, "p99": 2.0, "avg": 32.0}
    summary = {"time_to_first_token": stats, "inter_token_latency": stats, "output_sequence_length": stats}
    (folder / "profile_export_aiperf.json").write_text(json.dumps(summary))
    (folder / "profile_export.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_a_request_whose_counts_disagree_is_counted(tmp_path: Path) -> None:
    truth = [{"outcome": "ok", "completion_tokens": n, "prompt_tokens": 550, "cached_tokens": c} for n, c in ((32, 0), (30, 110))]
    agreeing = _artifacts(tmp_path / "a", [_record(32, 32, 550, 550), _record(30, 30, 550, 550)])
    fig = clients_bench.aiperf_figures(agreeing, truth)
    assert (fig["output_vs_usage_mismatches"], fig["input_vs_usage_mismatches"]) == (0, 0)
    assert fig["output_equals_ground_truth"] and fig["input_equals_ground_truth"]
    assert fig["prompt_cached_share"] == 110 / 1100
    # NB: AIPerf's first run here: 8 client tokens for every completion, 550 for prompts the engine counted 1652.
    off = _artifacts(tmp_path / "b", [_record(8, 32, 550, 1652), _record(30, 30, 550, 550)])
    fig = clients_bench.aiperf_figures(off, truth)
    assert (fig["output_vs_usage_mismatches"], fig["input_vs_usage_mismatches"]) == (1, 1)
    assert not fig["output_equals_ground_truth"]


def _guidellm_export(path: Path, counts: list[tuple[int, int]]) -> Path:
    stats = {"successful": {"percentiles": {"p50": 1.0, "p99": 2.0}, "mean": 16.0}}
    requests = [{"input_metrics": {"text_tokens": i}, "output_metrics": {"text_tokens": o}} for i, o in counts]
    bench = {
        "requests": {"successful": requests, "errored": [], "incomplete": []},
        "metrics": {"time_to_first_token_ms": stats, "inter_token_latency_ms": stats, "output_token_count": stats},
    }
    path.write_text(json.dumps({"benchmarks": [bench]}))
    return path


def test_a_guidellm_prompt_the_engine_counted_otherwise_than_built_is_counted(tmp_path: Path) -> None:
    built = clients_bench.GUIDELLM_PROMPT_TOKENS + clients_bench.CHAT_MARKERS
    truth = [{"outcome": "ok", "completion_tokens": 16, "prompt_tokens": built, "cached_tokens": 0} for _ in range(2)]
    fig = clients_bench.guidellm_figures(_guidellm_export(tmp_path / "a.json", [(built, 16)] * 2), truth)
    assert fig["prompts_not_as_built"] == 0 and fig["output_equals_ground_truth"] and fig["input_equals_ground_truth"]
    # NB: GuideLLM 0.8.1's first run here: an empty prompt (unk skipped as special), 2 tokens in usage for 64 asked.
    truth[0]["prompt_tokens"] = clients_bench.CHAT_MARKERS
    fig = clients_bench.guidellm_figures(_guidellm_export(tmp_path / "b.json", [(clients_bench.CHAT_MARKERS, 16), (built, 16)]), truth)
    assert fig["prompts_not_as_built"] == 1 and fig["input_equals_ground_truth"]


def _aiperf() -> str | None:
    return os.environ.get("SERVECERT_AIPERF") or shutil.which("aiperf")


@pytest.mark.timeout(600)
def test_aiperfs_token_counts_equal_the_engines_on_every_request() -> None:
    exe = _aiperf()
    if exe is None:
        pytest.skip(f"AIPerf is not installed: {clients_bench.AIPERF_INSTALL}; then SERVECERT_AIPERF=~/aiperf/bin/aiperf")
    guidellm = os.environ.get("SERVECERT_GUIDELLM")  # NB: optional; the bench leaves GuideLLM out without it
    args = argparse.Namespace(
        requests=60, concurrency=4, output_tokens=24, load_seconds=5.0, aiperf=Path(exe), guidellm=guidellm and Path(guidellm), json=None
    )
    results = clients_bench.measure(args)
    for name in ("aiperf/frontend", "aiperf/engine"):
        fig = results[name]
        assert fig["requests"] == 60 and fig["errors"] == 0, fig
        assert (fig["output_vs_usage_mismatches"], fig["input_vs_usage_mismatches"]) == (0, 0), fig
        assert fig["output_equals_ground_truth"] and fig["input_equals_ground_truth"], fig
        assert fig["prompt_cached_share"] < NEAR_ZERO, fig  # NB: AIPerf's prompts are its corpus's text, not "unk unk ..."
    for name in ("guidellm/frontend", "guidellm/engine") if guidellm else ():
        fig = results[name]
        assert fig["requests"] == 60 and fig["errors"] == 0 and fig["prompts_not_as_built"] == 0, fig
        assert fig["output_equals_ground_truth"] and fig["input_equals_ground_truth"], fig
        assert fig["prompt_cached_share"] < NEAR_ZERO, fig
