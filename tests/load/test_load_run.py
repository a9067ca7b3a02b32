"""``servecert load run`` end to end: locust in subprocesses against a fake engine, then the reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import serve_process


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 1], ids=["one-process", "distributed-1-worker"])
def test_a_load_run_writes_csv_json_and_an_html_page_with_plots(workers: int, tmp_path: Path) -> None:
    with serve_process("--model", "servecert-planner-model", "--port", "0", "--time-scale", "0") as engine:
        done = subprocess.run(
            [sys.executable, "-m", "servecert", "load", "run", "step", "--host", engine.urls[0], "--duration", "6",
             "--users", "4", "--workers", str(workers), "--report-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=180, check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["requests"] >= 3 and summary["failed"] == 0, summary
    assert summary["ttft_ms"]["p50"] > 0 and summary["goodput"]["thresholds_ms"] == {"ttft_ms": 1000.0, "itl_ms": 100.0}
    assert (tmp_path / "locust_stats.csv").is_file() and (tmp_path / "requests.csv").read_text().count("\n") == summary["requests"] + 1
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4


def test_an_unknown_profile_is_one_line_listing_the_known_ones(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "servecert", "load", "run", "nope", "--host", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "known: " in done.stderr and "scaling-step" in done.stderr
