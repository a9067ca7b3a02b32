"""`servecert certify --profile ROLLOUT-ISOLATION --env cluster`: the reference passes; the in-place rollout fails every mode.

Runs as a vendor would, in a subprocess joining this session's embedded cluster by name. The
broken operator (tests/nonconforming/rollout.py: one dynamo namespace for every revision) is
certified on the three tests of seed 001's failure modes; each must fail, and its failure must
name its mode. Each other broken rollout (a rule dropped from the reference) is certified on the
test of its rule alone: the pause, maxUnavailable, the frontend's order, a frontend change that
keeps the old workers (the new frontend joins their namespace), six wrong traffic
splits (even, an instant switch, two steps late, weights from the workers that exist, weights
that count terminating workers, weights from the decode workers alone) on RolloutTrafficSplit, and four wrong steps
(maxSurge ignored, workers with the frontend, the P:D ratio ignored, a new frontend of one replica
where the old had three) on RolloutSteps[seed-example],
an operator that deletes the other revision's workers when it starts, on RolloutControllerRestart,
one that never replaces a lost proxy replica, on RolloutProxyReplicaLoss, and one that keeps only
the first of its two proxy replicas up to date, on RolloutTrafficSplit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.harness.cluster.backends import Cluster
from tests.certify.run import certify as certify_subprocess
from tests.certify.run import profile_of

pytestmark = pytest.mark.cluster
PROFILE = "ROLLOUT-ISOLATION"
SPLIT_OFF = "traffic split off the ready ratio"
SPLIT_CASE = "RolloutTrafficSplit[seed-example]"
"""Where the split's broken operators are certified: the four aggregated workers tell each from the formula (the 4:2 case
is for weights from one role's counts)."""
FRONTEND_FIRST = "before any new frontend was Ready"
OWN_SIDE = "(itself new) sent requests to workers of versions ['old']"
MODES = {"RolloutBlockSize": scenarios.MDC, "RolloutTensorParallel": scenarios.KV_LAYOUT, "RolloutRuntimeVersion": scenarios.RUNTIME_API}
IN_PLACE_RUN = ("RolloutBlockSize[command]", "RolloutTensorParallel", "RolloutRuntimeVersion")
"""One case per mode: the in-place operator treats a change in args, env or command alike (one namespace for all)."""


def certify(cluster: Cluster, implementation: str, report_dir: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    args = ("--env", "cluster", "--profile", PROFILE, "--workers", "1", *extra)
    return certify_subprocess(implementation, report_dir, *args, cluster_name=cluster.name, timeout_s=1500)


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.xdist_group("rollout")
def test_the_reference_is_certified_on_rollout_isolation(cluster: Cluster, tmp_path: Path) -> None:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    code, report, output = certify(cluster, "reference", tmp_path)
    assert code == 0, output[-4000:]
    profile = profile_of(report, PROFILE)
    core, extended = profile["core"], profile["extended"]
    assert core["result"] == "success", core
    # NB: the report counts tests, not cases: 8 tests, 13 cases (RolloutBlockSize has 3, RolloutSteps 3, RolloutTrafficSplit 2).
    assert core["statistics"]["passed"] == 8 and core["statistics"]["skipped"] == 0, core
    # NB: RolloutControllerRestart and RolloutProxyReplicaLoss
    assert extended["result"] == "success" and extended["statistics"]["passed"] == 2, extended


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.xdist_group("rollout-in-place")  # NB: its own group: the reference's run alone takes a worker for minutes
def test_the_in_place_rollout_is_failed_on_every_mode_naming_it(cluster: Cluster, tmp_path: Path) -> None:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    code, report, output = certify(cluster, "tests.nonconforming.rollout:InPlace", tmp_path, "--run-test", ",".join(IN_PLACE_RUN))
    assert code == 1, output[-4000:]
    core = profile_of(report, PROFILE)["core"]
    assert set(core["failedTests"]) == set(MODES), (core, output[-4000:])
    # NB: each check prefixes its failure with the mode its scenario exercises; three tests, three modes named.
    named = {
        mode for mode in MODES.values() for line in output.splitlines() if line.startswith("E ") and f"AssertionError: {mode}:" in line
    }
    assert named == set(MODES.values()), output[-4000:]


def broken(adapter: str, test: str, mode: str, rule_named: str, group: str) -> Any:
    """One broken rollout and the test of its rule, in an xdist group of a few such runs (each takes a minute or more)."""
    return pytest.param(f"tests.nonconforming.rollout:{adapter}", test, mode, rule_named, marks=pytest.mark.xdist_group(group), id=adapter)


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("adapter", "test", "mode", "rule_named"),
    [
        broken("IgnoresPause", "RolloutPauseResume", scenarios.PAUSE, "paused, yet", "rollout-broken"),
        # NB: on the plain block-size case (about 40 s), not RolloutRollback (about 90 s): the bound is the same.
        broken("ScalesDownFirst", "RolloutBlockSize[args]", scenarios.MDC, "maxUnavailable 0 exceeded", "rollout-broken"),
        broken("OldFrontendFirst", "RolloutFrontendImage", scenarios.FRONTEND, "requests failed", "rollout-broken"),
        broken("FrontendJoinsOldWorkers", "RolloutFrontendImage", scenarios.FRONTEND, OWN_SIDE, "rollout-broken"),
        broken("NoSurgeLimit", "RolloutSteps[seed-example]", scenarios.STEPS, "maxSurge 1 exceeded", "rollout-broken"),
        broken("EvenSplit", SPLIT_CASE, scenarios.SPLIT, SPLIT_OFF, "rollout-broken-split"),
        broken("SwitchAtOnce", SPLIT_CASE, scenarios.SPLIT, SPLIT_OFF, "rollout-broken-split"),
        broken("LaggingSplit", SPLIT_CASE, scenarios.SPLIT, SPLIT_OFF, "rollout-broken-split"),
        broken("WeightsFromDesired", SPLIT_CASE, scenarios.SPLIT, SPLIT_OFF, "rollout-in-place"),
        broken("CountsTerminatingWorkers", SPLIT_CASE, scenarios.SPLIT, SPLIT_OFF, "rollout-broken"),
        broken("WeightsFromDecode", "RolloutTrafficSplit[prefill-4-decode-2]", scenarios.SPLIT, SPLIT_OFF, "rollout-broken-split"),
        broken("WorkersWithFrontend", "RolloutSteps[seed-example]", scenarios.STEPS, FRONTEND_FIRST, "rollout-in-place"),
        broken("IgnoresRatio", "RolloutSteps[seed-example]", scenarios.STEPS, "prefill:decode ratio broken", "rollout-broken"),
        broken(
            "OneNewFrontend", "RolloutSteps[seed-example]", scenarios.STEPS, "T1: the new frontend had 1 replica", "rollout-broken-split"
        ),
        broken("CollectsOnRestart", "RolloutControllerRestart", scenarios.RESTART, "maxUnavailable 0 exceeded", "rollout-in-place"),
        broken("ProxyNotReplaced", "RolloutProxyReplicaLoss", scenarios.PROXY_LOSS, "was not replaced", "rollout-in-place"),
        broken("StaleProxyReplica", SPLIT_CASE, scenarios.SPLIT, SPLIT_OFF, "rollout-broken-split"),
    ],
)
def test_a_broken_rollout_is_failed_by_the_test_of_its_rule(
    cluster: Cluster, tmp_path: Path, adapter: str, test: str, mode: str, rule_named: str
) -> None:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    code, report, output = certify(cluster, adapter, tmp_path, "--run-test", test)
    assert code == 1, output[-4000:]
    profile = profile_of(report, PROFILE)
    failed = [*profile["core"]["failedTests"], *profile["extended"]["failedTests"]]
    assert failed == [test.partition("[")[0]], output[-4000:]
    failures = [line for line in output.splitlines() if line.startswith("E ") and f"AssertionError: {mode}: " in line]
    assert any(rule_named in line for line in failures), (mode, rule_named, failures, output[-3000:])
