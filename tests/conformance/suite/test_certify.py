"""``servecert certify``: exit 0 only when every requested profile's core succeeded, 1 when not, 2 on bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from servecert import cli
from tests.conformance.suite import suite_helpers


def certify(tmp_path: Path, adapter: str, *args: str) -> int:
    return cli.main(
        [
            "certify",
            f"--implementation={suite_helpers.ADAPTER}:{adapter}",
            f"--tests-package={suite_helpers.SAMPLE_TESTS}",
            f"--report-dir={tmp_path / 'report'}",
            *args,
        ]
    )


@pytest.fixture(autouse=True)
def isolated(pytester: pytest.Pytester) -> pytest.Pytester:
    """certify runs pytest in this process: pytester restores sys.modules and the working directory."""
    return pytester


def test_a_conformant_implementation_is_certified_and_the_report_files_are_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert certify(tmp_path, "FULL", "--profile=ROUTER-TOPOLOGY", "--version=v9", "--timeout=request_s=5") == 0
    out = capsys.readouterr().out
    assert "ROUTER-TOPOLOGY core: success (3 passed, 0 failed, 0 skipped)" in out
    # NB: SampleLatency runs only on a cluster, which ROUTER-TOPOLOGY also runs in: judged there, not a skip here.
    assert "ROUTER-TOPOLOGY extended: success (1 passed, 0 failed, 0 skipped)" in out
    report_dir = tmp_path / "report"
    assert {p.name for p in report_dir.iterdir()} == {"allure-results", "conformance-report.yaml", "junit.xml", "summary.html"}
    report = yaml.safe_load((report_dir / "conformance-report.yaml").read_text())
    assert report["implementation"]["version"] == "v9" and report["timeoutOverrides"] == {"request_s": 5.0}
    assert "SampleDeploys" in (report_dir / "junit.xml").read_text()
    [profile] = report["profiles"]
    assert profile["extended"]["judgedElsewhere"] == ["SampleLatency"], profile


def test_a_failing_core_test_means_exit_status_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert certify(tmp_path, "BROKEN") == 1
    assert "ROUTER-TOPOLOGY core: failure (0 passed, 3 failed, 0 skipped)" in capsys.readouterr().out


def test_a_core_skip_also_means_exit_status_1(tmp_path: Path) -> None:
    assert certify(tmp_path, "FULL", "--skip-tests=SampleTopologyUnset") == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--profile=NOPE"],
            "no profile named 'NOPE'; known profiles: "
            "GANG-SCHEDULING, INFERENCESERVICE-API, OPERATOR-TOPOLOGY, PLANNER-SCALING, ROLLOUT-ISOLATION, ROUTER-TOPOLOGY",
        ),
        (
            ["--env=process", "--profile=OPERATOR-TOPOLOGY"],
            "profile OPERATOR-TOPOLOGY does not run in the process environment (it runs in: cluster)",
        ),
        (["--timeout=nap_s=1"], "--timeout: unknown timeout key(s) nap_s; known keys: deploy_ready_s"),
        (["--exempt-features=Nope"], "--exempt-features: unknown feature(s) Nope; known features:"),
        (["--workers=0"], "--workers must be at least 1"),
    ],
    ids=["unknown-profile", "cluster-only-profile", "unknown-timeout", "unknown-feature", "no-workers"],
)
def test_bad_input_is_one_line_on_stderr_and_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert certify(tmp_path, "FULL", *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("servecert certify: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_an_unknown_implementation_names_the_registered_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["certify", "--implementation=no-such-adapter"]) == 2
    err = capsys.readouterr().err
    assert "no implementation named 'no-such-adapter'; registered: " in err
    assert "reference" in err.split("registered: ", 1)[1]


def test_a_run_that_cannot_collect_is_exit_status_2_without_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert certify(tmp_path, "FULL", "--tests-package=tests.conformance.suite.no_such_package") == 2
    assert "the run ended without a report" in capsys.readouterr().err
    assert not (tmp_path / "report" / "conformance-report.yaml").exists()
