"""What a DynamoGraphDeployment becomes: one pod per component replica, as pure functions.

Data flow: ``desired_pods(dgd, levels)`` takes the DGD object (as the API returns it) and the
domains of its ClusterTopology (or ``None`` when no frontend sets ``kvCacheTransferTopology``)
and returns complete pod manifests, named ``<dgd>-<component>-<index>`` so that a restarted
operator recomputes the same names and never creates duplicates. What each pod gets (seed 000):

* every pod: ``DYN_NAMESPACE`` (``<k8s namespace>-<dgd>``), Kubernetes discovery
  (``DYN_DISCOVERY_BACKEND=kubernetes`` and the pod's name, namespace and uid from the Downward
  API), the owner reference to the DGD (so deleting it removes everything);
* frontend pods with ``kvCacheTransferTopology``: the router's level and mismatch policy env;
* worker pods (prefill, decode, worker) when a frontend sets it: ``DYN_TOPOLOGY_ENABLED=true``,
  the level, and a Downward API volume with one file per ClusterTopology level under
  ``/etc/podinfo/topology`` from the labels ``grove.io/topology.<domain>``; plus the annotation
  that asks the topology injector for those labels.

Without ``kvCacheTransferTopology`` nothing topology-related is added (backward compatibility).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from protocol import kube_names as kn
from reference_impl.operator.topology_injection import CLUSTER_TOPOLOGY_ANNOTATION

FRONTEND = "frontend"
WORKER_TYPES = frozenset({"prefill", "decode", "worker"})
CONTAINER = "main"
SPEC_HASH_ANNOTATION = "servecert.io/component-spec"


@dataclass(frozen=True)
class Images:
    """Images used when a component names none (the suite's fakes)."""

    frontend: str = "servecert/frontend"
    worker: str = "servecert/fake-engine"


def dynamo_namespace(dgd: Mapping[str, Any]) -> str:
    meta = dgd["metadata"]
    return f"{meta['namespace']}-{meta['name']}"


def transfer_topology(dgd: Mapping[str, Any]) -> dict[str, Any] | None:
    """The first frontend's ``kvCacheTransferTopology`` (with defaults), or None."""
    for component in components(dgd):
        topo = component.get("kvCacheTransferTopology")
        if component.get("type") == FRONTEND and topo:
            return {"mismatchPolicy": "fail", **topo}
    return None


def cluster_topology_name(dgd: Mapping[str, Any]) -> str | None:
    name = ((dgd.get("spec") or {}).get("topologyConstraint") or {}).get("clusterTopologyName")
    return str(name) if name else None


def components(dgd: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((dgd.get("spec") or {}).get("components") or [])


def pod_name(dgd_name: str, component: str, index: int) -> str:
    return f"{dgd_name}-{component}-{index}"


def desired_pods(dgd: Mapping[str, Any], levels: Sequence[str] | None, images: Images = Images()) -> dict[str, dict[str, Any]]:
    """name -> pod manifest for every replica of every component."""
    pods: dict[str, dict[str, Any]] = {}
    for component in components(dgd):
        for index in range(int(component.get("replicas", 1))):
            pod = component_pod(dgd, component, index, levels, images)
            pods[pod["metadata"]["name"]] = pod
    return pods


def owner_reference(obj: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"], "controller": True}


def component_pod(
    dgd: Mapping[str, Any], component: Mapping[str, Any], index: int, levels: Sequence[str] | None, images: Images
) -> dict[str, Any]:
    meta = dgd["metadata"]
    ctype = str(component["type"])
    topo = transfer_topology(dgd) if levels is not None else None
    env = _base_env(dynamo_namespace(dgd))
    annotations: dict[str, str] = {}
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if topo and ctype == FRONTEND:
        env += [_env(kn.ENV_TRANSFER_LEVEL, topo["level"]), _env(kn.ENV_MISMATCH_POLICY, topo["mismatchPolicy"])]
    if topo and ctype in WORKER_TYPES and levels is not None:
        env += [_env(kn.ENV_TOPOLOGY_ENABLED, "true"), _env(kn.ENV_TRANSFER_LEVEL, topo["level"])]
        volumes.append(topology_volume(levels))
        mounts.append({"name": kn.TOPOLOGY_VOLUME, "mountPath": kn.TOPOLOGY_MOUNT_PATH, "readOnly": True})
        annotations[CLUSTER_TOPOLOGY_ANNOTATION] = str(cluster_topology_name(dgd))
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": component.get("image") or (images.frontend if ctype == FRONTEND else images.worker),
        "args": list(component.get("args") or []),
        "env": _merge_env(list(component.get("env") or []), env),
        "resources": dict(component.get("resources") or {}),
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(meta["name"], component["name"], index),
            "namespace": meta["namespace"],
            "labels": {
                kn.DYNAMO_NAMESPACE_LABEL: dynamo_namespace(dgd),
                kn.DGD_NAME_LABEL: meta["name"],
                kn.COMPONENT_LABEL: str(component["name"]),
                kn.COMPONENT_TYPE_LABEL: ctype,
            },
            "annotations": annotations,
            "ownerReferences": [owner_reference(dgd, f"{kn.DGD_GROUP}/{kn.DGD_VERSION}", kn.DGD_KIND)],
        },
        "spec": {"containers": [container], "volumes": volumes, "restartPolicy": "Always", "terminationGracePeriodSeconds": 5},
    }


def topology_volume(levels: Sequence[str]) -> dict[str, Any]:
    items = [{"path": level, "fieldRef": {"fieldPath": f"metadata.labels['{kn.TOPOLOGY_LABEL_PREFIX}{level}']"}} for level in levels]
    return {"name": kn.TOPOLOGY_VOLUME, "downwardAPI": {"items": items}}


def _env(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": str(value)}


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _base_env(dyn_namespace: str) -> list[dict[str, Any]]:
    return [
        _env(kn.ENV_DYN_NAMESPACE, dyn_namespace),
        _env(kn.ENV_DISCOVERY_BACKEND, kn.DISCOVERY_KUBERNETES),
        _field_env(kn.ENV_POD_NAME, "metadata.name"),
        _field_env(kn.ENV_POD_NAMESPACE, "metadata.namespace"),
        _field_env(kn.ENV_POD_UID, "metadata.uid"),
    ]


def _merge_env(user: list[dict[str, Any]], ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user's variables, then ours; ours win on a name clash (they carry the contract)."""
    taken = {item["name"] for item in ours}
    return [item for item in user if item.get("name") not in taken] + ours
