"""Level-based reconciliation against the API: make the cluster match ``dgd_pods`` / ``inference_service``.

Every function reads what exists, compares it with what is desired, and creates what is
missing, deletes what is extra (only objects the resource owns) and writes status. They are
idempotent: names are deterministic and a 409 on create means the object is already there, so
the operator can be killed at any point and a restarted one converges without duplicates or
orphans. kopf calls them on create/update/resume and on a timer.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, kube_raw
from servecert.protocol.kube_objects import (
    ClusterTopology,
    DGDStatus,
    DynamoGraphDeployment,
    InferenceService,
    KubeObject,
    Pod,
    PodGroup,
    RolloutStatus,
    as_pod,
)
from servecert.reference_impl.operator import (
    dgd_pods,
    dgd_rollout,
    events,
    frontend_routes,
    inference_service,
    proxy_weights,
    rollout_plan,
    topology_injection,
)
from servecert.reference_impl.operator.behaviour import REFERENCE, Behaviour, bound_node
from servecert.reference_impl.traffic_split.runtime_api import RuntimeApi, RuntimeApiError

log = logging.getLogger("servecert.operator")
TIMEOUT_S = 10
WEIGHTS_APPLIED = "weights applied"


@dataclass
class Reconciler:
    api: Any
    behaviour: Behaviour = REFERENCE
    images: dgd_pods.Images = field(default_factory=dgd_pods.Images)
    reconciled: set[str] = field(default_factory=set)
    """Uids of the DGDs reconciled since this process started (only the broken ``resume_rollouts=False`` reads it)."""
    configured_proxies: set[str] = field(default_factory=set)
    """Uids of proxy replicas given some weight at least once (only the broken ``sync_every_proxy=False`` reads it)."""

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> Any:
        return client.CustomObjectsApi(self.api)

    # -- lookups ---------------------------------------------------------------------------
    def crd_installed(self) -> bool:
        try:
            client.ApiextensionsV1Api(self.api).read_custom_resource_definition(f"{kn.CT_PLURAL}.{kn.CT_GROUP}", _request_timeout=TIMEOUT_S)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def cluster_topology(self, name: str) -> ClusterTopology | None:
        try:
            found: ClusterTopology = self.custom.get_cluster_custom_object(
                kn.CT_GROUP, kn.CT_VERSION, kn.CT_PLURAL, name, _request_timeout=TIMEOUT_S
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def latest(self, resource: tuple[str, str, str], namespace: str, name: str, uid: str) -> KubeObject | None:
        """The object as the API server has it now; None once it is gone or replaced by another of the same name."""
        group, version, plural = resource
        try:
            found: KubeObject = self.custom.get_namespaced_custom_object(
                group, version, namespace, plural, name, _request_timeout=TIMEOUT_S
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return found if found["metadata"].get("uid") == uid else None

    def domains(self, name: str) -> list[str] | None:
        found = self.cluster_topology(name)
        return None if found is None else [level.domain for level in topology_injection.levels_of(found)]

    # -- pods ------------------------------------------------------------------------------
    def _owned_pods(self, namespace: str, selector: str, owner_uid: str) -> list[Pod]:
        found = self.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False, _request_timeout=TIMEOUT_S)
        return [as_pod(p) for p in kube_raw.items_of(found) if _owned_by(p, owner_uid)]

    def _sync_pods(self, namespace: str, desired: Mapping[str, dict[str, Any]], existing: list[Pod]) -> None:
        have = {p["metadata"]["name"] for p in existing}
        for name, manifest in desired.items():
            if name not in have:
                self._create_pod(namespace, manifest)
        for pod in existing:
            name = pod["metadata"]["name"]
            if name not in desired and not pod["metadata"].get("deletionTimestamp"):
                log.info("deleting pod %s/%s: no longer desired", namespace, name)
                self._ignore(404, self.core.delete_namespaced_pod, name, namespace, grace_period_seconds=5)

    def _sync_services(self, namespace: str, selector: str, owner_uid: str, desired: Mapping[str, dict[str, Any]]) -> None:
        """Create the desired Services the owner lacks; delete the ones it owns that are no longer desired."""
        found = self.core.list_namespaced_service(namespace, label_selector=selector, _preload_content=False, _request_timeout=TIMEOUT_S)
        owned = {s["metadata"]["name"] for s in kube_raw.items_of(found) if _owned_by(s, owner_uid)}
        for name, manifest in desired.items():
            if name not in owned:
                log.info("creating Service %s/%s", namespace, name)
                self._ignore(409, self.core.create_namespaced_service, namespace, manifest)
        for name in owned - set(desired):
            log.info("deleting Service %s/%s: no longer desired", namespace, name)
            self._ignore(404, self.core.delete_namespaced_service, name, namespace)

    def _create_pod(self, namespace: str, pod: dict[str, Any]) -> None:
        try:
            made = kube_raw.from_response(
                self.core.create_namespaced_pod(namespace, pod, _preload_content=False, _request_timeout=TIMEOUT_S)
            )
        except ApiException as exc:
            if exc.status == 403 and "being terminated" in str(exc.body):
                return  # NB: the namespace is going; its DGD will be gone in a moment, nothing to create
            if exc.status != 409:
                raise
            return
        log.info("created pod %s/%s", namespace, made["metadata"]["name"])  # NB: a proxy pod's name is generated

    @staticmethod
    def _ignore(status: int, call: Any, *args: Any, **kwargs: Any) -> None:
        """``call`` (a write whose answer no one reads, so not parsed into the client's models), an error ``status`` ignored."""
        try:
            kube_raw.release(call(*args, _preload_content=False, _request_timeout=TIMEOUT_S, **kwargs))
        except ApiException as exc:
            if exc.status != status:
                raise

    # -- DynamoGraphDeployment -------------------------------------------------------------
    def reconcile_dgd(self, dgd: DynamoGraphDeployment) -> None:
        """Pods of the spec's revision, a rollout step when others exist, the proxy's weights, status (``dgd_rollout``)."""
        meta = dgd["metadata"]
        if meta.get("deletionTimestamp"):
            return
        if not any(c.get("type") == dgd_pods.FRONTEND for c in dgd_pods.components(dgd)):
            self._patch_status(kn.DGD_GROUP, kn.DGD_VERSION, kn.DGD_PLURAL, dgd, _shared_frontend_status(dgd))
            return
        levels = self._dgd_levels(dgd) if self.behaviour.topology_env else None
        existing = self._owned_pods(meta["namespace"], f"{kn.DGD_NAME_LABEL}={meta['name']}", meta["uid"])
        proxies = self._sync_proxy_replicas(dgd)
        asked, wanted = dgd_rollout.routing_frontends(dgd, existing, self.behaviour)
        routes = frontend_routes.read(asked, dgd_pods.FRONTEND_PORT, wanted)
        plan = dgd_rollout.plan(dgd, existing, levels, self.images, self.behaviour, routes)
        if not self.behaviour.resume_rollouts and meta["uid"] not in self.reconciled:
            plan.delete += dgd_rollout.other_revisions(dgd, existing, plan.target)
        self.reconciled.add(meta["uid"])
        # NB: weights first: they already leave out the workers this step deletes, so no frontend keeps traffic for them.
        proxy_note = self._sync_proxy(dgd, proxies, plan)
        # NB: a scale outside a rollout (a planner moving GPUs from one component to another) frees before it takes, so
        # the pods never hold more GPUs than the planner's budget; a rollout's step adds first (its surge).
        creates_first = plan.step is not None
        if creates_first:
            self._create_pods(meta["namespace"], plan.create)
        for name in plan.delete:
            log.info("deleting pod %s/%s: %s", meta["namespace"], name, plan.status["reason"])
            self._ignore(404, self.core.delete_namespaced_pod, name, meta["namespace"])
        if not creates_first:
            self._create_pods(meta["namespace"], plan.create)
        for pod in existing:  # NB: pod events have no retries; the resync catches an injection that failed
            if levels is not None and set(levels) - set(topology_injection.labelled_domains(pod)):
                self.inject_topology(pod)
        status = self._dgd_status(dgd, existing, plan, self._proxy_address(dgd), proxy_note)
        self._record_step(dgd, status)
        self._patch_status(kn.DGD_GROUP, kn.DGD_VERSION, kn.DGD_PLURAL, dgd, status)

    def _create_pods(self, namespace: str, manifests: Sequence[dict[str, Any]]) -> None:
        for manifest in manifests:
            self._create_pod(namespace, manifest)

    def _sync_proxy_replicas(self, dgd: DynamoGraphDeployment) -> list[Pod]:
        """The proxy Service, and ``PROXY_REPLICAS`` proxy pods not terminating (new ones made); returns those."""
        meta = dgd["metadata"]
        selector = f"{dgd_pods.PROXY_LABEL}={meta['name']}"
        self._sync_services(meta["namespace"], selector, meta["uid"], {dgd_pods.proxy_service_name(dgd): dgd_pods.proxy_service(dgd)})
        proxies = self._owned_pods(meta["namespace"], selector, meta["uid"])
        live = [p for p in proxies if not p["metadata"].get("deletionTimestamp")]
        missing = dgd_pods.PROXY_REPLICAS - len(live) if self.behaviour.replace_proxies or not proxies else 0
        for _ in range(missing):
            self._create_pod(meta["namespace"], dgd_pods.proxy_pod(dgd, self.images))
        return live

    def _proxy_address(self, dgd: DynamoGraphDeployment) -> str | None:
        """``http://<ClusterIP>:<port>`` of the DGD's proxy Service, once it has its ClusterIP."""
        try:
            name, ns = dgd_pods.proxy_service_name(dgd), dgd["metadata"]["namespace"]
            answer = self.core.read_namespaced_service(name, ns, _preload_content=False, _request_timeout=TIMEOUT_S)
            found = kube_raw.from_response(answer)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        ip = kube_objects.spec_of(found).get("clusterIP")
        return f"http://{ip}:{dgd_pods.PROXY_PORT}" if ip and ip != "None" else None

    def _sync_proxy(self, dgd: DynamoGraphDeployment, proxies: list[Pod], plan: dgd_rollout.Plan) -> str:
        """Weights and drains on every proxy replica through HAProxy's runtime API, then deletes the drained frontends.

        Every replica with an address is brought to the plan, Ready or not: a replica serves (its
        ``/proxy/health`` passes, so its Service sends it connections) only once it has a frontend
        weighted. A frontend is deleted as soon as no serving replica sends it anything new, as a
        Deployment ends the old pod once the new one is ready: it finishes its streams in flight on
        SIGTERM (``--drain-seconds`` within the pod's grace period) while HAProxy keeps those
        connections. Deleting it later would leave a frontend that looks Ready but gets no traffic.
        Nothing is deleted while a Ready replica did not take the drain. Returns a note: ``WEIGHTS_APPLIED``
        (so the DGD may be Ready) only once a Ready replica, an endpoint of the Service, has the weights.
        """
        views = plan.frontends
        frontends = {n: proxy_weights.Frontend(n, v.ip, dgd_pods.FRONTEND_PORT) for n, v in views.items() if v.ip}
        took: list[Pod] = []
        missed: list[str] = []
        open_streams: dict[str, int] = {}
        for index, proxy in enumerate(sorted(proxies, key=lambda p: str(p["metadata"]["name"]))):
            ip, uid = _pod_ip(proxy), str(proxy["metadata"]["uid"])
            if not ip or (not self.behaviour.sync_every_proxy and index > 0 and uid in self.configured_proxies):
                continue
            runtime = RuntimeApi(ip, dgd_pods.PROXY_ADMIN_PORT)
            try:
                streams = asyncio.run(proxy_weights.sync(runtime, frontends, plan.weights, set(plan.drain)))
            except (OSError, TimeoutError, RuntimeApiError, RuntimeError) as exc:
                if inference_service.pod_ready(proxy):
                    missed.append(f"{proxy['metadata']['name']}: {exc}")
                continue
            took.append(proxy)
            if any(w > 0 for w in plan.weights.values()):
                self.configured_proxies.add(uid)
            for name, count in streams.items():
                open_streams[name] = open_streams.get(name, 0) + count
        if missed:
            return f"the traffic proxy did not take the weights: {'; '.join(missed)}"
        if not took:
            return "the traffic proxy is not ready yet"
        ns = dgd["metadata"]["namespace"]
        for name in plan.drain:
            log.info(
                "deleting drained frontend %s/%s; it finishes its %d stream(s) in flight on SIGTERM", ns, name, open_streams.get(name, 0)
            )
            self._ignore(404, self.core.delete_namespaced_pod, name, ns)
        # NB: the address serves only through a Ready replica: one just given its weights is not an endpoint yet.
        return WEIGHTS_APPLIED if any(inference_service.pod_ready(p) for p in took) else "the traffic proxy is not ready yet"

    def _record_step(self, dgd: DynamoGraphDeployment, status: DGDStatus) -> None:
        """An Event per rollout step: whenever phase, counts, weights or draining frontends differ from the last status."""
        rollout = status["rollout"]
        previous = (dgd.get("status") or {}).get("rollout") or {}
        if all(previous.get(k) == rollout.get(k) for k in ("phase", "old", "new", "weights", "draining")):
            return
        message = (
            f"{rollout['phase']}: {rollout['reason']}; old {rollout['old']} new {rollout['new']} "
            f"weights {rollout['weights']} draining {rollout['draining']}"
        )
        events.post(self.core, dgd, "RolloutStep", message[:1000])

    def _dgd_levels(self, dgd: DynamoGraphDeployment) -> list[str] | None:
        if dgd_pods.transfer_topology(dgd) is None:
            return None
        name = dgd_pods.cluster_topology_name(dgd)
        domains = self.domains(name) if name else None
        if domains is None:
            raise RuntimeError(f"ClusterTopology {name!r} of {dgd['metadata']['name']} not found; retrying")
        return domains

    @staticmethod
    def _dgd_status(dgd: DynamoGraphDeployment, pods: list[Pod], plan: dgd_rollout.Plan, address: str | None, proxy_note: str) -> DGDStatus:
        target = plan.target
        components: dict[str, dict[str, int]] = {}
        for component in dgd_pods.components(dgd):
            mine = [p for p in pods if p["metadata"]["labels"].get(kn.COMPONENT_LABEL) == component["name"]]
            current = [p for p in mine if dgd_pods.pod_revisions(p).workers == target.workers]
            ready = sum(1 for p in current if inference_service.pod_ready(p))
            components[component["name"]] = {"replicas": dgd_pods.replicas(component), "readyReplicas": ready, "existing": len(mine)}
        all_ready = all(c["readyReplicas"] >= c["replicas"] for c in components.values())
        # NB: Ready means the DGD's address serves: ready pods behind a proxy that routes to none of them do not.
        routing = proxy_note == WEIGHTS_APPLIED and any(w > 0 for w in plan.weights.values())
        rollout: RolloutStatus = {**plan.status, "proxy": proxy_note}
        phase = rollout["phase"]
        reason = "ComponentsReady" if all_ready and routing else "ProxyNotRouting" if all_ready else "Progressing"
        ready_condition = {"type": "Ready", "status": "True" if all_ready and routing else "False", "reason": reason}
        progressing = {
            "type": "Progressing",
            "status": "False" if phase == rollout_plan.COMPLETE else "True",
            "reason": phase,
            "message": rollout["reason"],
        }
        status: DGDStatus = {
            "observedGeneration": dgd["metadata"].get("generation", 1),
            "components": components,
            "conditions": [ready_condition, progressing],
            "rollout": rollout,
        }
        if address:
            status["address"] = address
        return status

    # -- InferenceService ------------------------------------------------------------------
    def reconcile_inference_service(self, isvc: InferenceService) -> None:
        meta = isvc["metadata"]
        if meta.get("deletionTimestamp"):
            return
        plan = inference_service.plan(isvc, self.behaviour)
        if plan.pod_group is not None:
            self._sync_pod_group(plan.pod_group)
        self._sync_services(meta["namespace"], f"{kn.IS_SERVICE_LABEL}={meta['name']}", meta["uid"], plan.services)
        existing = self._owned_pods(meta["namespace"], f"{kn.IS_SERVICE_LABEL}={meta['name']}", meta["uid"])
        desired = plan.pods
        if self.behaviour.roll_inference_services:
            roll = inference_service.replace(plan.pods, existing, self.behaviour.replace_whole_replicas)
            for name in roll.delete:
                log.info("deleting pod %s/%s: its template changed", meta["namespace"], name)
                self._ignore(404, self.core.delete_namespaced_pod, name, meta["namespace"], grace_period_seconds=5)
            desired = {n: p for n, p in plan.pods.items() if p["metadata"]["labels"][inference_service.LWS_NAME_LABEL] not in roll.hold}
        held = set(plan.pods) - set(desired)
        # NB: a held group's pods are neither made (the old ones still terminate under the same names) nor removed
        self._sync_pods(meta["namespace"], desired, [p for p in existing if p["metadata"]["name"] not in held])
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if not self.behaviour.status_from_pods:
            existing = [_as_ready(p) for p in existing]
        self._patch_status(kn.IS_GROUP, kn.IS_VERSION, kn.IS_PLURAL, isvc, inference_service.status(isvc, existing, now, self.behaviour))

    def _sync_pod_group(self, group: PodGroup) -> None:
        ns, name = group["metadata"]["namespace"], group["metadata"]["name"]
        try:
            current: PodGroup = self.custom.get_namespaced_custom_object(
                kn.PG_GROUP, kn.PG_VERSION, ns, kn.PG_PLURAL, name, _request_timeout=TIMEOUT_S
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            log.info("creating PodGroup %s/%s %s", ns, name, group["spec"])
            self._ignore(409, self.custom.create_namespaced_custom_object, kn.PG_GROUP, kn.PG_VERSION, ns, kn.PG_PLURAL, group)
            return
        spec = current.get("spec") or {}
        if any(spec.get(key) != value for key, value in group["spec"].items()):
            log.info("updating PodGroup %s/%s to %s", ns, name, group["spec"])
            body = {**current, "spec": {**spec, **group["spec"]}}
            self.custom.replace_namespaced_custom_object(
                kn.PG_GROUP, kn.PG_VERSION, ns, kn.PG_PLURAL, name, body, _request_timeout=TIMEOUT_S
            )

    # -- topology injection ----------------------------------------------------------------
    def inject_topology(self, pod: Pod) -> None:
        topology_name = topology_injection.wants_injection(pod)
        bound = (pod.get("spec") or {}).get("nodeName") or ""
        if topology_name is None or (not bound and not self.behaviour.inject_before_binding):
            return
        found = self.cluster_topology(topology_name)
        if found is None:
            raise RuntimeError(f"ClusterTopology {topology_name!r} of pod {pod['metadata']['name']} not found; retrying")
        if bound and self.behaviour.label_node is bound_node:
            chosen = bound  # NB: the reference needs no node list; only the broken variants choose among nodes
        else:
            listed = self.core.list_node(_preload_content=False, _request_timeout=TIMEOUT_S)
            nodes = sorted(n["metadata"]["name"] for n in kube_raw.items_of(listed))
            chosen = self.behaviour.label_node(bound, nodes) or nodes[0]
        node = kube_raw.from_response(self.core.read_node(chosen, _preload_content=False, _request_timeout=TIMEOUT_S))
        domains = topology_injection.domains_of_node(topology_injection.levels_of(found), kube_objects.labels_of(node))
        patch = topology_injection.missing_labels(pod["metadata"].get("labels") or {}, domains)
        if patch:
            log.info("labelling pod %s/%s with %s (node %s)", pod["metadata"]["namespace"], pod["metadata"]["name"], patch, chosen)
            answer = self.core.patch_namespaced_pod(
                pod["metadata"]["name"],
                pod["metadata"]["namespace"],
                {"metadata": {"labels": patch}},
                _preload_content=False,
                _request_timeout=TIMEOUT_S,
            )
            kube_raw.release(answer)

    # -- status ----------------------------------------------------------------------------
    def _patch_status(self, group: str, version: str, plural: str, obj: Mapping[str, Any], status: Mapping[str, Any]) -> None:
        """Merge ``status`` into ``obj``'s (as read at the start of this reconcile), unless it holds each of its keys already.

        Why skip: the 1 s resync computes the same status most of the time; the API server would
        decode, admit and compare each such no-op patch (1.7 a second in a rollout's certify run).
        """
        current = obj.get("status") or {}
        if all(current.get(key) == value for key, value in status.items()):
            return
        meta = obj["metadata"]
        self._ignore(
            404,
            self.custom.patch_namespaced_custom_object_status,
            group,
            version,
            meta["namespace"],
            plural,
            meta["name"],
            {"status": status},
        )


def _owned_by(obj: Mapping[str, Any], owner_uid: str) -> bool:
    return any(ref.get("uid") == owner_uid for ref in obj["metadata"].get("ownerReferences") or [])


def _pod_ip(pod: Pod | None) -> str | None:
    return (pod.get("status") or {}).get("podIP") if pod else None


def _as_ready(pod: Pod) -> Pod:
    """What an optimistic status believes: every pod that exists is Ready (the broken variant)."""
    return {**pod, "status": {**(pod.get("status") or {}), "conditions": [{"type": "Ready", "status": "True"}]}}


def _shared_frontend_status(dgd: DynamoGraphDeployment) -> DGDStatus:
    """Seed 001 4.2 decides: no shared frontend. A DGD of workers only is refused, and says why."""
    condition = {
        "type": "Ready",
        "status": "False",
        "reason": "SharedFrontendUnsupported",
        "message": "this DGD has no frontend component: the shared-frontend pattern (seed 001 4.2) cannot be rolled out "
        "without mixing versions and is not supported; add a component of type frontend to the DGD",
    }
    return {"observedGeneration": dgd["metadata"].get("generation", 1), "conditions": [condition]}
