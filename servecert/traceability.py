"""docs/traceability.md: seed section -> profile -> feature -> conformance test -> reference code.

Data flow::

    servecert.conformance.suite.collect()      every TEST, with its SeedRef (seed, section, verbatim quote)
    servecert.conformance.suite.profiles       the profiles whose features cover the test, core or extended
    REFERENCE_CODE                   test -> the reference implementation's files that obey the rule
      -> render()                    one markdown table per seed, rows sorted by section then test
      -> docs/traceability.md        written by ``python -m servecert.traceability``;
                                     ``--check`` exits 1 when the file is out of date (make test)

Why here, above the suite: the suite names no implementation; the map from a rule to the
reference's code is documentation about the reference, so it lives with the command that sits
above both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from servecert.conformance.suite import collect, profiles
from servecert.conformance.suite.test_case import SEEDS, ConformanceTest

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "traceability.md"

SEED_TITLES = {
    "000": "Topology-aware KV-transfer routing",
    "001": "Rollouts of a DynamoGraphDeployment without mixing versions",
    "002": "Volcano network-topology-aware gang scheduling",
    "003": "The planner",
    "004": "The InferenceService CRD",
}

# test short name -> the reference implementation's files that implement the rule it checks
REFERENCE_CODE: dict[str, tuple[str, ...]] = {
    "GangCrossRole": ("servecert/reference_impl/operator/inference_service.py", "servecert/harness/cluster/volcano.py"),
    "GangReplicaAtomicity": ("servecert/reference_impl/operator/inference_service.py", "servecert/harness/cluster/volcano.py"),
    "GangReplicaScaling": (
        "servecert/reference_impl/operator/inference_service.py",
        "servecert/reference_impl/operator/reconcile.py",
        "servecert/harness/cluster/volcano.py",
    ),
    "GangSchedulingTable": ("servecert/reference_impl/operator/inference_service.py", "servecert/harness/cluster/volcano.py"),
    "HyperNodeGeneration": ("servecert/harness/cluster/hypernodes.py", "servecert/harness/cluster/volcano.py"),
    "InferenceServiceObjects": ("servecert/reference_impl/operator/inference_service.py", "servecert/reference_impl/operator/behaviour.py"),
    "InferenceServicePodGroup": (
        "servecert/reference_impl/operator/inference_service.py",
        "servecert/reference_impl/operator/reconcile.py",
    ),
    "InferenceServiceStatus": ("servecert/reference_impl/operator/inference_service.py",),
    "InferenceServiceReplicaReadiness": ("servecert/reference_impl/operator/inference_service.py",),
    "InferenceServiceLeaderAddress": (
        "servecert/reference_impl/operator/inference_service.py",
        "servecert/reference_impl/operator/reconcile.py",
    ),
    "InferenceServiceRollingUpdate": (
        "servecert/reference_impl/operator/inference_service.py",
        "servecert/reference_impl/operator/reconcile.py",
    ),
    "NetworkTopologyHard": ("servecert/harness/cluster/volcano.py",),
    "NetworkTopologyWorkers": ("servecert/reference_impl/operator/inference_service.py", "servecert/harness/cluster/volcano.py"),
    "NetworkTopologySoft": ("servecert/harness/cluster/volcano.py",),
    "OperatorTopologyAdmission": ("servecert/reference_impl/operator/admission.py", "servecert/reference_impl/operator/handlers.py"),
    "OperatorTopologyAdmissionWithoutGrove": (
        "servecert/reference_impl/operator/admission.py",
        "servecert/reference_impl/operator/reconcile.py",
    ),
    "OperatorTopologyEnvAndVolume": ("servecert/reference_impl/operator/dgd_pods.py",),
    "OperatorTopologyLabelsAfterBinding": (
        "servecert/reference_impl/operator/topology_injection.py",
        "servecert/reference_impl/operator/reconcile.py",
        "servecert/reference_impl/operator/handlers.py",
    ),
    "PlannerScalingGpuBudgetNeverExceeded": ("servecert/reference_impl/planner/reconcile.py",),
    "PlannerScalingMeetsSlaAfterSettling": (
        "servecert/reference_impl/planner/load_scaling.py",
        "servecert/reference_impl/planner/throughput_scaling.py",
        "servecert/reference_impl/planner/estimate.py",
    ),
    "PlannerScalingNeverBelowFloor": (
        "servecert/reference_impl/planner/reconcile.py",
        "servecert/reference_impl/planner/throughput_scaling.py",
        "servecert/reference_impl/planner/load_scaling.py",
    ),
    "PlannerScalingNoFlapping": (
        "servecert/reference_impl/planner/planner.py",
        "servecert/reference_impl/planner/throughput_scaling.py",
        "servecert/reference_impl/planner/load_scaling.py",
    ),
    "PlannerScalingFloorFromPerfModel": (
        "servecert/reference_impl/planner/throughput_scaling.py",
        "servecert/reference_impl/planner/reconcile.py",
    ),
    "PlannerScalingLoadRulesPerComponent": (
        "servecert/reference_impl/planner/load_scaling.py",
        "servecert/reference_impl/planner/estimate.py",
    ),
    "PlannerScalingAggregatedLoadRules": (
        "servecert/reference_impl/planner/load_scaling.py",
        "servecert/reference_impl/planner/perf_model/aggregated.py",
        "servecert/reference_impl/planner/planner.py",
    ),
    "PlannerScalingAcknowledgementGuard": (
        "servecert/reference_impl/planner/connectors/virtual.py",
        "servecert/reference_impl/planner/planner.py",
    ),
    "PlannerScalingOneStepPerInterval": (
        "servecert/reference_impl/planner/reconcile.py",
        "servecert/reference_impl/planner/planner.py",
        "servecert/reference_impl/planner/connectors/virtual.py",
    ),
    "PlannerScalingScalesDownAfterLoadFalls": (
        "servecert/reference_impl/planner/load_scaling.py",
        "servecert/reference_impl/planner/planner.py",
        "servecert/reference_impl/planner/throughput_scaling.py",
    ),
    "PlannerScalesItsOwnDgdByType": (
        "servecert/reference_impl/planner/connectors/kubernetes.py",
        "servecert/reference_impl/planner/serve.py",
        "servecert/reference_impl/operator/dgd_pods.py",
    ),
    "PlannerValidatesItsDgdAtStartUp": (
        "servecert/reference_impl/planner/connectors/kubernetes.py",
        "servecert/reference_impl/planner/serve.py",
    ),
    "PlannerScalingStepReachesSla": (
        "servecert/reference_impl/planner/load_scaling.py",
        "servecert/reference_impl/planner/estimate.py",
        "servecert/reference_impl/planner/planner.py",
    ),
    "RolloutBlockSize": (
        "servecert/reference_impl/operator/dgd_pods.py",
        "servecert/reference_impl/operator/dgd_rollout.py",
        "servecert/reference_impl/frontend/worker_sets.py",
    ),
    "RolloutFrontendImage": (
        "servecert/reference_impl/operator/dgd_rollout.py",
        "servecert/reference_impl/operator/proxy_weights.py",
        "servecert/reference_impl/traffic_split/weights.py",
    ),
    "RolloutPauseResume": ("servecert/reference_impl/operator/rollout_plan.py", "servecert/reference_impl/operator/dgd_rollout.py"),
    "RolloutRollback": ("servecert/reference_impl/operator/dgd_rollout.py", "servecert/reference_impl/operator/rollout_plan.py"),
    "RolloutTrafficSplit": ("servecert/reference_impl/operator/dgd_rollout.py", "servecert/reference_impl/traffic_split/weights.py"),
    "RolloutSteps": ("servecert/reference_impl/operator/rollout_plan.py", "servecert/reference_impl/operator/dgd_rollout.py"),
    "RolloutControllerRestart": ("servecert/reference_impl/operator/dgd_rollout.py", "servecert/reference_impl/operator/reconcile.py"),
    "RolloutProxyReplicaLoss": (
        "servecert/reference_impl/operator/reconcile.py",
        "servecert/reference_impl/operator/dgd_pods.py",
        "servecert/reference_impl/traffic_split/haproxy.py",
    ),
    "RolloutRuntimeVersion": ("servecert/reference_impl/operator/dgd_pods.py", "servecert/reference_impl/operator/dgd_rollout.py"),
    "RolloutTensorParallel": ("servecert/reference_impl/operator/dgd_pods.py", "servecert/reference_impl/frontend/kube_discovery.py"),
    "RouterTopologyDecodeJoinsAndLeaves": (
        "servecert/reference_impl/frontend/discovery.py",
        "servecert/reference_impl/frontend/worker_sets.py",
        "servecert/reference_impl/frontend/topology.py",
    ),
    "RouterTopologyDefaultPolicyIsFail": ("servecert/reference_impl/frontend/topology.py", "servecert/adapters/reference/adapter.py"),
    "RouterTopologyExcludesWorkersMissingLabel": ("servecert/reference_impl/frontend/topology.py",),
    "RouterTopologyFailedDecodeStaysInDomain": ("servecert/reference_impl/frontend/app.py", "servecert/reference_impl/frontend/router.py"),
    "RouterTopologyFailReturns503": ("servecert/reference_impl/frontend/app.py", "servecert/reference_impl/frontend/topology.py"),
    "RouterTopologyFailWithoutSameDomainDecode": (
        "servecert/reference_impl/frontend/topology.py",
        "servecert/reference_impl/frontend/app.py",
    ),
    "RouterTopologyFallbackKeepsSameDomain": ("servecert/reference_impl/frontend/topology.py",),
    "RouterTopologyFallbackRoutesAnywhere": (
        "servecert/reference_impl/frontend/topology.py",
        "servecert/reference_impl/frontend/router.py",
    ),
    "RouterTopologyFilteringLowersTransferTime": (
        "servecert/reference_impl/frontend/topology.py",
        "servecert/reference_impl/frontend/router.py",
    ),
    "RouterTopologyLevelUnsetNoFiltering": ("servecert/reference_impl/frontend/topology.py", "servecert/reference_impl/frontend/app.py"),
    "RouterTopologyMatchesTheLevelOnly": ("servecert/reference_impl/frontend/topology.py",),
    "RouterTopologyPreferredWeight": ("servecert/reference_impl/frontend/topology.py", "servecert/reference_impl/frontend/routing.py"),
    "RouterTopologyPrefillMissingLabel": ("servecert/reference_impl/frontend/topology.py",),
    "RouterTopologyPrefillMissingLabelFallback": ("servecert/reference_impl/frontend/topology.py",),
    "RouterTopologyPrefillPreselection": ("servecert/reference_impl/frontend/topology.py", "servecert/reference_impl/frontend/router.py"),
    "RouterTopologyTransfersStayInDomain": ("servecert/reference_impl/frontend/topology.py", "servecert/reference_impl/frontend/router.py"),
    "WorkerTopologyStartupHardExit": ("servecert/fakes/topology_env.py", "servecert/fakes/serve.py"),
    "WorkerTopologyStartupWaitsForLabels": ("servecert/reference_impl/operator/dgd_pods.py", "servecert/fakes/topology_env.py"),
}


def profile_of(test: ConformanceTest) -> str:
    """The profiles whose features cover the test, each marked core or extended."""
    names = []
    for name in sorted(profiles.PROFILES):
        profile = profiles.PROFILES[name]
        if profile.covers(test.features):
            names.append(f"{name} ({'extended' if profile.is_extended(test.features) else 'core'})")
    return ", ".join(names) or "(no profile)"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _row(test: ConformanceTest) -> str:
    ref = test.seed
    quote = _cell(ref.quote) + (f" <br>*{_cell(ref.note)}*" if ref.note else "")
    code = "<br>".join(f"`{path}`" for path in REFERENCE_CODE.get(test.short_name, ())) or "—"
    module = test.source.replace(".", "/") + ".py"
    features = "<br>".join(test.features)
    return f"| {_cell(ref.section)} | {quote} | {profile_of(test)} | {features} | [{test.short_name}](../{module}) | {code} |"


def render(tests: list[ConformanceTest]) -> str:
    lines = [
        "# Traceability: seed -> profile -> feature -> test -> reference code",
        "",
        "Generated by `python -m servecert.traceability` from each conformance test's `seed`",
        "(`SeedRef`: section and a verbatim quote of the seed) and its features; do not edit by hand.",
        "`make test` fails when this file is out of date (`tests/servecert/test_traceability.py`) and when a",
        "quote is not found in its seed (`tests/conformance/suite/test_seed_citations.py`).",
    ]
    for seed in SEEDS:
        rows = sorted((t for t in tests if t.seed.seed == seed), key=lambda t: (t.seed.section, t.short_name))
        lines += ["", f"## Seed {seed}: {SEED_TITLES[seed]}", ""]
        if not rows:
            lines.append("No conformance test cites this seed.")
            continue
        lines += [
            "| section | the seed says | profile | features | test | reference code |",
            "| --- | --- | --- | --- | --- | --- |",
            *(_row(t) for t in rows),
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m servecert.traceability", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/traceability.md is out of date")
    args = parser.parse_args(argv)
    text = render(collect.collect())
    if args.check:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date; run: python -m servecert.traceability", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
