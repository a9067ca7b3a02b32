"""Features: the named capabilities a conformance test exercises and an implementation claims.

A test lists the features it needs (``ConformanceTest.features``); an implementation's adapter
declares the features it supports (``Implementation.supported_features``); profiles group
features into a core set every claimant must pass and an extended set it may claim one by one.
The names are the contract between all three, so they are constants here and nowhere else
(gateway-api ``pkg/features``). The registry lets the suite reject a misspelt feature when a test
is collected or a flag is parsed, instead of silently skipping the test forever. Downstream
suites may ``register`` features of their own (from a pytest plugin loaded with ``-p``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

# Core of ROUTER-TOPOLOGY
DISAGGREGATED_SERVING: Final = "DisaggregatedServing"
KV_TRANSFER_TOPOLOGY_FILTER: Final = "KVTransferTopologyFilter"
KV_TRANSFER_TOPOLOGY_UNSET: Final = "KVTransferTopologyUnset"
KV_TRANSFER_TOPOLOGY_FALLBACK: Final = "KVTransferTopologyFallback"
KV_TRANSFER_TOPOLOGY_PREFILL_PRESELECTION: Final = "KVTransferTopologyPrefillPreselection"
# Extended of ROUTER-TOPOLOGY
KV_TRANSFER_TOPOLOGY_ERROR_503: Final = "KVTransferTopologyError503"
KV_TRANSFER_TOPOLOGY_PREFERRED_WEIGHT: Final = "KVTransferTopologyPreferredWeight"
KV_TRANSFER_TOPOLOGY_LATENCY: Final = "KVTransferTopologyLatency"
# Core of PLANNER-SCALING
PLANNER_VIRTUAL_CONNECTOR: Final = "PlannerVirtualConnector"
PLANNER_KUBERNETES_CONNECTOR: Final = "PlannerKubernetesConnector"
PLANNER_LOAD_BASED_SCALING: Final = "PlannerLoadBasedScaling"
PLANNER_SCALING_BOUNDS: Final = "PlannerScalingBounds"
PLANNER_STABILITY: Final = "PlannerStability"
PLANNER_SLA_ATTAINMENT: Final = "PlannerSlaAttainment"
# Core of OPERATOR-TOPOLOGY
OPERATOR_TOPOLOGY_ADMISSION: Final = "OperatorTopologyAdmission"
OPERATOR_TOPOLOGY_INJECTION: Final = "OperatorTopologyInjection"
OPERATOR_TOPOLOGY_LABELS: Final = "OperatorTopologyLabels"
WORKER_TOPOLOGY_STARTUP: Final = "WorkerTopologyStartup"
# Core of INFERENCESERVICE-API
INFERENCE_SERVICE_OBJECTS: Final = "InferenceServiceObjects"
INFERENCE_SERVICE_POD_GROUP: Final = "InferenceServicePodGroup"
INFERENCE_SERVICE_STATUS: Final = "InferenceServiceStatus"
INFERENCE_SERVICE_UPDATE: Final = "InferenceServiceUpdate"
# Core of GANG-SCHEDULING (seed 004's table on the operator's PodGroups and the cluster's scheduler)
GANG_SCHEDULING_TABLE: Final = "GangSchedulingTable"
GANG_REPLICA_ATOMICITY: Final = "GangReplicaAtomicity"
GANG_CROSS_ROLE: Final = "GangCrossRole"
GANG_REPLICA_SCALING: Final = "GangReplicaScaling"
# Extended of GANG-SCHEDULING (seed 002: network-topology-aware placement on HyperNodes)
NETWORK_TOPOLOGY_HARD: Final = "NetworkTopologyHard"
NETWORK_TOPOLOGY_SOFT: Final = "NetworkTopologySoft"
NETWORK_TOPOLOGY_WORKERS: Final = "NetworkTopologyWorkers"
HYPERNODE_GENERATION: Final = "HyperNodeGeneration"
# Core of ROLLOUT-ISOLATION (seed 001: rollouts without mixing versions, under streaming load)
ROLLOUT_MDC_ISOLATION: Final = "RolloutMdcIsolation"
ROLLOUT_KV_LAYOUT_ISOLATION: Final = "RolloutKvLayoutIsolation"
ROLLOUT_RUNTIME_ISOLATION: Final = "RolloutRuntimeIsolation"
ROLLOUT_FRONTEND: Final = "RolloutFrontend"
ROLLOUT_PAUSE_RESUME: Final = "RolloutPauseResume"
ROLLOUT_ROLLBACK: Final = "RolloutRollback"
ROLLOUT_TRAFFIC_SPLIT: Final = "RolloutTrafficSplit"
ROLLOUT_STEPS: Final = "RolloutSteps"
# Extended of ROLLOUT-ISOLATION (the suite's chaos cases)
ROLLOUT_CONTROLLER_RESTART: Final = "RolloutControllerRestart"
ROLLOUT_PROXY_REPLICA_LOSS: Final = "RolloutProxyReplicaLoss"


@dataclass(frozen=True)
class Feature:
    name: str
    description: str


class UnknownFeatureError(ValueError):
    """A feature name nobody registered; the message lists the known ones."""


REGISTRY: dict[str, Feature] = {}


def register(feature: Feature) -> Feature:
    """Add a feature to the registry; registering the same feature twice is harmless."""
    known = REGISTRY.get(feature.name)
    if known is not None and known != feature:
        raise ValueError(f"feature {feature.name!r} is already registered with another description")
    REGISTRY[feature.name] = feature
    return feature


def names() -> frozenset[str]:
    return frozenset(REGISTRY)


def check_known(candidates: Iterable[str], *, what: str) -> frozenset[str]:
    """Return the names as a set, or raise UnknownFeatureError naming the unknown ones and the known ones."""
    wanted = frozenset(candidates)
    unknown = sorted(wanted - REGISTRY.keys())
    if unknown:
        raise UnknownFeatureError(f"{what}: unknown feature(s) {', '.join(unknown)}; known features: {', '.join(sorted(REGISTRY))}")
    return wanted


for _feature in (
    Feature(DISAGGREGATED_SERVING, "Each request is prefilled on a prefill worker and decoded on a decode worker that pulls its KV cache."),
    Feature(
        KV_TRANSFER_TOPOLOGY_FILTER,
        "With a topology level set, the decode worker is chosen in the prefill worker's domain at that level.",
    ),
    Feature(KV_TRANSFER_TOPOLOGY_UNSET, "With no topology level set, routing ignores topology and behaves as without the feature."),
    Feature(
        KV_TRANSFER_TOPOLOGY_FALLBACK,
        "Mismatch policy fallback: with no same-domain decode worker, any decode worker serves the request and a warning is logged.",
    ),
    Feature(
        KV_TRANSFER_TOPOLOGY_ERROR_503,
        "Mismatch policy fail: with no same-domain decode worker, the client gets HTTP 503 and no KV crosses domains.",
    ),
    Feature(
        KV_TRANSFER_TOPOLOGY_PREFILL_PRESELECTION,
        "Prefill workers with a decode worker in their domain are preferred when choosing one; with none, all are eligible.",
    ),
    Feature(
        KV_TRANSFER_TOPOLOGY_PREFERRED_WEIGHT,
        "Per-worker 'preferred' enforcement: same-domain decode workers are favoured by a weight, never required.",
    ),
    Feature(KV_TRANSFER_TOPOLOGY_LATENCY, "Keeping KV transfers inside a domain measurably lowers time to first token."),
    Feature(
        PLANNER_VIRTUAL_CONNECTOR,
        "The planner writes prefill/decode counts with a decision id and issues no new decision before scaled_decision_id acknowledges it.",
    ),
    Feature(
        PLANNER_KUBERNETES_CONNECTOR,
        "On a cluster the planner is a DGD component: it scales the DGD named by DYN_PARENT_DGD_K8S_NAME, finding its prefill "
        "and decode components by type, by patching their replicas for the operator to carry out.",
    ),
    Feature(
        PLANNER_LOAD_BASED_SCALING,
        "The planner scales each component by at most one worker per load interval until the TTFT and ITL SLAs hold again.",
    ),
    Feature(PLANNER_SCALING_BOUNDS, "Worker counts never fall below min_endpoint or what sustained load needs, nor exceed the GPU budget."),
    Feature(PLANNER_STABILITY, "Under steady load the planner does not flap, and after load falls it scales down within a bounded time."),
    Feature(
        PLANNER_SLA_ATTAINMENT,
        "Under burst, diurnal and replayed-trace traffic, at least 95% of requests meet the SLA once scaling settled.",
    ),
    Feature(
        OPERATOR_TOPOLOGY_ADMISSION,
        "A DGD whose kvCacheTransferTopology names a missing ClusterTopology, a level outside it, or sits on a non-frontend "
        "component is refused at admission.",
    ),
    Feature(
        OPERATOR_TOPOLOGY_INJECTION,
        "Frontend pods get the router's topology env; worker pods get DYN_TOPOLOGY_ENABLED and the Downward API topology "
        "volume; without kvCacheTransferTopology, neither.",
    ),
    Feature(
        OPERATOR_TOPOLOGY_LABELS,
        "grove.io/topology.* labels appear on worker pods only after binding, equal to their node's domains, and reach the "
        "engine as files.",
    ),
    Feature(WORKER_TOPOLOGY_STARTUP, "A worker told DYN_TOPOLOGY_ENABLED=true whose topology files never appear exits non-zero."),
    Feature(
        INFERENCE_SERVICE_OBJECTS,
        "Each replica becomes a leader/worker group named {service}-{role}-{replica} with seed 004's pod names, labels and "
        "gang annotations.",
    ),
    Feature(
        INFERENCE_SERVICE_POD_GROUP,
        "Gang-scheduled services get one PodGroup named after them with minTaskMember {role}-{replica} per replica, kept in "
        "step with replicas (minMember is the implementation's; GANG-SCHEDULING judges its effect).",
    ),
    Feature(INFERENCE_SERVICE_STATUS, "status.components counts desired/ready replicas and pods per role as pods become ready."),
    Feature(
        INFERENCE_SERVICE_UPDATE,
        "A spec change replaces the pods it changes, each replica whole, labelled with the new generation as its revision.",
    ),
    Feature(
        GANG_SCHEDULING_TABLE,
        "Seed 004's story 4 on 80/64/48/32/16 GPUs: full, 1P + 1D, 1P + 1D, blocked, blocked — in bindings and in status.",
    ),
    Feature(GANG_REPLICA_ATOMICITY, "No replica is ever seen partly bound longer than one scheduling decision takes to bind."),
    Feature(GANG_CROSS_ROLE, "No prefill replica runs without a decode replica, nor the reverse; the first pair binds together."),
    Feature(
        GANG_REPLICA_SCALING,
        "Scaling a role up adds a minTaskMember key and binds the new replica whole when room exists; scaling down frees it whole.",
    ),
    Feature(
        NETWORK_TOPOLOGY_HARD,
        "A gang with networkTopology hard/highestTierAllowed N lands inside one HyperNode of tier <= N, or stays wholly Pending.",
    ),
    Feature(NETWORK_TOPOLOGY_SOFT, "A soft networkTopology gang lands in the tightest HyperNode it fits, and spreads rather than wait."),
    Feature(
        NETWORK_TOPOLOGY_WORKERS,
        "A role's workerNetworkTopology keeps each replica's workers inside one HyperNode of the tier; its leader goes anywhere.",
    ),
    Feature(
        HYPERNODE_GENERATION,
        "HyperNodes generated from zone/rack/host node labels are accepted and honoured; malformed member selectors are refused.",
    ),
    Feature(
        ROLLOUT_MDC_ISOLATION,
        "A model-card change (block size) rolls without a failed request, a request preprocessed with another card, or a starved worker.",
    ),
    Feature(ROLLOUT_KV_LAYOUT_ISOLATION, "A KV-layout change (tensor parallel 1 -> 2) rolls with no KV transfer between layouts."),
    Feature(ROLLOUT_RUNTIME_ISOLATION, "A runtime version change rolls with no frontend ever talking to a worker of the other version."),
    Feature(ROLLOUT_FRONTEND, "A frontend-only change moves frontend and workers into a new dynamo namespace together (seed 001 4.1)."),
    Feature(ROLLOUT_PAUSE_RESUME, "paused: true holds every count mid-rollout; unpausing completes it."),
    Feature(ROLLOUT_ROLLBACK, "Reverting the spec mid-rollout rolls back by the same mechanism, without a failed request."),
    Feature(
        ROLLOUT_TRAFFIC_SPLIT,
        "Phase by phase of a rollout, the new version's share of requests follows new_ready / (old_ready + new_ready).",
    ),
    Feature(
        ROLLOUT_STEPS,
        "A rollout takes seed 001's steps within maxSurge and maxUnavailable: new frontend first, +1/-1 worker steps, old frontend last.",
    ),
    Feature(
        ROLLOUT_CONTROLLER_RESTART,
        "The controller killed mid-rollout and started again: nothing moves while it is down, then it resumes and finishes cleanly.",
    ),
    Feature(
        ROLLOUT_PROXY_REPLICA_LOSS,
        "The DGD's address is a Service of replicated proxy pods (seed 001 4.3.3); one lost mid-rollout is replaced, no request fails.",
    ),
):
    register(_feature)
