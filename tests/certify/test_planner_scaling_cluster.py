"""`servecert certify --profile PLANNER-SCALING --env cluster`: the reference planner scales its DGD; broken ones are failed.

On a cluster the planner runs as the DGD's planner component and patches its replicas through the
Kubernetes connector; the operator makes the pods (``servecert.harness.cluster_planned``). Runs as a vendor
would, in a subprocess joining this session's embedded cluster by name, one case at a time:

* the reference, on the whole profile as a cluster judges it: the connector's two tests, the x4
  step's SLA test with real start-ups and the GPU budget on the pods' GPUs; the rules of the
  planner's own algorithm are judged in process and listed as judged elsewhere
  (``planner_scaling._checks.ALGORITHM_JUDGED_IN``), so the run certifies;
* each broken planner pod (``tests/nonconforming/planner.py``, a ``Hooks`` of
  ``servecert planner serve``) on the test of its rule: one scales the components named prefill
  and decode whatever their type, one scales the namespace's first DGD, one starts on a graph
  whose components serve different models, one starts on a graph with no decode component.

Timing-bound (the SLA and the step's allowance are judged in simulated time), so these run in
make test's second phase, apart from the other tests (``-m timing`` in tox.ini).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from servecert.harness.cluster.backends import Cluster
from tests.certify.run import certify as certify_subprocess
from tests.certify.run import profile_of

pytestmark = [pytest.mark.cluster, pytest.mark.timing]
PROFILE = "PLANNER-SCALING"
OWN_DGD = "PlannerScalesItsOwnDgdByType"
VALIDATES = "PlannerValidatesItsDgdAtStartUp"
REFERENCE_RUN = (OWN_DGD, VALIDATES, "PlannerScalingStepReachesSla", "PlannerScalingGpuBudgetNeverExceeded")
"""The cluster's own tests, the SLA after a step, and the budget in GPUs the pods hold (the operator frees before it takes):
every test of the profile a cluster judges."""
IN_PROCESS = "PlannerScalingScalesDownAfterLoadFalls"
"""One of the algorithm's tests, judged in process: on a cluster it is listed, not run and not a skip."""


def certify(cluster: Cluster, implementation: str, report_dir: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    args = ("--env", "cluster", "--profile", PROFILE, "--workers", "1", *extra)
    return certify_subprocess(implementation, report_dir, *args, cluster_name=cluster.name, timeout_s=600)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_reference_planner_scales_its_dgd_through_the_operator(cluster: Cluster, tmp_path: Path) -> None:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    code, report, output = certify(cluster, "reference", tmp_path)
    core = profile_of(report, PROFILE)["core"]
    assert code == 0 and core["statistics"] == {"passed": len(REFERENCE_RUN), "failed": 0, "skipped": 0}, (core, output[-4000:])
    assert IN_PROCESS in core["judgedElsewhere"], core


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("adapter", "caught_by", "named"),
    [
        # NB: which of the test's three checks catches these two depends on whether the workers had registered at the
        # planner's first tick (it then holds on the mismatch, else it scales the wrong objects); every message names the rule.
        ("ScalesComponentsByName", OWN_DGD, "its components found by type (seed 003)"),
        ("ScalesFirstDgdOfNamespace", OWN_DGD, "its components found by type (seed 003)"),
        ("SkipsModelCheck", f"{VALIDATES}[model-mismatch]", "model-mismatch: the planner pod"),
        ("StartsWithoutDecode", f"{VALIDATES}[no-decode]", "no-decode: the planner pod"),
    ],
)
def test_a_planner_pod_breaking_a_connector_rule_is_failed_by_its_test(
    cluster: Cluster, adapter: str, caught_by: str, named: str, tmp_path: Path
) -> None:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    code, report, output = certify(cluster, f"tests.nonconforming.planner:{adapter}", tmp_path, "--run-test", caught_by)
    assert code == 1, output[-4000:]
    core = profile_of(report, PROFILE)["core"]
    assert caught_by.split("[", maxsplit=1)[0] in core["failedTests"], (core, output[-4000:])
    assert named in output, output[-4000:]
