"""``servecert bench planner``'s figures: one row per scenario run, each planner's GPU-seconds over the baseline's."""

from __future__ import annotations

from typing import Any

from servecert.benchmarks import planner_bench


def scenario(test: str, within: float, gpu_seconds: float) -> dict[str, Any]:
    return {"test": test, "scenario": test.split("[", maxsplit=1)[0], "within_sla": within, "judged_within_sla": within,
            "gpu_seconds": gpu_seconds, "peak_workers": {"prefill": 2, "decode": 3}, "decisions": 4, "requests": 100}


def test_rows_pair_the_planners_runs_of_one_scenario_and_compare_with_the_baseline() -> None:
    results = {
        "reference": {"scenarios": [scenario("step[default]", 0.99, 400.0), scenario("burst[burst]", 1.0, 300.0)]},
        "other": {"scenarios": [scenario("step[default]", 0.7, 300.0)]},
    }
    rows = planner_bench.side_by_side(results, "reference")
    step = next(r for r in rows if r["test"] == "step[default]")
    assert step["other"]["gpu_seconds_vs_baseline"] == 0.75 and step["reference"]["gpu_seconds_vs_baseline"] == 1.0
    burst = next(r for r in rows if r["test"] == "burst[burst]")
    assert "other" not in burst
    text = planner_bench.table(rows, ["reference", "other"])
    assert "not run" in text and "70.0% / 70.0%, 300 (x0.75)" in text
