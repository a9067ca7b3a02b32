"""The planner demo's GPU-seconds bound and the nightly history: one point per night, a page with the trend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servecert.benchmarks import nightly
from servecert.load import profiles

GPUS = {"prefill": 1, "decode": 2}


def test_the_bound_is_the_least_workers_for_the_offered_load_plus_one_of_each() -> None:
    constant = profiles.get("constant")  # 12 users x 0.4 = 4.8 requests/s: 4 engines' worth at 1.2 each, so 5 of each
    assert nightly.gpu_seconds_bound(constant, 12, 1.0, GPUS, 1.2) == pytest.approx(5 * 3 * 300)
    assert nightly.gpu_seconds_bound(constant, 12, 2.0, GPUS, 1.2) == pytest.approx(3 * 3 * 600)  # 2.4/s simulated, 300 s x 2
    half = profiles.get("rollout")  # 50% of peak: 2.4/s -> 2 engines' worth, 3 of each
    assert nightly.gpu_seconds_bound(half, 12, 1.0, GPUS, 1.2) == pytest.approx(3 * 3 * 600)
    diurnal = nightly.gpu_seconds_bound(profiles.get("diurnal"), 12, 1.0, GPUS, 1.2)
    assert diurnal is not None and 2 * 3 * 300 < diurnal < 5 * 3 * 300
    assert nightly.gpu_seconds_bound(profiles.get("trace"), 32, 1.0, GPUS, 1.2) is None


def test_only_gpu_seconds_over_the_bound_are_missed() -> None:
    assert nightly.gpu_seconds_missed(900.0, 1000.0) == [] and nightly.gpu_seconds_missed(900.0, None) == []
    assert nightly.gpu_seconds_missed(1200.0, 1000.0)[0].endswith("measured 1200")


def test_each_night_adds_a_point_and_the_page_shows_the_verdict_and_the_trend(tmp_path: Path) -> None:
    night = {"date": "2026-11-24", "passed": True, "missed": [], "sla_attainment": 0.97, "sla_attainment_bound": 0.95,
             "error_rate": 0.0, "gpu_seconds": 900.0, "gpu_seconds_bound": 1000.0}
    nightly.record(tmp_path, night)
    bad = {**night, "date": "2026-11-25", "passed": False, "missed": ["goodput.fraction>=0.95: measured 0.9"]}
    history = nightly.record(tmp_path, bad)
    assert [p["date"] for p in history] == ["2026-11-24", "2026-11-25"]
    assert len((tmp_path / nightly.HISTORY).read_text().splitlines()) == 2 and json.loads(
        (tmp_path / nightly.HISTORY).read_text().splitlines()[1])["passed"] is False
    page = nightly.write_page(tmp_path, bad, history).read_text()
    assert "Failed" in page and "goodput.fraction&gt;=0.95: measured 0.9" in page
    assert "Trend over 2 nights" in page and page.count("data:image/png;base64,") == 1


@pytest.mark.slow
def test_a_short_nightly_writes_its_verdict_and_adds_a_point_to_the_trend(tmp_path: Path) -> None:
    import subprocess
    import sys

    night = tmp_path / "nightly" / "2026-11-26"
    done = subprocess.run([sys.executable, "-m", "servecert", "planner", "demo", "--load", "nightly", "--duration", "8",
                           "--report-dir", str(night)], capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    (point,) = [json.loads(line) for line in (night.parent / nightly.HISTORY).read_text().splitlines()]
    side = json.loads((night / "side_by_side.json").read_text())
    assert point["passed"] is (done.returncode == 0) is side["passed"] and bool(point["missed"]) is (done.returncode == 1)
    assert point["gpu_seconds"] == side["gpu_seconds_simulated"] > 0 and point["gpu_seconds_bound"] > 0
    assert point["requests"] > 0 and point["error_rate"] is not None
    verdict = "passed" if done.returncode == 0 else "FAILED"
    assert f"servecert planner demo: {verdict}" in done.stderr
    assert "Trend over 1 nights" in (night / nightly.PAGE).read_text()
