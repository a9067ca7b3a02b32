"""Typed views of the Kubernetes objects both sides read (STYLE habit 20: typed objects at the boundary).

Data flow: the API server (through kopf or the kubernetes client) hands out plain JSON-like
dicts, camelCase as in YAML. The reference operator names them once at its boundary (``as_dgd``,
``as_inference_service``, ``as_pod``); the harness's facade (``servecert.harness.cluster.kube``) returns
them under these names. From there the operator's reconcile logic and the suite's verdicts read
typed fields, so ``mypy --strict`` checks every ``pod["spec"]["nodeName"]`` a decision rests on.

Why here: these are the shapes of the API both sides speak (Kubernetes' own objects, and the CRDs
the suite installs from ``servecert/harness/cluster/crds``), like the names in ``kube_names``; one copy
keeps the suite and the reference from drifting apart while neither imports the other.

Only fields some code reads are declared (a view, not the API): an object carries more keys at
run time, passed through untouched. A ``TypedDict`` is a dict and the ``as_*`` functions are
casts, so a view costs nothing and checks nothing at run time; the API server's schema holds the
shapes. What either side writes (manifests) stays ``dict[str, Any]``.
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


class ManagedFieldsEntry(TypedDict, total=False):
    """Who last wrote which fields, and when (the API server's clock, whole seconds)."""

    manager: str
    operation: str
    subresource: str
    time: str


class ObjectMeta(TypedDict, total=False):
    name: Required[str]
    namespace: str
    uid: str
    generation: int
    resourceVersion: str
    creationTimestamp: str
    deletionTimestamp: str | None
    deletionGracePeriodSeconds: int | None
    labels: dict[str, str]
    annotations: dict[str, str]
    ownerReferences: list[OwnerReference]
    managedFields: list[ManagedFieldsEntry]


class TemplateMeta(TypedDict, total=False):
    """A pod template's metadata (no name of its own)."""

    labels: dict[str, str]
    annotations: dict[str, str]


class KubeObject(TypedDict, total=False):
    """What every object read here has; each view below is one of these."""

    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]


class Condition(TypedDict, total=False):
    """A status condition (pods, nodes, PodGroups): ``status`` is "True" / "False" / "Unknown"."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


# -- Pod -------------------------------------------------------------------------------------


class EnvVar(TypedDict, total=False):
    name: Required[str]
    value: str
    valueFrom: dict[str, Any]


class ContainerPort(TypedDict, total=False):
    name: str
    containerPort: int


class VolumeMount(TypedDict, total=False):
    name: str
    mountPath: str
    readOnly: bool


class Container(TypedDict, total=False):
    name: str
    image: str
    command: list[str]
    args: list[str]
    ports: list[ContainerPort]
    env: list[EnvVar]
    volumeMounts: list[VolumeMount]
    resources: dict[str, Any]


class DownwardAPIFile(TypedDict, total=False):
    path: str
    fieldRef: dict[str, str]


class DownwardAPIVolume(TypedDict, total=False):
    items: list[DownwardAPIFile]


class Volume(TypedDict, total=False):
    name: Required[str]
    downwardAPI: DownwardAPIVolume


class PodSpec(TypedDict, total=False):
    nodeName: str
    schedulerName: str
    containers: list[Container]
    volumes: list[Volume]


class ContainerStatus(TypedDict, total=False):
    name: str
    ready: bool
    restartCount: int
    state: dict[str, dict[str, Any]]
    lastState: dict[str, dict[str, Any]]


class PodStatus(TypedDict, total=False):
    phase: str
    podIP: str
    conditions: list[Condition]
    containerStatuses: list[ContainerStatus]


class Pod(KubeObject, total=False):
    spec: PodSpec
    status: PodStatus


# -- Node and Event --------------------------------------------------------------------------


class NodeStatus(TypedDict, total=False):
    conditions: list[Condition]
    capacity: dict[str, str]
    allocatable: dict[str, str]


class Node(KubeObject, total=False):
    status: NodeStatus


class ObjectReference(TypedDict, total=False):
    kind: str
    name: str
    namespace: str
    uid: str


class Event(KubeObject, total=False):
    """A core/v1 Event; ``eventTime`` (microseconds) is set by newer recorders, else only ``metadata.creationTimestamp``."""

    involvedObject: ObjectReference
    reason: str
    message: str
    type: str
    eventTime: str


# -- ClusterTopology (grove.io) --------------------------------------------------------------


class TopologyLevel(TypedDict):
    domain: str
    labelKey: str


class ClusterTopologySpec(TypedDict, total=False):
    levels: list[TopologyLevel]


class ClusterTopology(KubeObject, total=False):
    spec: ClusterTopologySpec


# -- Volcano PodGroup --------------------------------------------------------------------------


class SubGroupPolicy(TypedDict, total=False):
    name: str
    subGroupSize: int
    minSubGroups: int
    labelSelector: dict[str, Any]
    matchLabelKeys: list[str]
    networkTopology: dict[str, Any]


class PodGroupSpec(TypedDict, total=False):
    minMember: int
    minTaskMember: dict[str, int]
    subGroupPolicy: list[SubGroupPolicy]
    networkTopology: dict[str, Any]


class PodGroupStatus(TypedDict, total=False):
    phase: str
    running: int
    succeeded: int
    failed: int
    conditions: list[Condition]


class PodGroup(KubeObject, total=False):
    spec: PodGroupSpec
    status: PodGroupStatus


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
    command: list[str]
    args: list[str]
    env: list[EnvVar]
    resources: dict[str, Any]
    extraPodSpec: dict[str, Any]
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
    """``status.rollout``: written each reconcile by the reference and read back to tell a new step (an Event)."""

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
    """Where the DGD serves (seed 001: its traffic proxy), once the implementation has one."""


class DynamoGraphDeployment(KubeObject, total=False):
    spec: DGDSpec
    status: DGDStatus


# -- InferenceService (seed 004) -------------------------------------------------------------


class NetworkTopologySpec(TypedDict, total=False):
    mode: str
    highestTierAllowed: int


class Multinode(TypedDict, total=False):
    nodeCount: int
    workerNetworkTopology: NetworkTopologySpec
    """The suite's extension: seed 002's task-level topology (use case 4), the workers of each replica in one domain."""


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
    networkTopology: dict[str, Any]


class InferenceServiceSpec(TypedDict, total=False):
    roles: list[Role]
    schedulingStrategy: SchedulingStrategy


class ComponentStatus(TypedDict, total=False):
    """``status.components[role]`` of an InferenceService (seed 004)."""

    phase: str
    desiredReplicas: int
    readyReplicas: int
    nodesPerReplica: int
    totalPods: int
    readyPods: int


class InferenceServiceStatus(TypedDict, total=False):
    observedGeneration: int
    components: dict[str, ComponentStatus]


class InferenceService(KubeObject, total=False):
    spec: InferenceServiceSpec
    status: InferenceServiceStatus


# -- WorkerMetadata (the fakes' Kubernetes discovery) ----------------------------------------


class WorkerMetadataSpec(TypedDict, total=False):
    dynamoNamespace: str
    podName: str
    metadata: dict[str, Any]


class WorkerMetadata(KubeObject, total=False):
    """What a fake engine publishes for Kubernetes discovery (``servecert/fakes/kube_registration.py``)."""

    spec: WorkerMetadataSpec


# -- the boundary: name what the API returned, once --------------------------------------------
# NB: the accessors below name each optional field's default once, so callers hold no `(x or {}).get` chains.


def condition_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Whether ``obj``'s ``status.conditions`` has ``kind`` with status "True" (a pod's Ready, a DGD's Ready)."""
    return any(c.get("type") == kind and c.get("status") == "True" for c in status_of(obj).get("conditions") or [])


def labels_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """``metadata.labels`` (none: empty), of an object or of nothing (an object not found)."""
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """``metadata.annotations`` (none: empty)."""
    return dict(((obj or {}).get("metadata") or {}).get("annotations") or {})


def generation_of(obj: Mapping[str, Any] | None) -> int:
    """``metadata.generation`` (0 when there is no object or no generation yet)."""
    return int(((obj or {}).get("metadata") or {}).get("generation", 0) or 0)


def status_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``status`` (empty until a controller wrote one), of an object or of nothing."""
    return (obj or {}).get("status") or {}


def spec_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``spec`` (empty when the object has none), of an object or of nothing."""
    return (obj or {}).get("spec") or {}


def scheduling_strategy(isvc: Mapping[str, Any]) -> Mapping[str, Any]:
    """An InferenceService's ``spec.schedulingStrategy`` (empty when it sets none)."""
    return spec_of(isvc).get("schedulingStrategy") or {}


def components(isvc: Mapping[str, Any] | None) -> dict[str, ComponentStatus]:
    """An InferenceService's ``status.components`` by role (empty until its controller wrote them)."""
    return dict(status_of(isvc).get("components") or {})


def node_count(role: Mapping[str, Any]) -> int:
    """Nodes per replica of an InferenceService role: ``multinode.nodeCount``, 1 for a role without multinode."""
    return int((role.get("multinode") or {}).get("nodeCount", 1))


def as_dgd(obj: Mapping[str, Any]) -> DynamoGraphDeployment:
    return cast(DynamoGraphDeployment, obj)


def as_inference_service(obj: Mapping[str, Any]) -> InferenceService:
    return cast(InferenceService, obj)


def as_pod(obj: Mapping[str, Any]) -> Pod:
    return cast(Pod, obj)
