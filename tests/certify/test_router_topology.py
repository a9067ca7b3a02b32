"""The suite fails every deliberately broken router, naming the test that caught it, and passes the reference.

Each case runs ``servecert certify`` on the ROUTER-TOPOLOGY profile in a subprocess, exactly as a
vendor would, and reads the report it writes. In the process environment the broken routers are
in-process variants of the reference frontend. On the cluster the same checks run against a DGD
the suite writes and the reference operator deploys: one case of every test (the ``rack`` level;
``make certify`` runs every rack case there and every level in process) and an operator whose
default policy is wrong.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from servecert.harness.cluster.backends import Cluster
from tests.certify.run import certify as certify_subprocess
from tests.certify.run import profile_of

PROFILE = "ROUTER-TOPOLOGY"


def certify(implementation: str, report_dir: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    return certify_subprocess(implementation, report_dir, "--profile", PROFILE, "--env", "process", *args)


def certify_on(cluster: Cluster, implementation: str, report_dir: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    return certify_subprocess(implementation, report_dir, "--profile", PROFILE, "--env", "cluster", *args, cluster_name=cluster.name)


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
    "KeepsFallingBack": "RouterTopologyFallbackKeepsSameDomain",
    "UnlabelledPrefillAnywhere": "RouterTopologyPrefillMissingLabel",
    "MissingLabelsMatch": "RouterTopologyPrefillMissingLabel",
    "RefusesUnlabelledPrefill": "RouterTopologyPrefillMissingLabelFallback",
    "NoPreselection": "RouterTopologyPrefillPreselection",
    "PreselectsUnderFailOnly": "RouterTopologyPrefillPreselection",
    "PreselectsWithoutFallback": "RouterTopologyPrefillPreselection",
    "PreselectsWhenUnset": "RouterTopologyLevelUnsetNoFiltering",
    "PreselectsOnStaleDecodeSet": "RouterTopologyPrefillPreselection",
    "PreselectsOnlyWhenPolicySet": "RouterTopologyPrefillPreselection",
    "PreselectionNeverShrinks": "RouterTopologyPrefillPreselection",
    "PreselectsWithUnlabelledDecode": "RouterTopologyPrefillPreselection",
    "DefaultsToFallback": "RouterTopologyDefaultPolicyIsFail",
    "DefaultErrorDiffers": "RouterTopologyDefaultPolicyIsFail",
    "RetriesDecodeAnywhere": "RouterTopologyFailedDecodeStaysInDomain",
    "RetriesUnreachableDecodeAnywhere": "RouterTopologyFailedDecodeStaysInDomain",
    "RetriesUnaryDecodeAnywhere": "RouterTopologyFailedDecodeStaysInDomain",
    "RetriesSlowDecodeAnywhere": "RouterTopologyFailedDecodeStaysInDomain",
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


RACK_CASES = (
    "RouterTopologyTransfersStayInDomain[rack]",
    "RouterTopologyMatchesTheLevelOnly[rack]",
    "RouterTopologyFailWithoutSameDomainDecode[rack]",
    "RouterTopologyDefaultPolicyIsFail[rack]",
    "RouterTopologyFailedDecodeStaysInDomain[rack]",
    "RouterTopologyFailedDecodeStaysInDomain[rack-crash]",
    "RouterTopologyDecodeJoinsAndLeaves[rack]",
    "RouterTopologyExcludesWorkersMissingLabel[rack]",
    "RouterTopologyFallbackKeepsSameDomain[rack]",
    "RouterTopologyFallbackKeepsSameDomain[rack-joins]",
    "RouterTopologyFallbackRoutesAnywhere[rack]",
    "RouterTopologyPrefillMissingLabel[rack]",
    "RouterTopologyPrefillMissingLabel[rack-decode-unlabelled-too]",
    "RouterTopologyPrefillMissingLabelFallback[rack]",
    "RouterTopologyPrefillPreselection[rack-fail]",
    "RouterTopologyPrefillPreselection[rack-fallback]",
    "RouterTopologyPrefillPreselection[rack-otherwise-all]",
    "RouterTopologyPrefillPreselection[rack-decode-joins]",
    "RouterTopologyPrefillPreselection[rack-decode-leaves]",
    "RouterTopologyLevelUnsetNoFiltering[rack]",
)
"""One case of every core test, at the rack level: a rack test's placements share a zone, so it also shows labels
flowing from each worker's own node (``make certify`` runs every rack case on the cluster, the cluster's one level,
``_placements.CLUSTER_LEVEL``, and every level in process)."""


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.xdist_group("router-cluster")  # NB: heavy, so one at a time; a group of their own balances the two workers
def test_the_reference_passes_every_core_test_on_the_cluster(cluster: Cluster, tmp_path: Path) -> None:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    selected = [arg for name in RACK_CASES for arg in ("--run-test", name)]
    code, report, output = certify_on(cluster, "reference", tmp_path, *selected)
    assert code == 0, output[-3000:]
    core = profile_of(report, PROFILE)["core"]
    assert core["result"] == "success", core
    assert core["statistics"]["skipped"] == 0 and core["statistics"]["failed"] == 0, core


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.xdist_group("router-cluster")
def test_an_operator_defaulting_to_fallback_fails_the_default_policy_test(cluster: Cluster, tmp_path: Path) -> None:
    """The DGD's schema sets no default policy, so the operator's own default reaches the frontend and is judged."""
    caught_by = "RouterTopologyDefaultPolicyIsFail"
    code, report, output = certify_on(cluster, "tests.nonconforming.operator:DefaultsToFallback", tmp_path, "--run-test", caught_by)
    assert code == 1, f"certify must exit 1 for a non-conforming operator, got {code}:\n{output[-3000:]}"
    assert profile_of(report, PROFILE)["core"]["result"] == "failure"
    assert failed_tests(report) == {caught_by}, f"{caught_by} did not fail alone; failed: {sorted(failed_tests(report))}"


ROUTERS = ("vllm-router", "sglang-router")
"""The real P/D routers (``adapters/pd_routers``): on a cluster they find labelled engine pods through their own service discovery."""


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.xdist_group("router-cluster")
@pytest.mark.parametrize("router", ROUTERS)
def test_a_real_router_finds_its_engine_pods_and_passes_level_unset_on_the_cluster(router: str, cluster: Cluster, tmp_path: Path) -> None:
    """Unmodified, started with ``--service-discovery`` and two label selectors: the one core test its features reach passes.

    Its three other core features are not declared (no topology setting), so core is ``partial`` and certify exits 1; no
    test may fail or be skipped for another reason. Joining and leaving happen through the pods alone (create, delete).
    """
    from servecert.adapters.pd_routers import deployment, sglang_router, vllm_router

    kind = vllm_router.VllmRouter() if router == "vllm-router" else sglang_router.SglangRouter()
    if not deployment.installed(kind):
        pytest.skip(f"{kind.name} is not installed: {kind.install}")
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    case = "RouterTopologyLevelUnsetNoFiltering[rack]"
    code, report, output = certify_on(cluster, router, tmp_path, "--run-test", case)
    assert code == 1, f"certify must exit 1 (core partial: three core features undeclared), got {code}:\n{output[-3000:]}"
    core = profile_of(report, PROFILE)["core"]
    assert core["result"] == "partial", core
    passed_failed = (core["statistics"]["passed"], core["statistics"]["failed"])
    assert passed_failed == (1, 0), f"{case} must pass on the cluster: {core}\n{output[-3000:]}"
