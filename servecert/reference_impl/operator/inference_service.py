"""What an InferenceService becomes (seed 004), as pure functions: pods, one PodGroup, status.

Data flow: ``plan(isvc, behaviour)`` returns the pods, (when gang scheduling applies) the one
shared Volcano PodGroup, and per multi-node replica the headless Service LWS would make for its
group. The seed has the controller create one LeaderWorkerSet per replica,
named ``{service}-{role}-{replica}``, and LWS create the pods; the reference operator creates the
pods LWS would create itself — leader ``{lws}-0``, workers ``{lws}-0-{w}`` (w from 1) — with
the labels and annotations the seed lists, because the LWS controller is not part of the
embedded cluster (see docs/operator.md). ``status(isvc, pods)`` aggregates per role.

Gang scheduling applies (seed 004's table) when a role is multi-node (``nodeCount >= 2``) or the
service is P/D disaggregated (it has a prefiller and a decoder); then every worker pod uses the
Volcano scheduler and joins the PodGroup named after the service. Router roles are not part of
the gang. The PodGroup carries:

* ``minTaskMember``: one key per replica, ``{role}-{replica}`` -> pods per replica (the seed's keys);
* ``minMember``: the pods of one replica of every gang role — the smallest service that can run
  (seed 004: "at least one prefill AND one decode replica");
* ``subGroupPolicy``: one per gang role, grouping its pods by ``fusioninfer.io/replica-index`` into
  sub-groups of ``nodeCount`` pods with ``minSubGroups: 1``.

Why not the seed's literal ``minMember = all pods``: on Volcano (v1.15.1, measured, see
docs/gang-scheduling.md) that blocks story 4 at 64 and 48 GPUs, where the seed's table wants
1P + 1D running; and with a lower ``minMember`` Volcano skips every ``minTaskMember`` check
(``JobInfo.CheckTaskReady`` returns early when minMember < their sum), binding half a replica.
Volcano's sub-groups are all-or-nothing per replica and ``minSubGroups`` per role, which is the
seed's table row by row.

Updates (``replace``): every pod carries ``TEMPLATE_HASH``, a hash of what its replica's LWS
template makes of it (spec, labels but the revision, annotations). A spec change that alters a
replica's pods makes its group stale; as LWS does, a stale group is replaced whole — all its pods
deleted, the new ones created only once every old one is gone, labelled with the new generation
as ``fusioninfer.io/revision`` — so no replica ever runs pods of two templates. Replicas of a role
are replaced one at a time (LWS's default maxUnavailable 1, maxSurge 0): the next stale group only
once no other group of the role is terminating or coming up.
"""

from __future__ import annotations

import copy
import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects
from servecert.protocol.kube_objects import (
    Container,
    InferenceService,
    Pod,
    PodGroup,
    PodGroupSpec,
    Role,
    SubGroupPolicy,
    as_inference_service,
)
from servecert.reference_impl.operator.behaviour import REFERENCE, Behaviour
from servecert.reference_impl.operator.dgd_pods import owner_reference

ROUTER = "router"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
RAY_PORT = 6379
TEMPLATE_HASH = "servecert.io/pod-template-hash"
"""What the replica's template makes of a pod, hashed (LWS keeps its own as ``leaderworkerset.sigs.k8s.io/template-revision-hash``)."""


@dataclass(frozen=True)
class Plan:
    pods: dict[str, dict[str, Any]]
    pod_group: PodGroup | None
    services: dict[str, dict[str, Any]]
    """Per multi-node replica, the headless Service LWS makes for its group (the leader address resolves through it)."""


def roles(isvc: InferenceService) -> list[Role]:
    return list(kube_objects.spec_of(isvc).get("roles") or [])


def replicas(role: Role) -> int:
    value = role.get("replicas")
    return 1 if value is None else int(value)


def gang_scheduled(isvc: InferenceService) -> bool:
    types = {role.get("componentType") for role in roles(isvc)}
    multinode = any(kube_objects.node_count(role) >= 2 for role in roles(isvc) if role.get("componentType") != ROUTER)
    return multinode or {"prefiller", "decoder"} <= types


def lws_name(service: str, role: str, replica: int) -> str:
    return f"{service}-{role}-{replica}"


def plan(obj: Mapping[str, Any], behaviour: Behaviour) -> Plan:
    """``obj``: the InferenceService as the API returns it (benchmarks pass a seed example)."""
    isvc = as_inference_service(obj)
    gang = gang_scheduled(isvc)
    pods: dict[str, dict[str, Any]] = {}
    tasks: dict[str, int] = {}
    services: dict[str, dict[str, Any]] = {}
    for role in roles(isvc):
        in_gang = gang and role.get("componentType") != ROUTER
        for replica in range(replicas(role)):
            if kube_objects.node_count(role) >= 2 and behaviour.leader_service:
                service = leader_service(isvc, lws_name(isvc["metadata"]["name"], role["name"], replica))
                services[service["metadata"]["name"]] = service
            task = behaviour.task_key(role["name"], replica)
            for pod in replica_pods(isvc, role, replica, task if in_gang else None, behaviour):
                pod["metadata"]["annotations"][TEMPLATE_HASH] = template_hash(pod)
                pods[pod["metadata"]["name"]] = pod
            if in_gang:
                tasks[(behaviour.pod_group_key or behaviour.task_key)(role["name"], replica)] = kube_objects.node_count(role)
    group = (
        pod_group(
            isvc,
            tasks,
            behaviour.pod_group_as_seed_example,
            behaviour.network_topology,
            behaviour.worker_topology,
            behaviour.worker_topology_mode,
        )
        if gang
        else None
    )
    return Plan(pods, group, services)


def leader_service(isvc: InferenceService, lws: str) -> dict[str, Any]:
    """The headless Service LWS creates for a group: named after the LWS, selecting its pods, publishing them before they
    are Ready. With each pod's ``hostname`` and ``subdomain`` (``_pod``) the cluster DNS answers ``{lws}-0.{lws}.{ns}``
    with the leader's IP: the ``LWS_LEADER_ADDRESS`` the workers join (seed 004: ``ray start --address=$LWS_LEADER_ADDRESS``).
    """
    meta = isvc["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": lws,
            "namespace": meta["namespace"],
            "labels": {kn.IS_SERVICE_LABEL: meta["name"], LWS_NAME_LABEL: lws},
            "ownerReferences": [owner_reference(isvc, f"{kn.IS_GROUP}/{kn.IS_VERSION}", kn.IS_KIND)],
        },
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {LWS_NAME_LABEL: lws}},
    }


def template_hash(pod: Mapping[str, Any]) -> str:
    """The pod as its template makes it: spec, labels but the revision (the generation moves on any change), annotations."""
    meta = pod["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != kn.IS_REVISION_LABEL}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != TEMPLATE_HASH}
    text = json.dumps({"spec": pod["spec"], "labels": labels, "annotations": annotations}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _group_of(pod: Mapping[str, Any]) -> str:
    return str(kube_objects.labels_of(pod).get(LWS_NAME_LABEL, pod["metadata"]["name"]))


def _role_of(pod: Mapping[str, Any]) -> str:
    return str(kube_objects.labels_of(pod).get(kn.IS_ROLE_LABEL, ""))


def _terminating(pod: Mapping[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _stale(pod: Mapping[str, Any], desired: Mapping[str, Mapping[str, Any]]) -> bool:
    want = desired.get(pod["metadata"]["name"])
    have = kube_objects.annotations_of(pod).get(TEMPLATE_HASH)
    return want is not None and have != want["metadata"]["annotations"][TEMPLATE_HASH]


@dataclass(frozen=True)
class Roll:
    """One reconcile's update step: pods to delete now, and groups whose pods must not be created yet."""

    delete: list[str]
    hold: set[str]


def replace(desired: Mapping[str, Mapping[str, Any]], existing: Sequence[Pod], whole_replicas: bool = True) -> Roll:
    """Replace stale groups whole, one group per role at a time (see the module docstring).

    ``whole_replicas`` False replaces one stale pod of a group at a time, the new pod beside the group's old ones (broken:
    a replica then runs two templates at once).
    """
    by_group: dict[str, list[Pod]] = {}
    for pod in existing:
        by_group.setdefault(_group_of(pod), []).append(pod)
    wanted: dict[str, list[str]] = {}
    for name, manifest in desired.items():
        wanted.setdefault(_group_of(manifest), []).append(name)
    hold = {group for group, pods in by_group.items() if any(_terminating(p) for p in pods)}
    busy: set[str] = set()  # roles with a group terminating or coming up
    for group, names in wanted.items():
        pods = by_group.get(group, [])
        live = {p["metadata"]["name"]: p for p in pods if not _terminating(p)}
        coming_up = any(n not in live or not pod_ready(live[n]) for n in names) and not any(_stale(p, desired) for p in live.values())
        if group in hold or coming_up:
            busy.add(_role_of(desired[names[0]]))
    delete: list[str] = []
    for group, names in sorted(wanted.items()):
        role = _role_of(desired[names[0]])
        stale = [p for p in by_group.get(group, []) if not _terminating(p) and _stale(p, desired)]
        if not stale or role in busy:
            continue
        busy.add(role)
        hold.add(group)
        delete += [p["metadata"]["name"] for p in (stale if whole_replicas else stale[:1])]
    return Roll(delete, hold if whole_replicas else set())


def gang_roles(isvc: InferenceService) -> list[Role]:
    """The roles whose pods join the gang, with at least one replica."""
    return [r for r in roles(isvc) if r.get("componentType") != ROUTER and replicas(r) > 0]


def min_member(isvc: InferenceService) -> int:
    """Pods of one replica of every gang role: the smallest service that can run."""
    return sum(kube_objects.node_count(r) for r in gang_roles(isvc))


def sub_group_policy(isvc: InferenceService, worker_topology: str = "workers", worker_mode: str | None = None) -> list[SubGroupPolicy]:
    """Per gang role: each replica's pods all-or-nothing, at least one replica of the role.

    A role whose ``multinode.workerNetworkTopology`` is set (seed 002's use case 4) gets two sub-groups per replica
    instead: its workers (every pod but the leader) under that network topology, first, as Volcano gives a pod to the
    first policy whose selector matches it; then its leader alone, unconstrained. ``worker_topology``: ``workers`` (the
    reference), ``replica`` puts the topology on the whole replica, leader included, ``drop`` ignores it (both broken);
    ``worker_mode`` other than None writes that mode whatever the spec says (broken).
    """
    service = isvc["metadata"]["name"]
    out: list[SubGroupPolicy] = []
    for role in gang_roles(isvc):
        name, size = str(role["name"]), kube_objects.node_count(role)
        labels = {kn.IS_SERVICE_LABEL: service, kn.IS_ROLE_LABEL: name}
        topology = dict((role.get("multinode") or {}).get("workerNetworkTopology") or {})
        if topology and worker_mode is not None:
            topology["mode"] = worker_mode
        whole: SubGroupPolicy = {
            "name": name,
            "subGroupSize": size,
            "minSubGroups": 1,
            "labelSelector": {"matchLabels": labels},
            "matchLabelKeys": [kn.IS_REPLICA_LABEL],
        }
        if not topology or worker_topology == "drop" or size < 2:
            out.append(whole)
        elif worker_topology == "replica":
            out.append({**whole, "networkTopology": topology})
        else:
            workers: SubGroupPolicy = {
                **whole,
                "name": f"{name}-workers",
                "subGroupSize": size - 1,
                "labelSelector": {
                    "matchLabels": labels,
                    "matchExpressions": [{"key": LWS_WORKER_INDEX_LABEL, "operator": "NotIn", "values": ["0"]}],
                },
                "networkTopology": topology,
            }
            leader: SubGroupPolicy = {
                **whole,
                "name": f"{name}-leader",
                "subGroupSize": 1,
                "labelSelector": {"matchLabels": {**labels, LWS_WORKER_INDEX_LABEL: "0"}},
            }
            out.extend((workers, leader))
    return out


def pod_group(
    isvc: InferenceService,
    tasks: Mapping[str, int],
    as_seed_example: bool = False,
    network_topology: bool = True,
    worker_topology: str = "workers",
    worker_mode: str | None = None,
) -> PodGroup:
    """The service's PodGroup; ``as_seed_example``: seed 004's example fields instead (every pod, no subGroupPolicy; broken).

    ``schedulingStrategy.networkTopology`` (seed 002's job-level topology) becomes the PodGroup's ``networkTopology``;
    ``network_topology`` False drops it (broken).
    """
    meta = isvc["metadata"]
    spec: PodGroupSpec = {
        "minMember": min_member(isvc),
        "minTaskMember": dict(tasks),
        "subGroupPolicy": sub_group_policy(isvc, worker_topology, worker_mode),
    }
    if as_seed_example:
        spec = {"minMember": sum(tasks.values()), "minTaskMember": dict(tasks)}
    topology = kube_objects.scheduling_strategy(isvc).get("networkTopology")
    if topology and network_topology:
        spec["networkTopology"] = dict(topology)
    return {
        "apiVersion": f"{kn.PG_GROUP}/{kn.PG_VERSION}",
        "kind": kn.PG_KIND,
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {kn.IS_SERVICE_LABEL: meta["name"]},
            "ownerReferences": [owner_reference(isvc, f"{kn.IS_GROUP}/{kn.IS_VERSION}", kn.IS_KIND)],
        },
        "spec": spec,
    }


def replica_pods(
    isvc: InferenceService, role: Role, replica: int, task: str | None, behaviour: Behaviour = REFERENCE
) -> list[dict[str, Any]]:
    """The leader (and workers) of one replica, as the per-replica LWS would create them."""
    service = isvc["metadata"]["name"]
    lws = lws_name(service, role["name"], replica)
    size = kube_objects.node_count(role)
    pods = []
    for worker in range(size):
        name = behaviour.pod_name(lws, worker)
        pods.append(_pod(isvc, role, replica, task, name, lws, worker, size, behaviour.scheduler_name))
    return pods


def _pod(
    isvc: InferenceService,
    role: Role,
    replica: int,
    task: str | None,
    name: str,
    lws: str,
    worker: int,
    size: int,
    gang_scheduler: str,
) -> dict[str, Any]:
    meta = isvc["metadata"]
    template = copy.deepcopy(role.get("template") or {})
    template_spec = template.get("spec") or {}
    spec: dict[str, Any] = dict(template_spec)
    tmeta = template.get("metadata") or {}
    labels = {
        **(tmeta.get("labels") or {}),
        kn.IS_SERVICE_LABEL: meta["name"],
        kn.IS_COMPONENT_TYPE_LABEL: str(role["componentType"]),
        kn.IS_ROLE_LABEL: str(role["name"]),
        kn.IS_REPLICA_LABEL: str(replica),
        kn.IS_REVISION_LABEL: str(meta.get("generation", 1)),
        LWS_NAME_LABEL: lws,
        LWS_GROUP_INDEX_LABEL: "0",
        LWS_WORKER_INDEX_LABEL: str(worker),
    }
    annotations = dict(tmeta.get("annotations") or {})
    scheduler = kube_objects.scheduling_strategy(isvc).get("schedulerName")
    if task is not None:
        annotations[kn.GROUP_NAME_ANNOTATION] = meta["name"]
        annotations[kn.TASK_SPEC_ANNOTATION] = task
        spec["schedulerName"] = scheduler or gang_scheduler
    elif scheduler:
        spec["schedulerName"] = scheduler
    if size >= 2:
        spec["containers"] = _multinode_containers(template_spec.get("containers") or [], leader=worker == 0, lws=lws, ns=meta["namespace"])
        # As LWS does: a stable DNS name under the group's subdomain (its headless Service is LWS's; see docs/operator.md).
        spec["hostname"], spec["subdomain"] = name, lws
    spec.setdefault("restartPolicy", "Always")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(isvc, f"{kn.IS_GROUP}/{kn.IS_VERSION}", kn.IS_KIND)],
        },
        "spec": spec,
    }


def _multinode_containers(containers: Sequence[Container], *, leader: bool, lws: str, ns: str) -> list[Container]:
    """Seed 004: the leader starts the Ray head and the engine; workers join the Ray cluster."""
    out = []
    for index, container in enumerate(containers):
        c = container.copy()
        if index == 0:
            original = (
                [*(c.get("command") or []), *(c.get("args") or [])] if c.get("command") else ["vllm", "serve", *(c.get("args") or [])]
            )
            c["command"] = ["/bin/sh", "-c"]
            if leader:
                c["args"] = [f"ray start --head --port={RAY_PORT} && {shlex.join(original)} --distributed-executor-backend ray"]
                ports = [p for p in c.get("ports") or [] if p.get("containerPort") != RAY_PORT]
                c["ports"] = [*ports, {"containerPort": RAY_PORT}]
            else:
                c["args"] = [f"ray start --address=$LWS_LEADER_ADDRESS:{RAY_PORT} --block"]
                c.pop("ports", None)
            env = [e for e in c.get("env") or [] if e.get("name") != "LWS_LEADER_ADDRESS"]
            c["env"] = [*env, {"name": "LWS_LEADER_ADDRESS", "value": f"{lws}-0.{lws}.{ns}"}]
        out.append(c)
    return out


def pod_ready(pod: Pod) -> bool:
    conditions = kube_objects.status_of(pod).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _failed(pod: Pod) -> bool:
    return kube_objects.status_of(pod).get("phase") == "Failed"


def _unknown(pod: Pod) -> bool:
    """Kubernetes could not obtain the pod's state (its phase is Unknown, as when its node stops reporting)."""
    return kube_objects.status_of(pod).get("phase") == "Unknown"


def ready_replicas(members: Mapping[int, Sequence[Pod]], size: int, readiness: str = "all-pods") -> int:
    """Seed 004: "a replica is ready only when all its nodes are ready"; ``readiness`` other than ``all-pods`` is broken.

    ``members``: each wanted replica's serving pods. ``leader``: a replica whose leader is Ready; ``pod-count``: ready pods
    divided by the pods of a replica; ``existing-pods``: a replica whose serving pods are all Ready, however few.
    """
    if readiness == "pod-count":
        ready = sum(1 for pods in members.values() for p in pods if pod_ready(p))
        return min(len(members), ready // max(size, 1))
    if readiness == "leader":
        return sum(1 for pods in members.values() if any(_worker_index(p) == 0 and pod_ready(p) for p in pods))
    if readiness == "existing-pods":
        return sum(1 for pods in members.values() if pods and all(pod_ready(p) for p in pods))
    return sum(1 for pods in members.values() if len(pods) == size and all(pod_ready(p) for p in pods))


def _worker_index(pod: Pod) -> int:
    return int(kube_objects.labels_of(pod).get(LWS_WORKER_INDEX_LABEL, "-1"))


def role_status(isvc: InferenceService, role: Role, pods: Sequence[Pod], now: str, behaviour: Behaviour = REFERENCE) -> dict[str, Any]:
    """Seed 004's ComponentStatus for one role from the pods that exist.

    Phase: Failed if a pod failed; Unknown if Kubernetes cannot say how a pod is (its phase is Unknown); Running when every
    replica is ready; Deploying once a pod is bound; Pending before.
    """
    desired, size = replicas(role), kube_objects.node_count(role)
    wanted = {str(r) for r in range(desired)}  # NB: pods of replicas being removed do not count
    mine = [
        p
        for p in pods
        if kube_objects.labels_of(p).get(kn.IS_ROLE_LABEL) == role["name"]
        and p["metadata"]["labels"].get(kn.IS_REPLICA_LABEL) in wanted
    ]
    serving = [p for p in mine if behaviour.terminating_serves or not _terminating(p)]  # NB: a pod being replaced or removed serves no more
    ready_pods = sum(1 for p in serving if pod_ready(p))
    members = {r: [p for p in serving if p["metadata"]["labels"].get(kn.IS_REPLICA_LABEL) == str(r)] for r in range(desired)}
    ready = ready_replicas(members, size, behaviour.replica_readiness)
    if any(_failed(p) for p in mine):
        phase = "Failed"
    elif behaviour.report_unknown and any(_unknown(p) for p in serving):
        phase = "Unknown"
    elif ready == desired:
        phase = "Running"
    elif any(kube_objects.spec_of(p).get("nodeName") for p in mine):
        phase = "Deploying"
    else:
        phase = "Pending"
    return {
        "desiredReplicas": desired,
        "readyReplicas": ready,
        "nodesPerReplica": size,
        "totalPods": desired * size,
        "readyPods": ready_pods,
        "phase": phase,
        "lastUpdateTime": now,
    }


def status(isvc: InferenceService, pods: Sequence[Pod], now: str, behaviour: Behaviour = REFERENCE) -> dict[str, Any]:
    comps = {role["name"]: role_status(isvc, role, pods, now, behaviour) for role in roles(isvc)}
    ready = all(c["phase"] == "Running" for c in comps.values())
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "AllRolesRunning" if ready else "RolesNotReady",
        "message": "every role has all its replicas ready" if ready else "waiting for replicas to become ready",
    }
    return {"observedGeneration": isvc["metadata"].get("generation", 1), "components": comps, "conditions": [condition]}
