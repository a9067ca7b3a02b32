"""Typed views of the Kubernetes objects the reference operator reads (STYLE habit 20: typed objects at the boundary).

Data flow: kopf and the kubernetes client hand the operator plain JSON-like dicts; the handlers
name them once with ``as_dgd`` / ``as_inference_service`` / ``as_pod`` (``Reconciler``'s own API
reads are annotated with the view where the client returns them), and from there the reconcile,
rollout and admission logic reads typed fields, so ``mypy --strict`` checks every
``dgd["spec"]["components"][i]["replicas"]`` the verdicts rest on.

Only the fields the code reads are declared (a view, not the API): an object carries more keys at
run time, and those are passed through untouched. Views cost nothing: a ``TypedDict`` is a dict,
and the ``as_*`` functions are casts, not copies or checks — the API server's schema (the CRDs in
``fixtures/cluster/crds``, Kubernetes' own for pods) is what holds the shapes; admission re-checks
the values a webhook must not take on trust. What the operator writes (pod manifests, statuses)
stays ``dict[str, Any]``, except the PodGroup and the rollout status, which it also reads back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Required, TypedDict, cast

# -- shared ----------------------------------------------------------------------------------


class OwnerReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class ObjectMeta(TypedDict, total=False):
    name: Required[str]
    namespace: str
    uid: str
    generation: int
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    deletionTimestamp: str | None


class TemplateMeta(TypedDict, total=False):
    """A pod template's metadata (no name of its own)."""

    labels: dict[str, str]
    annotations: dict[str, str]


class KubeObject(TypedDict, total=False):
    """What every object the operator reads has; each view below is one of these."""

    apiVersion: str
    metadata: Required[ObjectMeta]


class EnvVar(TypedDict, total=False):
    name: Required[str]
    value: str
    valueFrom: dict[str, Any]


class ContainerPort(TypedDict, total=False):
    name: str
    containerPort: int


class Container(TypedDict, total=False):
    """A container of an InferenceService role's template: what multinode rewrites."""

    name: str
    command: list[str]
    args: list[str]
    ports: list[ContainerPort]
    env: list[EnvVar]


# -- Pod -------------------------------------------------------------------------------------


class PodCondition(TypedDict, total=False):
    type: str
    status: str


class PodStatus(TypedDict, total=False):
    phase: str
    podIP: str
    conditions: list[PodCondition]


class PodSpec(TypedDict, total=False):
    nodeName: str


class Pod(KubeObject, total=False):
    spec: PodSpec
    status: PodStatus


# -- ClusterTopology (grove.io) --------------------------------------------------------------


class TopologyLevel(TypedDict):
    domain: str
    labelKey: str


class ClusterTopologySpec(TypedDict, total=False):
    levels: list[TopologyLevel]


class ClusterTopology(KubeObject, total=False):
    spec: ClusterTopologySpec


# -- DynamoGraphDeployment (seed 000's subset, seed 001's rollout) ----------------------------


class KvCacheTransferTopology(TypedDict, total=False):
    level: str
    mismatchPolicy: str
    kvTransferWeight: float


class DGDComponent(TypedDict, total=False):
    name: Required[str]
    type: str
    replicas: int
    image: str
    args: list[str]
    env: list[EnvVar]
    resources: dict[str, Any]
    kvCacheTransferTopology: KvCacheTransferTopology | None


class RolloutStrategy(TypedDict, total=False):
    maxSurge: int | str
    maxUnavailable: int | str
    paused: bool


class TopologyConstraint(TypedDict, total=False):
    clusterTopologyName: str


class DGDSpec(TypedDict, total=False):
    topologyConstraint: TopologyConstraint
    components: list[DGDComponent]
    rolloutStrategy: RolloutStrategy


class SideCount(TypedDict):
    component: str
    desired: int
    ready: int


class FrontendWeight(TypedDict):
    frontend: str
    weight: int


class RolloutStatus(TypedDict, total=False):
    """``status.rollout``: written each reconcile (``dgd_rollout``) and read back to tell a new step (an Event)."""

    phase: str
    reason: str
    targetRevision: dict[str, str]
    newNamespace: str
    oldNamespaces: list[str]
    old: list[SideCount]
    new: list[SideCount]
    weights: list[FrontendWeight]
    draining: list[str]
    proxy: str


class DGDStatus(TypedDict, total=False):
    observedGeneration: int
    components: dict[str, dict[str, int]]
    conditions: list[dict[str, str]]
    rollout: RolloutStatus
    address: str


class DynamoGraphDeployment(KubeObject, total=False):
    spec: DGDSpec
    status: DGDStatus


# -- InferenceService (seed 004) -------------------------------------------------------------


class Multinode(TypedDict, total=False):
    nodeCount: int


class TemplatePodSpec(TypedDict, total=False):
    """A role's pod spec: passed through to its pods; only the containers are read (multinode rewrites them)."""

    containers: list[Container]


class PodTemplate(TypedDict, total=False):
    metadata: TemplateMeta
    spec: TemplatePodSpec


class Role(TypedDict, total=False):
    name: Required[str]
    componentType: str
    replicas: int | None
    multinode: Multinode | None
    template: PodTemplate
    strategy: str
    httproute: dict[str, Any]
    endpointPickerConfig: str


class SchedulingStrategy(TypedDict, total=False):
    schedulerName: str


class InferenceServiceSpec(TypedDict, total=False):
    roles: list[Role]
    schedulingStrategy: SchedulingStrategy


class InferenceService(KubeObject, total=False):
    spec: InferenceServiceSpec


# -- Volcano PodGroup (written by the operator, read back to update it) -----------------------


class SubGroupPolicy(TypedDict):
    name: str
    subGroupSize: int
    minSubGroups: int
    labelSelector: dict[str, Any]
    matchLabelKeys: list[str]


class PodGroupSpec(TypedDict, total=False):
    minMember: int
    minTaskMember: dict[str, int]
    subGroupPolicy: list[SubGroupPolicy]


class PodGroup(KubeObject, total=False):
    kind: str
    spec: PodGroupSpec


# -- the boundary: name what the API returned, once --------------------------------------------


def as_dgd(obj: Mapping[str, Any]) -> DynamoGraphDeployment:
    return cast(DynamoGraphDeployment, obj)


def as_inference_service(obj: Mapping[str, Any]) -> InferenceService:
    return cast(InferenceService, obj)


def as_pod(obj: Mapping[str, Any]) -> Pod:
    return cast(Pod, obj)
