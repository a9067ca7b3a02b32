"""The pytest face: one item per (test, case), verdicts as skips with reasons, profiles, xdist."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servecert import features
from servecert.conformance import plugin
from servecert.conformance.suite import profiles
from tests.conformance.suite import suite_helpers


def test_each_case_is_one_item_named_after_the_test_and_the_case(pytester: pytest.Pytester) -> None:
    result = suite_helpers.run_suite(pytester, "FULL", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "*test_conformance.py::SampleDeploys[[]one-worker[]]",
            "*test_conformance.py::SampleDeploys[[]two-workers[]]",
            "*test_conformance.py::SampleError503[[]default[]]",
            "*test_conformance.py::SampleLatency[[]default[]]",
            "*test_conformance.py::SamplePreferredWeight[[]default[]]",
            "*test_conformance.py::SampleTopologyFilter[[]default[]]",
            "*test_conformance.py::SampleTopologyUnset[[]default[]]",
            "7 tests collected*",
        ]
    )


def test_verdicts_become_skips_with_their_reasons(pytester: pytest.Pytester) -> None:
    result = suite_helpers.run_suite(pytester, "CORE_ONLY", "--skip-tests=SampleTopologyUnset")
    result.assert_outcomes(passed=3, skipped=4)
    result.stdout.fnmatch_lines_random(
        [
            "SKIPPED * SampleError503[[]default[]]: provisional-skipped: provisional test; pass --include-provisional to run it",
            "SKIPPED * SamplePreferredWeight[[]default[]]: not-supported: unsupported feature(s): KVTransferTopologyPreferredWeight",
            "SKIPPED * SampleLatency[[]default[]]: wrong-environment: runs only in: cluster; this run uses process*",
            "SKIPPED * SampleTopologyUnset[[]default[]]: skipped: listed in --skip-tests",
        ]
    )


def test_run_test_focuses_one_test_and_runs_it_although_its_feature_is_unsupported(pytester: pytest.Pytester) -> None:
    result = suite_helpers.run_suite(pytester, "CORE_ONLY", "--run-test=SamplePreferredWeight", "-v")
    result.assert_outcomes(passed=1, skipped=6)
    result.stdout.fnmatch_lines(["*SamplePreferredWeight[[]default[]] PASSED*"])
    result.stdout.fnmatch_lines(["SKIPPED * SampleDeploys[[]one-worker[]]: skipped: not selected by --run-test"])


def test_include_provisional_runs_provisional_tests(pytester: pytest.Pytester) -> None:
    result = suite_helpers.run_suite(pytester, "FULL", "--include-provisional", "-v")
    result.stdout.fnmatch_lines(["*SampleError503[[]default[]] PASSED*"])


def test_a_failing_check_fails_its_item_with_the_checks_own_traceback(pytester: pytest.Pytester) -> None:
    result = suite_helpers.run_suite(pytester, "BROKEN", "--run-test=SampleTopologyFilter")
    result.assert_outcomes(failed=1, skipped=6)
    result.stdout.fnmatch_lines(["E * AssertionError: frontend http://wrong.sample.invalid, expected http://frontend.sample.invalid"])
    result.stdout.no_fnmatch_line("*runner.py*")


def test_only_tests_of_the_requested_profiles_are_collected(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    only_core = profiles.Profile(
        "SAMPLE-CORE",
        core=frozenset({features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER}),
        extended=frozenset(),
        environments=frozenset({"process"}),
    )
    monkeypatch.setitem(profiles.PROFILES, only_core.name, only_core)
    result = suite_helpers.run_suite(pytester, "FULL", "--profile=SAMPLE-CORE", "--collect-only", "-q")
    result.stdout.fnmatch_lines(
        ["*SampleDeploys[[]one-worker[]]", "*SampleDeploys[[]two-workers[]]", "*SampleTopologyFilter[[]default[]]", "3 tests*"]
    )


def test_without_an_implementation_no_conformance_test_is_collected(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest(*suite_helpers.INNER, "-p", "no:asyncio")
    result.assert_outcomes(passed=1)
    result.stdout.no_fnmatch_line("servecert:*")


def test_the_collector_module_without_an_implementation_says_what_is_missing(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(str(plugin.COLLECTOR), *suite_helpers.INNER)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["servecert: test_conformance.py collects nothing without --implementation NAME*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--implementation=nowhere:Nothing"], "ERROR: cannot load implementation 'nowhere:Nothing'*"),
        (["--implementation=nope"], "ERROR: no implementation named 'nope'; registered: *"),
        (
            ["--implementation=tests.conformance.suite.sample_adapter:FULL", "--profile=NOPE"],
            "ERROR: no profile named 'NOPE'; known profiles: "
            "GANG-SCHEDULING, INFERENCESERVICE-API, OPERATOR-TOPOLOGY, PLANNER-SCALING, ROLLOUT-ISOLATION, ROUTER-TOPOLOGY*",
        ),
        (
            ["--implementation=tests.conformance.suite.sample_adapter:FULL", "--env=process", "--profile=OPERATOR-TOPOLOGY"],
            "ERROR: profile OPERATOR-TOPOLOGY does not run in the process environment*",
        ),
        (
            ["--implementation=tests.conformance.suite.sample_adapter:FULL", "--timeout-override=nap_s=1"],
            "ERROR: --timeout-override: unknown timeout key*",
        ),
    ],
    ids=["unloadable-module", "unregistered-name", "unknown-profile", "cluster-only-profile", "unknown-timeout"],
)
def test_bad_options_are_usage_errors_naming_what_exists(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    result = pytester.runpytest(*suite_helpers.INNER, "-p", "no:asyncio", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_an_unknown_name_in_skip_tests_is_a_collection_error(pytester: pytest.Pytester) -> None:
    result = suite_helpers.run_suite(pytester, "FULL", "--skip-tests=SampleDeploy")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*--skip-tests/--run-test name unknown tests: SampleDeploy; known tests: SampleDeploys*"])


def test_report_files_are_written_when_a_report_dir_is_given(pytester: pytest.Pytester, tmp_path: Path) -> None:
    suite_helpers.run_suite(pytester, "FULL", f"--report-dir={tmp_path}", "--organization=Acme", "--contact=a@acme.invalid")
    report = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())
    assert report["implementation"]["organization"] == "Acme" and report["implementation"]["contact"] == ["a@acme.invalid"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["allure-results", "conformance-report.yaml", "junit.xml", "summary.html"]


def test_results_from_xdist_workers_are_merged_into_one_report(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result = suite_helpers.run_suite(pytester, "FULL", "-n", "2", f"--report-dir={tmp_path}", "--include-provisional")
    result.assert_outcomes(passed=6, skipped=1)
    profiles = yaml.safe_load((tmp_path / "conformance-report.yaml").read_text())["profiles"]
    [profile] = [p for p in profiles if p["name"] == "ROUTER-TOPOLOGY"]
    assert profile["core"]["statistics"] == {"passed": 3, "failed": 0, "skipped": 0}
    # NB: the cluster-only SampleLatency is judged elsewhere in this process run (listed, not counted).
    assert profile["extended"]["statistics"] == {"passed": 2, "failed": 0, "skipped": 0}
    assert profile["extended"]["judgedElsewhere"] == ["SampleLatency"], profile["extended"]
