"""``servecert bench flakes`` certifies N times and reports each failure with the test and the assertion that failed it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pytest

from servecert.benchmarks import flakes_bench
from servecert.protocol import waiting

FAKE_CERTIFY = """
import pathlib, sys
report_dir = pathlib.Path(sys.argv[sys.argv.index("--report-dir") + 1])
run = int(report_dir.name.rpartition("-")[2])
failed = [] if run == 2 else ["RouterTopologyDefaultPolicyIsFail"]
core = {"result": "failure" if failed else "success", "failedTests": failed}
(report_dir / "conformance-report.yaml").write_text(
    "profiles:\\n- name: ROUTER-TOPOLOGY\\n  core: " + repr(core).replace("'", '"') + "\\n"
)
if failed:
    print("E   AssertionError: seed 000: the decode was chosen across zones")
sys.exit(1 if failed else 0)
"""


def test_three_runs_count_the_certified_ones_and_name_each_failure_with_its_test_and_assertion(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The loop around ``servecert certify``, with a stand-in that fails runs 1 and 3 the way certify reports a failure."""
    script = tmp_path / "fake_certify.py"
    script.write_text(FAKE_CERTIFY)
    monkeypatch.setattr(flakes_bench, "certify_command", lambda _args, folder: [sys.executable, str(script), "--report-dir", str(folder)])
    args = argparse.Namespace(
        profile="ROUTER-TOPOLOGY", runs=3, implementation="x", env="process", run_test=None, stress=0, neighbour=0, run_timeout=60.0,
        report_dir=tmp_path / "flakes", json=tmp_path / "figures.json",
    )  # fmt: skip
    assert flakes_bench.run(args) == 0
    figures = json.loads((tmp_path / "figures.json").read_text())
    assert (figures["runs"], figures["certified"], figures["failed"]) == (3, 1, 2), figures
    failed = ["RouterTopologyDefaultPolicyIsFail"]
    assert [(f["run"], f["failed_tests"]) for f in figures["failures"]] == [(1, failed), (3, failed)], figures
    assert figures["failures"][0]["assertions"] == ["AssertionError: seed 000: the decode was chosen across zones"]
    assert "run 3/3: NOT certified" in capsys.readouterr().err and (tmp_path / "flakes" / "run-3" / "output.log").is_file()


def test_the_command_is_servecert_certify_with_the_given_options(tmp_path: Path) -> None:
    args = argparse.Namespace(implementation="reference", env="cluster", profile="ROLLOUT-ISOLATION", run_test="RolloutSteps")
    cmd = flakes_bench.certify_command(args, tmp_path)
    assert cmd[1:] == [
        "-m", "servecert", "certify", "--implementation", "reference", "--env", "cluster", "--profile", "ROLLOUT-ISOLATION",
        "--report-dir", str(tmp_path), "--run-test", "RolloutSteps",
    ]  # fmt: skip


def test_all_profiles_is_certify_without_a_profile_and_gathers_every_profiles_failures(tmp_path: Path) -> None:
    args = argparse.Namespace(implementation="reference", env="process", profile=flakes_bench.ALL, run_test=None)
    assert "--profile" not in flakes_bench.certify_command(args, tmp_path)
    report = tmp_path / "conformance-report.yaml"
    report.write_text(
        "profiles:\n- name: A\n  core: {failedTests: [TestA]}\n- name: B\n  core: {failedTests: []}\n  extended: {failedTests: [TestB]}\n"
    )
    assert flakes_bench.failed_tests(flakes_bench.report_profiles(report, flakes_bench.ALL)) == ["TestA", "TestB"]
    assert flakes_bench.failed_tests(flakes_bench.report_profiles(report, "B")) == ["TestB"]


def test_the_neighbour_runs_at_nice_10_and_is_stopped_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "stress"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setattr(flakes_bench.shutil, "which", lambda _: str(fake))
    with flakes_bench.stressed(1, flakes_bench.NEIGHBOUR_NICE):
        pid = int(capsys.readouterr().err.rsplit("(pid ", 1)[1].split(")")[0])
        wanted = min(19, os.getpriority(os.PRIO_PROCESS, 0) + flakes_bench.NEIGHBOUR_NICE)
        # NB: `nice` sets the priority, then execs stress: wait for it (a read before that finds the parent's).
        what = f"the neighbour (pid {pid}) at nice {wanted}"
        waiting.until(lambda: os.getpriority(os.PRIO_PROCESS, pid) == wanted, timeout_s=10.0, what=what)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_assertion_lines_are_pytests_e_lines_deduplicated_and_bounded() -> None:
    repeated = ["x", "E   AssertionError: a", "E   AssertionError: a", "E     detail"]
    output = "\n".join([*repeated, *[f"E   AssertionError: {i}" for i in range(5)]])
    assert flakes_bench.assertion_lines(output) == ["AssertionError: a", "AssertionError: 0", "AssertionError: 1"]


def test_stress_without_debians_stress_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flakes_bench.shutil, "which", lambda _: None)
    with pytest.raises(SystemExit, match="apt-get install stress"), flakes_bench.stressed(2):
        pass


def test_with_run_test_a_run_passes_when_every_selected_test_ran_and_passed() -> None:
    # NB: certify exits 1 with --run-test (the profile's other tests are unrun), so the exit code alone cannot say
    assert flakes_bench.run_passed(1, [], 3, "TestA")
    assert not flakes_bench.run_passed(1, ["TestA"], 2, "TestA")
    assert not flakes_bench.run_passed(1, [], 0, "TestA")  # nothing selected ran
    assert not flakes_bench.run_passed(None, [], 3, "TestA")  # stopped
    assert not flakes_bench.run_passed(2, None, 0, "TestA")  # no report
    assert not flakes_bench.run_passed(1, [], 3, None)
    assert flakes_bench.run_passed(0, [], 3, None)
