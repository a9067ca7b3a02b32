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


def certify(implementation: str, report_dir: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    return certify_subprocess(implementation, report_dir, "--profile", PROFILE, "--env", "process", *args)


def failed_tests(report: dict[str, Any]) -> set[str]:
    profile = profile_of(report, PROFILE)
    return {*profile["core"]["failedTests"], *profile["extended"]["failedTests"]}


BROKEN = {
    "IgnoresTopology": "RouterTopologyTransfersStayInDomain",
    "FallsBackUnderFail": "RouterTopologyFailWithoutSameDomainDecode",
    "RoutesToUnlabelled": "RouterTopologyExcludesWorkersMissingLabel",
    "FiltersWhenUnset": "RouterTopologyLevelUnsetNoFiltering",
    "ComparesEveryLabel": "RouterTopologyMatchesTheLevelOnly",
    "ComparesTheHost": "RouterTopologyMatchesTheLevelOnly",
    "FallsBackNearby": "RouterTopologyFallbackRoutesAnywhere",
    "FallsBackSilently": "RouterTopologyFallbackRoutesAnywhere",
    "UnlabelledPrefillAnywhere": "RouterTopologyPrefillMissingLabel",
    "RefusesUnlabelledPrefill": "RouterTopologyPrefillMissingLabelFallback",
    "NoPreselection": "RouterTopologyPrefillPreselection",
    "PreselectsUnderFailOnly": "RouterTopologyPrefillPreselection",
    "PreselectsWithoutFallback": "RouterTopologyPrefillPreselection",
    "PreselectsWhenUnset": "RouterTopologyLevelUnsetNoFiltering",
    "DefaultsToFallback": "RouterTopologyDefaultPolicyIsFail",
    "RetriesDecodeAnywhere": "RouterTopologyFailedDecodeStaysInDomain",
    "KeepsLeftDecode": "RouterTopologyDecodeJoinsAndLeaves",
}
"""Each broken router (``tests.nonconforming.router``) and the one test of the rule it breaks."""


@pytest.mark.slow
@pytest.mark.parametrize(("broken", "caught_by"), sorted(BROKEN.items()), ids=sorted(BROKEN))
def test_a_router_breaking_a_rule_is_failed_by_the_test_for_that_rule(broken: str, caught_by: str, tmp_path: Path) -> None:
    # NB: focused on the rule's own test: that test alone must fail it, in core.
    code, report, output = certify(f"tests.nonconforming.router:{broken}", tmp_path, "--run-test", caught_by)
    assert code == 1, f"certify must exit 1 for a non-conforming router, got {code}:\n{output[-3000:]}"
    profile = profile_of(report, PROFILE)
    assert profile["core"]["result"] == "failure", profile["core"]
    assert failed_tests(report) == {caught_by}, f"{caught_by} did not fail alone; failed: {sorted(failed_tests(report))}"


@pytest.mark.slow
def test_the_reference_router_passes_the_whole_profile(tmp_path: Path) -> None:
    code, report, output = certify("reference", tmp_path)
    assert code == 0, output[-3000:]
    profile = profile_of(report, PROFILE)
    assert (profile["core"]["result"], profile["extended"]["result"]) == ("success", "success")
    assert profile["core"]["statistics"]["failed"] == 0
    for name in ("summary.html", "junit.xml"):
        assert (tmp_path / name).is_file()
    assert any((tmp_path / "allure-results").iterdir())
