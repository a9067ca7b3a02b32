"""Names shared on the cluster by the operator, the fake engines, the frontend and the suite.

The API groups and kinds of the resources users apply (seed 000's DynamoGraphDeployment and
ClusterTopology, seed 004's InferenceService), the worker-metadata resource the engines publish
for Kubernetes discovery, the labels and env variables that tie a pod to its deployment. They
live in ``protocol`` because every side must spell them the same way and none may import another.
"""

from __future__ import annotations

from typing import Final

# DynamoGraphDeployment (seed 000 / 001), namespaced.
DGD_GROUP: Final = "nvidia.com"
DGD_VERSION: Final = "v1beta1"
DGD_PLURAL: Final = "dynamographdeployments"
DGD_KIND: Final = "DynamoGraphDeployment"

# InferenceService (seed 004), namespaced.
IS_GROUP: Final = "fusioninfer.io"
IS_VERSION: Final = "v1alpha1"
IS_PLURAL: Final = "inferenceservices"
IS_KIND: Final = "InferenceService"

# ClusterTopology (Grove, seed 000), cluster-scoped.
CT_GROUP: Final = "grove.io"
CT_VERSION: Final = "v1alpha1"
CT_PLURAL: Final = "clustertopologies"
CT_KIND: Final = "ClusterTopology"

# Worker metadata for Kubernetes discovery, namespaced, one per engine, owned by its pod.
WM_GROUP: Final = "servecert.io"
WM_VERSION: Final = "v1alpha1"
WM_PLURAL: Final = "workermetadatas"
WM_KIND: Final = "WorkerMetadata"

# Volcano PodGroup and the pod annotations that join one (seed 004).
PG_GROUP: Final = "scheduling.volcano.sh"
PG_VERSION: Final = "v1beta1"
PG_PLURAL: Final = "podgroups"
PG_KIND: Final = "PodGroup"
GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
TASK_SPEC_ANNOTATION: Final = "volcano.sh/task-spec"

# Topology injection (seed 000): labels patched onto pods after binding, files projected from them.
TOPOLOGY_LABEL_PREFIX: Final = "grove.io/topology."
TOPOLOGY_MOUNT_PATH: Final = "/etc/podinfo/topology"
TOPOLOGY_VOLUME: Final = "topology"

# Labels the reference operator puts on what it creates from a DGD.
DYNAMO_NAMESPACE_LABEL: Final = "nvidia.com/dynamo-namespace"
DGD_NAME_LABEL: Final = "nvidia.com/dynamo-graph-deployment-name"
COMPONENT_LABEL: Final = "nvidia.com/dynamo-component"
COMPONENT_TYPE_LABEL: Final = "nvidia.com/dynamo-component-type"

# Labels on what is created from an InferenceService (seed 004).
IS_SERVICE_LABEL: Final = "fusioninfer.io/service"
IS_COMPONENT_TYPE_LABEL: Final = "fusioninfer.io/component-type"
IS_ROLE_LABEL: Final = "fusioninfer.io/role-name"
IS_REPLICA_LABEL: Final = "fusioninfer.io/replica-index"
IS_REVISION_LABEL: Final = "fusioninfer.io/revision"

# Env the operator sets and the engines / frontend read.
ENV_DYN_NAMESPACE: Final = "DYN_NAMESPACE"
ENV_TOPOLOGY_ENABLED: Final = "DYN_TOPOLOGY_ENABLED"
ENV_TOPOLOGY_WAIT: Final = "DYN_TOPOLOGY_WAIT_SECONDS"  # the worker's retry period for its topology file (the fakes' knob)
ENV_TRANSFER_LEVEL: Final = "DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL"
ENV_MISMATCH_POLICY: Final = "DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY"
ENV_DISCOVERY_BACKEND: Final = "DYN_DISCOVERY_BACKEND"
DISCOVERY_KUBERNETES: Final = "kubernetes"
ENV_POD_NAME: Final = "POD_NAME"
ENV_POD_NAMESPACE: Final = "POD_NAMESPACE"
ENV_POD_UID: Final = "POD_UID"
