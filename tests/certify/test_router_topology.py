"""The suite fails every deliberately broken router, naming the test that caught it, and passes the reference.

Each case runs ``servecert certify`` on the ROUTER-TOPOLOGY profile in a subprocess, exactly as a
vendor would, and reads the report it writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.certify.run import certify as certify_subprocess
from tests.certify.run import profile_of

PROFILE = "ROUTER-TOPOLOGY"


def certify(implementation: str, report_dir: Path) -> tuple[int, dict[str, Any], str]:
    return certify_subprocess(implementation, report_dir, "--profile", PROFILE, "--env", "process")


def failed_tests(report: dict[str, Any]) -> set[str]:
    profile = profile_of(report, PROFILE)
    return {*profile["core"]["failedTests"], *profile["extended"]["failedTests"]}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("adapter", "caught_by"),
    [
        ("tests.nonconforming.router:IgnoresTopology", "RouterTopologyTransfersStayInDomain"),
        ("tests.nonconforming.router:FallsBackUnderFail", "RouterTopologyFailWithoutSameDomainDecode"),
        ("tests.nonconforming.router:RoutesToUnlabelled", "RouterTopologyExcludesWorkersMissingLabel"),
        ("tests.nonconforming.router:FiltersWhenUnset", "RouterTopologyLevelUnsetNoFiltering"),
    ],
    ids=["ignores-topology", "falls-back-under-fail", "routes-to-unlabelled", "filters-when-unset"],
)
def test_a_router_breaking_a_rule_is_failed_by_the_test_for_that_rule(adapter: str, caught_by: str, tmp_path: Path) -> None:
    code, report, output = certify(adapter, tmp_path)
    assert code == 1, f"certify must exit 1 for a non-conforming router, got {code}:\n{output[-3000:]}"
    [profile] = [p for p in report["profiles"] if p["name"] == PROFILE]
    assert profile["core"]["result"] == "failure"
    assert caught_by in failed_tests(report), f"{caught_by} did not fail; failed: {sorted(failed_tests(report))}"


@pytest.mark.slow
def test_the_reference_router_passes_the_whole_profile(tmp_path: Path) -> None:
    code, report, output = certify("reference", tmp_path)
    assert code == 0, output[-3000:]
    [profile] = [p for p in report["profiles"] if p["name"] == PROFILE]
    assert (profile["core"]["result"], profile["extended"]["result"]) == ("success", "success")
    assert profile["core"]["statistics"]["failed"] == 0
    for name in ("summary.html", "junit.xml"):
        assert (tmp_path / name).is_file()
    assert any((tmp_path / "allure-results").iterdir())
