"""``servecert bench flakes`` certifies N times and reports each failure with the test and the assertion that failed it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import flakes_bench

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_runs_of_a_broken_router_are_two_failures_naming_the_test_and_its_assertion(tmp_path: Path) -> None:
    test = "RouterTopologyDefaultPolicyIsFail"
    cmd = [sys.executable, "-m", "servecert", "bench", "flakes", "--profile", "ROUTER-TOPOLOGY", "--env", "process", "--runs", "2"]
    cmd += ["--implementation", "tests.nonconforming.router:DefaultsToFallback", "--run-test", test, "--report-dir", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(done.stdout)
    assert (figures["runs"], figures["certified"], figures["failed"]) == (2, 0, 2), figures
    assert [f["failed_tests"] for f in figures["failures"]] == [[test], [test]], figures
    assert all(f["assertions"] and f["assertions"][0].startswith("AssertionError") for f in figures["failures"]), figures
    assert "run 2/2: NOT certified" in done.stderr and (tmp_path / "run-2" / "output.log").is_file()


def test_assertion_lines_are_pytests_e_lines_deduplicated_and_bounded() -> None:
    repeated = ["x", "E   AssertionError: a", "E   AssertionError: a", "E     detail"]
    output = "\n".join([*repeated, *[f"E   AssertionError: {i}" for i in range(5)]])
    assert flakes_bench.assertion_lines(output) == ["AssertionError: a", "AssertionError: 0", "AssertionError: 1"]


def test_stress_without_debians_stress_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flakes_bench.shutil, "which", lambda _: None)
    with pytest.raises(SystemExit, match="apt-get install stress"), flakes_bench.stressed(2):
        pass
