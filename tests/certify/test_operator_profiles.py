"""`servecert certify --env cluster` on the shared cluster: the reference passes both profiles, broken operators fail.

Each run is a subprocess, as a vendor would run it, joining this session's embedded cluster
by name (``SERVECERT_CLUSTER_NAME``) instead of starting its own; each installs its own operator
instance, so runs on two xdist workers do not interfere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from servecert.harness.cluster.backends import Cluster
from tests.certify.run import certify as certify_subprocess
from tests.certify.run import profile_of

pytestmark = pytest.mark.cluster
PROFILES = ("OPERATOR-TOPOLOGY", "INFERENCESERVICE-API")
# NB: the PodGroup the broken operator writes never matches, so each of the three gang stories waited the whole
# operator_reconcile_s (30 s) to say so: 102 s of make test. The reference converges in well under a second.
SHORTER = {
    "tests.nonconforming.operator:WrongTaskKeys": ("--timeout", "operator_reconcile_s=10"),
    # NB: its pods never change, so the case waits the whole bound; the reference replaces story 3's in about 6 s
    "tests.nonconforming.operator:IgnoresUpdates": ("--timeout", "inference_service_update_s=10"),
    # NB: each waits the whole bound at the step its shortcut gets wrong; the reference follows each step in about a second
    "tests.nonconforming.operator:ReadyByLeader": ("--timeout", "operator_reconcile_s=10"),
    "tests.nonconforming.operator:ReadyByPodCount": ("--timeout", "operator_reconcile_s=10"),
    "tests.nonconforming.operator:NeverUnknown": ("--timeout", "operator_reconcile_s=10"),
    "tests.nonconforming.operator:ReadyByExistingPods": ("--timeout", "operator_reconcile_s=10"),
    "tests.nonconforming.operator:TerminatingServes": ("--timeout", "operator_reconcile_s=10"),
    "tests.nonconforming.operator:NoLeaderService": ("--timeout", "operator_reconcile_s=10"),
}
CASE = {
    # NB: story 3's four-pod replicas are where a pod-by-pod update shows (story 2's replicas are one pod each)
    "tests.nonconforming.operator:IgnoresUpdates": "InferenceServiceRollingUpdate[story3]",
    "tests.nonconforming.operator:RollsPodByPod": "InferenceServiceRollingUpdate[story3]",
    "tests.nonconforming.operator:ReadyByLeader": "InferenceServiceReplicaReadiness[story3]",
    "tests.nonconforming.operator:ReadyByPodCount": "InferenceServiceReplicaReadiness[story3]",
    "tests.nonconforming.operator:NeverUnknown": "InferenceServiceReplicaReadiness[story3]",
    "tests.nonconforming.operator:ReadyByExistingPods": "InferenceServiceReplicaReadiness[story3]",
    "tests.nonconforming.operator:TerminatingServes": "InferenceServiceReplicaReadiness[story3]",
    "tests.nonconforming.operator:NoLeaderService": "InferenceServiceLeaderAddress[story3]",
}


def certify(cluster: Cluster, implementation: str, report_dir: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    profiles = [arg for name in PROFILES for arg in ("--profile", name)]
    return certify_subprocess(implementation, report_dir, "--env", "cluster", *profiles, *extra, cluster_name=cluster.name)


@pytest.mark.slow
@pytest.mark.xdist_group("certify")  # NB: certify runs are heavy; one at a time on one worker
def test_the_reference_operator_is_certified_on_both_profiles(cluster: Cluster, tmp_path: Path) -> None:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    code, report, output = certify(cluster, "reference", tmp_path, "--workers", "1")
    assert code == 0, output[-3000:]
    for name, tests in zip(PROFILES, (6, 6), strict=True):
        core = profile_of(report, name)["core"]
        assert core["result"] == "success", core
        assert core["statistics"]["passed"] == tests and core["statistics"]["skipped"] == 0, core


@pytest.mark.slow
@pytest.mark.xdist_group("certify")
@pytest.mark.parametrize(
    ("adapter", "profile", "caught_by"),
    [
        ("tests.nonconforming.operator:WrongTaskKeys", "INFERENCESERVICE-API", "InferenceServicePodGroup"),
        ("tests.nonconforming.operator:LabelsBeforeBinding", "OPERATOR-TOPOLOGY", "OperatorTopologyLabelsAfterBinding"),
        ("tests.nonconforming.operator:LabelsFromWrongNode", "OPERATOR-TOPOLOGY", "OperatorTopologyLabelsAfterBinding"),
        ("tests.nonconforming.operator:AcceptsBadLevel", "OPERATOR-TOPOLOGY", "OperatorTopologyAdmission"),
        ("tests.nonconforming.operator:AcceptsMissingTopology", "OPERATOR-TOPOLOGY", "OperatorTopologyAdmission"),
        ("tests.nonconforming.operator:AcceptsTopologyOnWorkers", "OPERATOR-TOPOLOGY", "OperatorTopologyAdmission"),
        ("tests.nonconforming.operator:RefusesTopologyOnPdOnly", "OPERATOR-TOPOLOGY", "OperatorTopologyAdmission"),
        ("tests.nonconforming.operator:AdmitsWithoutGrove", "OPERATOR-TOPOLOGY", "OperatorTopologyAdmissionWithoutGrove"),
        ("tests.nonconforming.operator:AdmitsFallbackWithoutGrove", "OPERATOR-TOPOLOGY", "OperatorTopologyAdmissionWithoutGrove"),
        ("tests.nonconforming.operator:NoTopologyEnv", "OPERATOR-TOPOLOGY", "OperatorTopologyEnvAndVolume"),
        ("tests.nonconforming.operator:NoTopologyRetry", "OPERATOR-TOPOLOGY", "WorkerTopologyStartupHardExit"),
        ("tests.nonconforming.operator:NoTopologyEnv", "OPERATOR-TOPOLOGY", "WorkerTopologyStartupWaitsForLabels"),
        ("tests.nonconforming.operator:WrongPodNames", "INFERENCESERVICE-API", "InferenceServiceObjects"),
        ("tests.nonconforming.operator:OptimisticStatus", "INFERENCESERVICE-API", "InferenceServiceStatus"),
        ("tests.nonconforming.operator:IgnoresUpdates", "INFERENCESERVICE-API", "InferenceServiceRollingUpdate"),
        ("tests.nonconforming.operator:RollsPodByPod", "INFERENCESERVICE-API", "InferenceServiceRollingUpdate"),
        ("tests.nonconforming.operator:ReadyByLeader", "INFERENCESERVICE-API", "InferenceServiceReplicaReadiness"),
        ("tests.nonconforming.operator:ReadyByPodCount", "INFERENCESERVICE-API", "InferenceServiceReplicaReadiness"),
        ("tests.nonconforming.operator:NeverUnknown", "INFERENCESERVICE-API", "InferenceServiceReplicaReadiness"),
        ("tests.nonconforming.operator:ReadyByExistingPods", "INFERENCESERVICE-API", "InferenceServiceReplicaReadiness"),
        ("tests.nonconforming.operator:TerminatingServes", "INFERENCESERVICE-API", "InferenceServiceReplicaReadiness"),
        ("tests.nonconforming.operator:NoLeaderService", "INFERENCESERVICE-API", "InferenceServiceLeaderAddress"),
    ],
    ids=[
        "wrong-task-keys",
        "labels-before-binding",
        "labels-from-wrong-node",
        "accepts-bad-level",
        "accepts-missing-topology",
        "accepts-topology-on-workers",
        "refuses-topology-on-pd-only",
        "admits-without-grove",
        "admits-fallback-without-grove",
        "no-topology-env",
        "no-topology-retry",
        "no-topology-env-late-label-unseen",
        "wrong-pod-names",
        "optimistic-status",
        "ignores-updates",
        "rolls-pod-by-pod",
        "ready-by-leader",
        "ready-by-pod-count",
        "never-unknown",
        "ready-by-existing-pods",
        "terminating-serves",
        "no-leader-service",
    ],
)
def test_an_operator_breaking_a_rule_is_failed_by_the_test_for_that_rule(
    cluster: Cluster, adapter: str, profile: str, caught_by: str, tmp_path: Path
) -> None:
    code, report, output = certify(cluster, adapter, tmp_path, "--run-test", CASE.get(adapter, caught_by), *SHORTER.get(adapter, ()))
    assert code == 1, f"certify must exit 1 for a non-conforming operator, got {code}:\n{output[-3000:]}"
    core = profile_of(report, profile)["core"]
    assert core["result"] == "failure"
    assert caught_by in core["failedTests"], f"{caught_by} did not fail; failed: {core['failedTests']}"


@pytest.mark.slow
@pytest.mark.xdist_group("certify")
def test_a_pod_group_written_as_the_seed_example_passes_the_pod_group_test(cluster: Cluster, tmp_path: Path) -> None:
    """``minMember`` is the implementation's: the seed's example value (every pod) passes ``InferenceServicePodGroup``.

    What Volcano then does with it fails ``GangSchedulingTable`` (tests/certify/test_gang_scheduling.py).
    """
    caught_by = "InferenceServicePodGroup"
    # NB: the exit code says "not certified" either way: --run-test leaves the profiles' other tests unrun
    _code, report, output = certify(cluster, "tests.nonconforming.gang:SeedExamplePodGroup", tmp_path, "--run-test", caught_by)
    core = profile_of(report, "INFERENCESERVICE-API")["core"]
    assert core["failedTests"] == [] and core["statistics"]["passed"] == 1, f"{core}\n{output[-3000:]}"
