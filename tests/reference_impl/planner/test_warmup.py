"""Warm-starting the load predictor from a trace (seed 003, Step 2: "All predictors support warm-starting from trace files")."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest

from servecert.protocol.planner_decisions import MemoryDecisionStore
from servecert.reference_impl.planner.config import PlannerConfig, PlannerConfigError
from servecert.reference_impl.planner.connectors.virtual import VirtualConnector
from servecert.reference_impl.planner.planner import Planner, Worker
from servecert.reference_impl.planner.predictors import warmup


def _trace(path: Path, per_window: list[int], window_s: float) -> Path:
    """A Mooncake trace with ``per_window[i]`` arrivals spread over window i."""
    lines = []
    for i, n in enumerate(per_window):
        lines += [json.dumps({"timestamp": (i + (k + 0.5) / n) * window_s * 1000, "input_length": 256, "output_length": 32,
                              "hash_ids": [k]}) for k in range(n)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_trace_becomes_one_rate_per_throughput_window(tmp_path: Path) -> None:
    assert warmup.rates(_trace(tmp_path / "t.jsonl", [6, 12, 18], 6.0), 6.0) == [1.0, 2.0, 3.0]
    assert warmup.rates(_trace(tmp_path / "t.jsonl", [6, 12, 18], 6.0), 12.0) == [1.5, 1.5]


def test_a_bad_trace_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 1}\n{"ts": 2}\n')
    with pytest.raises(PlannerConfigError, match=r"bad.jsonl:2: not a Mooncake trace line"):
        warmup.rates(bad, 6.0)
    with pytest.raises(PlannerConfigError, match="cannot read the warm-up trace"):
        warmup.rates(tmp_path / "missing.jsonl", 6.0)


class NoWorkers:
    def workers(self) -> list[Worker]:
        return []


@pytest.mark.parametrize(("predictor", "check"), [("constant", lambda p: p == pytest.approx(3.0)), ("kalman", lambda p: p > 3.0)])
async def test_the_planner_starts_predicting_from_the_trace(tmp_path: Path, predictor: str, check: object) -> None:
    trace = _trace(tmp_path / "rising.jsonl", [6, 12, 18], 6.0)
    cfg = PlannerConfig(throughput_interval_s=6.0, load_interval_s=2.0, predictor=predictor, warmup_trace=str(trace))
    async with aiohttp.ClientSession() as session:
        warm = Planner(cfg, NoWorkers(), VirtualConnector(MemoryDecisionStore(), 60), session)
        cold = Planner(PlannerConfig(predictor=predictor), NoWorkers(), VirtualConnector(MemoryDecisionStore(), 60), session)
        assert check(warm.predictor.predict())  # type: ignore[operator]  # constant: the last window; kalman: the trend
        assert cold.predictor.predict() == 0.0
