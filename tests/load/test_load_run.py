"""``servecert load run`` end to end: locust in subprocesses against a fake engine, then the reports."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
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
    assert summary["verdict"] == {"limits": ["error_rate<=0", "goodput.fraction>=0.95"], "missed": [], "passed": True}
    assert (tmp_path / "locust_stats.csv").is_file() and (tmp_path / "requests.csv").read_text().count("\n") == summary["requests"] + 1
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 4


@pytest.mark.slow
def test_a_run_that_misses_a_limit_exits_1_naming_the_limit_and_the_measured_value(tmp_path: Path) -> None:
    # A deliberately slow engine: every prefill iteration takes 1200 ms in real time (TTFT SLA 1000 ms), decode 5 ms.
    with serve_process("--model", "servecert-planner-model", "--port", "0", "--time-scale", "1", "--timing", "constant:1200:5") as engine:
        done = subprocess.run(
            [sys.executable, "-m", "servecert", "load", "run", "constant", "--host", engine.urls[0], "--duration", "6",
             "--users", "2", "--limit", "ttft_ms.p50<=1000", "--report-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=180, check=False,
        )
    assert done.returncode == 1, done.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["succeeded"] >= 2 and summary["ttft_ms"]["p50"] > 1200, summary
    missed = {line.split(": measured ")[0] for line in done.stderr.splitlines() if line.startswith("servecert load run: missed limit ")}
    assert missed == {"servecert load run: missed limit ttft_ms.p50<=1000", "servecert load run: missed limit goodput.fraction>=0.95"}
    assert f"ttft_ms.p50<=1000: measured {summary['ttft_ms']['p50']:.4g}" in summary["verdict"]["missed"]
    assert "Failed" in (tmp_path / "report.html").read_text()


@pytest.mark.slow
def test_requests_in_flight_when_the_run_ends_finish_and_are_counted(tmp_path: Path) -> None:
    # Each request takes about 32 x 150 ms = 4.8 s and the run 4 s: every user's first request is in flight at its end.
    with serve_process("--model", "servecert-planner-model", "--port", "0", "--time-scale", "1", "--timing", "constant:1:150") as engine:
        done = subprocess.run(
            [sys.executable, "-m", "servecert", "load", "run", "constant", "--host", engine.urls[0], "--duration", "4",
             "--users", "2", "--no-limits", "--report-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=180, check=False,
        )
        with urllib.request.urlopen(engine.urls[0] + "/groundtruth", timeout=10) as resp:
            records = json.loads(resp.read())["records"]
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["outcome"] for r in records] == ["ok"] * len(records) and len(records) >= 2, records
    assert (summary["requests"], summary["failed"], summary["unfinished_at_end"]) == (len(records), 0, 0), summary


def test_a_misspelt_limit_figure_is_refused_before_the_run(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "servecert", "load", "run", "constant", "--host", "http://127.0.0.1:9",
                           "--limit", "ttft_ms.p59<=1000", "--report-dir", str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "did you mean ttft_ms.p99" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "run").exists(), "nothing ran"


def test_a_bad_limit_is_one_line_showing_the_form(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "servecert", "load", "run", "constant", "--host", "http://127.0.0.1:9",
                           "--limit", "ttft<1000"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "FIGURE<=BOUND" in done.stderr and "Traceback" not in done.stderr


def test_an_unknown_profile_is_one_line_listing_the_known_ones(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "servecert", "load", "run", "nope", "--host", "http://127.0.0.1:9"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "known: " in done.stderr and "scaling-step" in done.stderr
