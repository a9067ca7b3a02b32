"""``servecert bench pd-routers``: each router's figures under the unchanged load script, and its ratio to the reference."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from servecert.adapters.pd_routers.deployment import installed
from servecert.benchmarks import pd_routers_bench


def test_the_bench_reports_a_ratio_to_the_reference_frontend_measured_in_the_same_run(tmp_path: Path) -> None:
    kind = pd_routers_bench.KINDS["vllm-router"]
    if not installed(kind):
        pytest.skip(f"vllm-router is not installed: {kind.install}")
    parser = argparse.ArgumentParser()
    pd_routers_bench.add_arguments(parser)
    out = tmp_path / "figures.json"
    args = parser.parse_args(
        ["--router", "reference", "--router", "vllm-router", "--concurrency", "2", "--seconds", "1", "--json", str(out)]
    )
    assert pd_routers_bench.run(args) == 0
    figures = json.loads(out.read_text())
    for name in ("reference", "vllm-router"):
        run = figures["routers"][name]["2"]
        assert run["err"] == 0 and run["req_s"] > 0, run
        assert len(figures["routers"][name]["load_average_before"]) == 3
    ratio = figures["ratio_to_reference_req_s"]["vllm-router"]["2"]
    assert ratio == round(figures["routers"]["vllm-router"]["2"]["req_s"] / figures["routers"]["reference"]["2"]["req_s"], 3)
