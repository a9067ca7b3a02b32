"""What a DynamoGraphDeployment becomes: one pod per component replica, as pure functions.

Data flow: ``desired_pods(dgd, levels)`` takes the DGD object (as the API returns it) and the
domains of its ClusterTopology (or ``None`` when no frontend sets ``kvCacheTransferTopology``)
and returns complete pod manifests of the spec's revision. A revision is a hash of templates
(``revisions``): the workers' (every non-frontend component: image, args, env, resources, plus
the topology settings they are given, plus the frontend's template) and the frontend's. Seed 001
4.1.2: each worker revision lives in its own dynamo namespace, ``<k8s namespace>-<dgd>-<workers[:6]>``,
so old and new workers never discover each other and each has its own frontend. A frontend-only
change is a new workers revision too: seed 001 4.1 creates the new frontend in a new namespace B
and sets ``DYN_NAMESPACE = B`` on the workers (T3), so "frontends and workers within each isolated
namespace are always at the same version" — the workers roll with it. Pods are named
``<dgd>-<component>-<workers[:6]>-<index>`` (frontends ``...-<workers[:6]>-<frontend[:4]>-<index>``)
so that a restarted operator recomputes the same names and never creates duplicates, and two
revisions never collide; their labels carry both revisions (``rollout`` reads them back). What
each pod gets (seed 000):

* every pod: its component's ``extraPodSpec`` scheduling (nodeSelector, tolerations, affinity),
  ``DYN_NAMESPACE`` (its revision's dynamo namespace), Kubernetes discovery
  (``DYN_DISCOVERY_BACKEND=kubernetes`` and the pod's name, namespace and uid from the Downward
  API), the owner reference to the DGD (so deleting it removes everything);
* planner pods (seed 003): ``DYN_PARENT_DGD_K8S_NAME``, the DGD whose replicas the planner patches;
* frontend pods with ``kvCacheTransferTopology``: the router's level and mismatch policy env;
* worker pods (prefill, decode, worker) when a frontend sets it: ``DYN_TOPOLOGY_ENABLED=true``,
  the level, and a Downward API volume with one file per ClusterTopology level under
  ``/etc/podinfo/topology`` from the labels ``grove.io/topology.<domain>``; plus the annotation
  that asks the topology injector for those labels.

Without ``kvCacheTransferTopology`` nothing topology-related is added (backward compatibility).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servecert.protocol import kube_names as kn
from servecert.protocol.kube_objects import (
    DGDComponent,
    DynamoGraphDeployment,
    EnvVar,
    KubeObject,
    KvCacheTransferTopology,
    OwnerReference,
    Pod,
)
from servecert.reference_impl.operator.topology_injection import CLUSTER_TOPOLOGY_ANNOTATION

FRONTEND = "frontend"
WORKER_TYPES = frozenset({"prefill", "decode", "worker"})
PLANNER = "planner"
ENV_PARENT_DGD = "DYN_PARENT_DGD_K8S_NAME"
"""Seed 003: the planner "Uses DYN_PARENT_DGD_K8S_NAME to find its parent DGD (injected by operator)"."""
CONTAINER = "main"
SPEC_HASH_ANNOTATION = "servecert.io/component-spec"
WORKERS_REVISION_LABEL = "servecert.io/workers-revision"
FRONTEND_REVISION_LABEL = "servecert.io/frontend-revision"
PROXY = "proxy"
PROXY_LABEL = "servecert.io/dgd-proxy"
"""On the DGD's proxy pods and its proxy Service: the DGD's name."""
PROXY_PORT = 8000
PROXY_REPLICAS = 2
"""Seed 001 4.3.3 Cons: "Proxy pods must be replicated for HA"; the DGD's Service spreads connections over them."""
PROXY_LEAVE_S = 3
"""After SIGTERM a proxy replica keeps taking connections this long, while its Service drops it, then finishes its streams."""
PROXY_GRACE_S = 30
FRONTEND_PORT = 8000
"""Where frontends listen (the pod runner's default port for the frontend image)."""
PROXY_ADMIN_PORT = 8404
PROXY_SLOTS = 8
DEFAULT_MISMATCH_POLICY = "fail"
"""Seed 000: "The default for mismachPolicy will be fail" (the DGD's schema sets none: the operator applies it)."""
TERMINATION_GRACE_S = 30
"""Engines and frontends finish the streams in flight before they exit (up to 20 s); kubelet waits this long."""
TEMPLATE_KEYS = ("name", "type", "image", "args", "env", "resources", "extraPodSpec", "kvCacheTransferTopology")
SCHEDULING_KEYS = ("nodeSelector", "tolerations", "affinity")
"""What ``extraPodSpec`` may set on a component's pods (the CRD's fields)."""


@dataclass(frozen=True)
class Images:
    """Images used when a component names none (the suite's fakes)."""

    frontend: str = "servecert/frontend"
    worker: str = "servecert/fake-engine"
    proxy: str = "servecert/traffic-proxy"
    planner: str = "servecert/planner"


@dataclass(frozen=True)
class Revisions:
    """The template hashes of a DGD's workers and of its frontend (10 hex digits each)."""

    workers: str
    frontend: str


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:10]


def _template(component: DGDComponent) -> dict[str, Any]:
    """The fields whose change rolls the component; ``command`` only when set, so DGDs without one keep their revisions."""
    template = {key: component.get(key) for key in TEMPLATE_KEYS}
    return template | ({"command": component["command"]} if component.get("command") else {})


def revisions(dgd: DynamoGraphDeployment, frontend_rolls_workers: bool = True) -> Revisions:
    """Replicas and rolloutStrategy are not part of a template: changing them rolls nothing.

    ``frontend_rolls_workers=False`` leaves the frontend out of the workers' revision: a frontend-only
    change then joins the old workers' namespace (broken)."""
    workers = [_template(c) for c in components(dgd) if c.get("type") != FRONTEND]
    frontends = [_template(c) for c in components(dgd) if c.get("type") == FRONTEND]
    topology = {"constraint": (dgd.get("spec") or {}).get("topologyConstraint"), "transfer": transfer_topology(dgd)}
    together = [workers, topology, frontends] if frontend_rolls_workers else [workers, topology]
    return Revisions(_digest(together), _digest(frontends))


def dynamo_namespace(dgd: DynamoGraphDeployment, workers_revision: str | None = None, isolate: bool = True) -> str:
    """The dynamo namespace of one worker revision (the spec's when None); ``isolate=False``: one for all (broken)."""
    meta = dgd["metadata"]
    if not isolate:
        return f"{meta['namespace']}-{meta['name']}"
    rev = workers_revision or revisions(dgd).workers
    return f"{meta['namespace']}-{meta['name']}-{rev[:6]}"


def pod_revisions(pod: Pod) -> Revisions:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return Revisions(str(labels.get(WORKERS_REVISION_LABEL, "")), str(labels.get(FRONTEND_REVISION_LABEL, "")))


def transfer_topology(dgd: DynamoGraphDeployment, default_policy: str = DEFAULT_MISMATCH_POLICY) -> KvCacheTransferTopology | None:
    """The first frontend's ``kvCacheTransferTopology``, its omitted ``mismatchPolicy`` the seed's default; or None."""
    for component in components(dgd):
        topo = component.get("kvCacheTransferTopology")
        if component.get("type") == FRONTEND and topo:
            return {"mismatchPolicy": default_policy, **topo}
    return None


def cluster_topology_name(dgd: DynamoGraphDeployment) -> str | None:
    name = ((dgd.get("spec") or {}).get("topologyConstraint") or {}).get("clusterTopologyName")
    return str(name) if name else None


def components(dgd: DynamoGraphDeployment) -> list[DGDComponent]:
    return list((dgd.get("spec") or {}).get("components") or [])


def pod_name(dgd_name: str, component: DGDComponent, revs: Revisions, index: int) -> str:
    tag = revs.workers[:6] if component.get("type") != FRONTEND else f"{revs.workers[:6]}-{revs.frontend[:4]}"
    return f"{dgd_name}-{component['name']}-{tag}-{index}"


def desired_pods(
    dgd: DynamoGraphDeployment,
    levels: Sequence[str] | None,
    images: Images = Images(),
    counts: Mapping[str, int] | None = None,
    isolate: bool = True,
    topology_wait: str | None = None,
    default_policy: str = DEFAULT_MISMATCH_POLICY,
    revs: Revisions | None = None,
) -> dict[str, dict[str, Any]]:
    """name -> pod manifest for every replica of every component of the spec's revision (``revs``, ``revisions(dgd)`` when
    None; ``counts`` overrides replicas)."""
    revs = revs or revisions(dgd)
    pods: dict[str, dict[str, Any]] = {}
    for component in components(dgd):
        wanted = replicas(component) if counts is None else counts.get(str(component["name"]), replicas(component))
        for index in range(wanted):
            pod = component_pod(dgd, component, index, levels, images, revs, isolate, topology_wait, default_policy)
            pods[pod["metadata"]["name"]] = pod
    return pods


def replicas(component: DGDComponent) -> int:
    return int(component.get("replicas", 1))


def proxy_service_name(dgd: DynamoGraphDeployment) -> str:
    return f"{dgd['metadata']['name']}-{PROXY}"


def proxy_service(dgd: DynamoGraphDeployment) -> dict[str, Any]:
    """Seed 001 4.3.3: "a Service in front" of the proxy pods; ``status.address`` is its ClusterIP."""
    meta = dgd["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": proxy_service_name(dgd),
            "namespace": meta["namespace"],
            "labels": {PROXY_LABEL: meta["name"]},
            "ownerReferences": [owner_reference(dgd, f"{kn.DGD_GROUP}/{kn.DGD_VERSION}", kn.DGD_KIND)],
        },
        "spec": {
            "selector": {PROXY_LABEL: meta["name"], kn.COMPONENT_TYPE_LABEL: PROXY},
            "ports": [{"name": "http", "port": PROXY_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def proxy_pod(dgd: DynamoGraphDeployment, images: Images) -> dict[str, Any]:
    """Seed 001 4.3.3: one replica of the DGD's HAProxy, with empty slots the operator fills with frontends.

    Named by the API server (``generateName``), as a ReplicaSet's pods are: a replacement is made while the
    replica it replaces still terminates under its own name.
    """
    meta = dgd["metadata"]
    container = {
        "name": CONTAINER,
        "image": images.proxy,
        "args": ["--admin-port", str(PROXY_ADMIN_PORT), "--slots", str(PROXY_SLOTS), "--leave-seconds", str(PROXY_LEAVE_S)],
        "ports": [{"name": "http", "containerPort": PROXY_PORT}, {"name": "admin", "containerPort": PROXY_ADMIN_PORT}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{meta['name']}-{PROXY}-",
            "namespace": meta["namespace"],
            # NB: not the DGD-name label: selecting a DGD's pods by it gives its components, as before the proxy existed.
            "labels": {PROXY_LABEL: meta["name"], kn.COMPONENT_TYPE_LABEL: PROXY},
            "ownerReferences": [owner_reference(dgd, f"{kn.DGD_GROUP}/{kn.DGD_VERSION}", kn.DGD_KIND)],
        },
        "spec": {"containers": [container], "restartPolicy": "Always", "terminationGracePeriodSeconds": PROXY_GRACE_S},
    }


def owner_reference(obj: KubeObject, api_version: str, kind: str) -> OwnerReference:
    meta = obj["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"], "controller": True}


def component_pod(
    dgd: DynamoGraphDeployment,
    component: DGDComponent,
    index: int,
    levels: Sequence[str] | None,
    images: Images,
    revs: Revisions,
    isolate: bool = True,
    topology_wait: str | None = None,
    default_policy: str = DEFAULT_MISMATCH_POLICY,
) -> dict[str, Any]:
    meta = dgd["metadata"]
    ctype = str(component["type"])
    dyn_ns = dynamo_namespace(dgd, revs.workers, isolate)
    topo = transfer_topology(dgd, default_policy) if levels is not None else None
    env = _base_env(dyn_ns)
    annotations: dict[str, str] = {}
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if ctype == PLANNER:
        env.append(_env(ENV_PARENT_DGD, meta["name"]))
    if topo and ctype == FRONTEND:
        env += [_env(kn.ENV_TRANSFER_LEVEL, topo["level"]), _env(kn.ENV_MISMATCH_POLICY, topo["mismatchPolicy"])]
    if topo and ctype in WORKER_TYPES and levels is not None:
        env += [_env(kn.ENV_TOPOLOGY_ENABLED, "true"), _env(kn.ENV_TRANSFER_LEVEL, topo["level"])]
        env += [_env(kn.ENV_TOPOLOGY_WAIT, topology_wait)] if topology_wait is not None else []
        volumes.append(topology_volume(levels))
        mounts.append({"name": kn.TOPOLOGY_VOLUME, "mountPath": kn.TOPOLOGY_MOUNT_PATH, "readOnly": True})
        annotations[CLUSTER_TOPOLOGY_ANNOTATION] = str(cluster_topology_name(dgd))
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": component.get("image") or {FRONTEND: images.frontend, PLANNER: images.planner}.get(ctype, images.worker),
        **({"command": list(component["command"])} if component.get("command") else {}),
        "args": list(component.get("args") or []),
        "env": _merge_env(list(component.get("env") or []), env),
        "resources": dict(component.get("resources") or {}),
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(meta["name"], component, revs, index),
            "namespace": meta["namespace"],
            "labels": {
                kn.DYNAMO_NAMESPACE_LABEL: dyn_ns,
                kn.DGD_NAME_LABEL: meta["name"],
                kn.COMPONENT_LABEL: str(component["name"]),
                kn.COMPONENT_TYPE_LABEL: ctype,
                WORKERS_REVISION_LABEL: revs.workers,
                **({FRONTEND_REVISION_LABEL: revs.frontend} if ctype == FRONTEND else {}),
            },
            "annotations": annotations,
            "ownerReferences": [owner_reference(dgd, f"{kn.DGD_GROUP}/{kn.DGD_VERSION}", kn.DGD_KIND)],
        },
        "spec": {
            "containers": [container],
            "volumes": volumes,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": TERMINATION_GRACE_S,
            **scheduling(component),
        },
    }


def scheduling(component: DGDComponent) -> dict[str, Any]:
    """The component's ``extraPodSpec`` scheduling fields, as the pod spec carries them."""
    extra = component.get("extraPodSpec") or {}
    return {key: extra[key] for key in SCHEDULING_KEYS if extra.get(key)}


def topology_volume(levels: Sequence[str]) -> dict[str, Any]:
    items = [{"path": level, "fieldRef": {"fieldPath": f"metadata.labels['{kn.TOPOLOGY_LABEL_PREFIX}{level}']"}} for level in levels]
    return {"name": kn.TOPOLOGY_VOLUME, "downwardAPI": {"items": items}}


def _env(name: str, value: str) -> EnvVar:
    return {"name": name, "value": str(value)}


def _field_env(name: str, path: str) -> EnvVar:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _base_env(dyn_namespace: str) -> list[EnvVar]:
    return [
        _env(kn.ENV_DYN_NAMESPACE, dyn_namespace),
        _env(kn.ENV_DISCOVERY_BACKEND, kn.DISCOVERY_KUBERNETES),
        _field_env(kn.ENV_POD_NAME, "metadata.name"),
        _field_env(kn.ENV_POD_NAMESPACE, "metadata.namespace"),
        _field_env(kn.ENV_POD_UID, "metadata.uid"),
    ]


def _merge_env(user: list[EnvVar], ours: list[EnvVar]) -> list[EnvVar]:
    """The user's variables, then ours; ours win on a name clash (they carry the contract)."""
    taken = {item["name"] for item in ours}
    return [item for item in user if item.get("name") not in taken] + ours
