"""docs/traceability.md: seed section -> profile -> feature -> conformance test -> reference code.

Data flow::

    conformance.suite.collect()      every TEST, with its SeedRef (seed, section, verbatim quote)
    conformance.suite.profiles       the profiles whose features cover the test, core or extended
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

from conformance.suite import collect, profiles
from conformance.suite.test_case import SEEDS, ConformanceTest

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
    "GangCrossRole": ("reference_impl/operator/inference_service.py", "fixtures/cluster/volcano.py"),
    "GangReplicaAtomicity": ("reference_impl/operator/inference_service.py", "fixtures/cluster/volcano.py"),
    "GangReplicaScaling": (
        "reference_impl/operator/inference_service.py",
        "reference_impl/operator/reconcile.py",
        "fixtures/cluster/volcano.py",
    ),
    "GangSchedulingTable": ("reference_impl/operator/inference_service.py", "fixtures/cluster/volcano.py"),
    "HyperNodeGeneration": ("fixtures/cluster/hypernodes.py", "fixtures/cluster/volcano.py"),
    "InferenceServiceObjects": ("reference_impl/operator/inference_service.py", "reference_impl/operator/behaviour.py"),
    "InferenceServicePodGroup": ("reference_impl/operator/inference_service.py", "reference_impl/operator/reconcile.py"),
    "InferenceServiceStatus": ("reference_impl/operator/inference_service.py",),
    "InferenceServiceReplicaReadiness": ("reference_impl/operator/inference_service.py",),
    "InferenceServiceLeaderAddress": ("reference_impl/operator/inference_service.py", "reference_impl/operator/reconcile.py"),
    "InferenceServiceRollingUpdate": ("reference_impl/operator/inference_service.py", "reference_impl/operator/reconcile.py"),
    "NetworkTopologyHard": ("fixtures/cluster/volcano.py",),
    "NetworkTopologyWorkers": ("reference_impl/operator/inference_service.py", "fixtures/cluster/volcano.py"),
    "NetworkTopologySoft": ("fixtures/cluster/volcano.py",),
    "OperatorTopologyAdmission": ("reference_impl/operator/admission.py", "reference_impl/operator/handlers.py"),
    "OperatorTopologyAdmissionWithoutGrove": ("reference_impl/operator/admission.py", "reference_impl/operator/reconcile.py"),
    "OperatorTopologyEnvAndVolume": ("reference_impl/operator/dgd_pods.py",),
    "OperatorTopologyLabelsAfterBinding": (
        "reference_impl/operator/topology_injection.py",
        "reference_impl/operator/reconcile.py",
        "reference_impl/operator/handlers.py",
    ),
    "PlannerScalingGpuBudgetNeverExceeded": ("reference_impl/planner/reconcile.py",),
    "PlannerScalingMeetsSlaAfterSettling": (
        "reference_impl/planner/load_scaling.py",
        "reference_impl/planner/throughput_scaling.py",
        "reference_impl/planner/estimate.py",
    ),
    "PlannerScalingNeverBelowFloor": (
        "reference_impl/planner/reconcile.py",
        "reference_impl/planner/throughput_scaling.py",
        "reference_impl/planner/load_scaling.py",
    ),
    "PlannerScalingNoFlapping": (
        "reference_impl/planner/planner.py",
        "reference_impl/planner/throughput_scaling.py",
        "reference_impl/planner/load_scaling.py",
    ),
    "PlannerScalingFloorFromPerfModel": ("reference_impl/planner/throughput_scaling.py", "reference_impl/planner/reconcile.py"),
    "PlannerScalingLoadRulesPerComponent": ("reference_impl/planner/load_scaling.py", "reference_impl/planner/estimate.py"),
    "PlannerScalingAggregatedLoadRules": (
        "reference_impl/planner/load_scaling.py",
        "reference_impl/planner/perf_model/aggregated.py",
        "reference_impl/planner/planner.py",
    ),
    "PlannerScalingAcknowledgementGuard": ("reference_impl/planner/connectors/virtual.py", "reference_impl/planner/planner.py"),
    "PlannerScalingOneStepPerInterval": (
        "reference_impl/planner/reconcile.py",
        "reference_impl/planner/planner.py",
        "reference_impl/planner/connectors/virtual.py",
    ),
    "PlannerScalingScalesDownAfterLoadFalls": (
        "reference_impl/planner/load_scaling.py",
        "reference_impl/planner/planner.py",
        "reference_impl/planner/throughput_scaling.py",
    ),
    "PlannerScalesItsOwnDgdByType": (
        "reference_impl/planner/connectors/kubernetes.py",
        "reference_impl/planner/serve.py",
        "reference_impl/operator/dgd_pods.py",
    ),
    "PlannerValidatesItsDgdAtStartUp": ("reference_impl/planner/connectors/kubernetes.py", "reference_impl/planner/serve.py"),
    "PlannerScalingStepReachesSla": (
        "reference_impl/planner/load_scaling.py",
        "reference_impl/planner/estimate.py",
        "reference_impl/planner/planner.py",
    ),
    "RolloutBlockSize": (
        "reference_impl/operator/dgd_pods.py",
        "reference_impl/operator/dgd_rollout.py",
        "reference_impl/frontend/worker_sets.py",
    ),
    "RolloutFrontendImage": (
        "reference_impl/operator/dgd_rollout.py",
        "reference_impl/operator/proxy_weights.py",
        "reference_impl/traffic_split/weights.py",
    ),
    "RolloutPauseResume": ("reference_impl/operator/rollout_plan.py", "reference_impl/operator/dgd_rollout.py"),
    "RolloutRollback": ("reference_impl/operator/dgd_rollout.py", "reference_impl/operator/rollout_plan.py"),
    "RolloutTrafficSplit": ("reference_impl/operator/dgd_rollout.py", "reference_impl/traffic_split/weights.py"),
    "RolloutSteps": ("reference_impl/operator/rollout_plan.py", "reference_impl/operator/dgd_rollout.py"),
    "RolloutControllerRestart": ("reference_impl/operator/dgd_rollout.py", "reference_impl/operator/reconcile.py"),
    "RolloutProxyReplicaLoss": (
        "reference_impl/operator/reconcile.py",
        "reference_impl/operator/dgd_pods.py",
        "reference_impl/traffic_split/haproxy.py",
    ),
    "RolloutRuntimeVersion": ("reference_impl/operator/dgd_pods.py", "reference_impl/operator/dgd_rollout.py"),
    "RolloutTensorParallel": ("reference_impl/operator/dgd_pods.py", "reference_impl/frontend/kube_discovery.py"),
    "RouterTopologyDecodeJoinsAndLeaves": (
        "reference_impl/frontend/discovery.py",
        "reference_impl/frontend/worker_sets.py",
        "reference_impl/frontend/topology.py",
    ),
    "RouterTopologyDefaultPolicyIsFail": ("reference_impl/frontend/topology.py", "fixtures/reference/adapter.py"),
    "RouterTopologyExcludesWorkersMissingLabel": ("reference_impl/frontend/topology.py",),
    "RouterTopologyFailedDecodeStaysInDomain": ("reference_impl/frontend/app.py", "reference_impl/frontend/router.py"),
    "RouterTopologyFailReturns503": ("reference_impl/frontend/app.py", "reference_impl/frontend/topology.py"),
    "RouterTopologyFailWithoutSameDomainDecode": ("reference_impl/frontend/topology.py", "reference_impl/frontend/app.py"),
    "RouterTopologyFallbackKeepsSameDomain": ("reference_impl/frontend/topology.py",),
    "RouterTopologyFallbackRoutesAnywhere": ("reference_impl/frontend/topology.py", "reference_impl/frontend/router.py"),
    "RouterTopologyFilteringLowersTransferTime": ("reference_impl/frontend/topology.py", "reference_impl/frontend/router.py"),
    "RouterTopologyLevelUnsetNoFiltering": ("reference_impl/frontend/topology.py", "reference_impl/frontend/app.py"),
    "RouterTopologyMatchesTheLevelOnly": ("reference_impl/frontend/topology.py",),
    "RouterTopologyPreferredWeight": ("reference_impl/frontend/topology.py", "reference_impl/frontend/routing.py"),
    "RouterTopologyPrefillMissingLabel": ("reference_impl/frontend/topology.py",),
    "RouterTopologyPrefillMissingLabelFallback": ("reference_impl/frontend/topology.py",),
    "RouterTopologyPrefillPreselection": ("reference_impl/frontend/topology.py", "reference_impl/frontend/router.py"),
    "RouterTopologyTransfersStayInDomain": ("reference_impl/frontend/topology.py", "reference_impl/frontend/router.py"),
    "WorkerTopologyStartupHardExit": ("fakes/topology_env.py", "fakes/serve.py"),
    "WorkerTopologyStartupWaitsForLabels": ("reference_impl/operator/dgd_pods.py", "fakes/topology_env.py"),
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
