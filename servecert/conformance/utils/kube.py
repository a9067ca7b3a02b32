"""What cluster-environment checks share: applying resources, bounded waits, pod histories, assertions.

Every call goes through the harness's Kubernetes facade (``servecert.harness.cluster.kube``, each request
bounded there) with the suite's admin client, in a thread (``asyncio.to_thread``); what comes back
is named by the typed views of ``servecert.protocol.kube_objects``. Every wait is bounded by a timeout from
``Timeouts`` and names what it waited for. ``PodHistory`` records every version of every pod in
the case's namespace from before the resource is applied (a watch of the suite's own), so a check
can assert what was never true — a topology label on a pod not yet bound — rather than trust the
final state. Assertion helpers are named ``<object>_must_<condition>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kubernetes.client.rest import ApiException

from servecert.conformance.suite.test_case import TestContext
from servecert.harness import cluster_env
from servecert.harness.cluster import kube, topology
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, waiting

Resource = kube.Resource
DGD, ISVC, PODGROUP, CLUSTER_TOPOLOGY = kube.DGD, kube.ISVC, kube.PODGROUP, kube.CLUSTER_TOPOLOGY
def env_of(ctx: TestContext) -> ClusterEnvironment:
    if not isinstance(ctx.env, ClusterEnvironment):
        raise TypeError(f"{ctx.name} needs the cluster environment, runs in {ctx.env.name!r}")
    return ctx.env


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


async def create(env: ClusterEnvironment, resource: Resource, body: Mapping[str, Any]) -> dict[str, Any]:
    return await asyncio.to_thread(kube.create_object, env.api, resource, env.namespace, body)


async def try_create(env: ClusterEnvironment, resource: Resource, body: Mapping[str, Any]) -> Refusal | None:
    """Create; a refusal (4xx) is returned, not raised."""
    try:
        await create(env, resource, body)
    except ApiException as exc:
        if exc.status is None or not 400 <= exc.status < 500:
            raise
        try:
            message = str(json.loads(exc.body).get("message", exc.body))
        except (TypeError, ValueError):
            message = str(exc.body)
        return Refusal(int(exc.status), message)
    return None


async def get(env: ClusterEnvironment, resource: Resource, name: str) -> dict[str, Any] | None:
    """The object in the case's namespace, or None when there is none."""
    return await asyncio.to_thread(kube.get_object, env.api, resource, env.namespace, name)


async def dgd(env: ClusterEnvironment, name: str) -> kube_objects.DynamoGraphDeployment | None:
    return await asyncio.to_thread(kube.get_dgd, env.api, env.namespace, name)


async def patch(env: ClusterEnvironment, resource: Resource, name: str, body: Mapping[str, Any]) -> None:
    await asyncio.to_thread(kube.patch_object, env.api, resource, env.namespace, name, body)


async def pods(env: ClusterEnvironment, selector: str = "") -> list[kube_objects.Pod]:
    return await asyncio.to_thread(kube.list_pods, env.api, env.namespace, selector)


async def pod(env: ClusterEnvironment, name: str) -> kube_objects.Pod | None:
    """The pod in the case's namespace, or None when there is none."""
    return await asyncio.to_thread(kube.read_pod, env.api, env.namespace, name)


async def delete_pod(env: ClusterEnvironment, name: str) -> None:
    """Delete the pod with its own grace period, as an eviction or a node drain would."""
    await asyncio.to_thread(kube.delete_pod, env.api, env.namespace, name)


async def label_pod(env: ClusterEnvironment, name: str, labels: Mapping[str, str]) -> None:
    await asyncio.to_thread(kube.label_pod, env.api, env.namespace, name, labels)


HOLD_FINALIZER = "servecert.io/hold"
"""The suite's finalizer: keeps a deleted pod Terminating until the suite lets it go."""


@contextlib.asynccontextmanager
async def pod_held_terminating(env: ClusterEnvironment, name: str) -> AsyncIterator[None]:
    """Delete the pod but keep it Terminating (its ``deletionTimestamp`` set, its state as it was) while the block runs,
    as a pod whose container ignores SIGTERM, or one a controller's finalizer holds, stays; then let it go."""
    await asyncio.to_thread(kube.set_pod_finalizers, env.api, env.namespace, name, [HOLD_FINALIZER])
    try:
        await delete_pod(env, name)
        yield
    finally:
        # NB: always, or the pod (and the case's namespace with it) would never go
        try:
            await asyncio.to_thread(kube.set_pod_finalizers, env.api, env.namespace, name, [])
        except ApiException as exc:
            if exc.status != 404:
                raise


async def set_pod_state(env: ClusterEnvironment, name: str, phase: str, ready: str) -> None:
    """Report the pod in ``phase`` with its Ready and ContainersReady conditions at ``ready`` ("True", "False", "Unknown"),
    as its kubelet would after a readiness probe (or the node controller for a node gone silent). Only for pods kwok plays:
    its pod stages act on Pending pods alone, so nothing rewrites this."""
    found = await pod(env, name)
    if found is None:
        raise AssertionError(f"pod {name} is gone; cannot set its state")
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [dict(c) for c in (found.get("status") or {}).get("conditions") or []]
    for condition in conditions:
        if condition.get("type") in ("Ready", "ContainersReady") and condition.get("status") != ready:
            condition.update(status=ready, lastTransitionTime=now)
    await asyncio.to_thread(kube.patch_pod_status, env.api, env.namespace, name, {"phase": phase, "conditions": conditions})


async def service(env: ClusterEnvironment, name: str) -> dict[str, Any] | None:
    """The Service in the case's namespace, or None when there is none."""
    return await asyncio.to_thread(kube.read_service, env.api, env.namespace, name)


async def services(env: ClusterEnvironment) -> list[dict[str, Any]]:
    """Every Service of the case's namespace, from the API server."""
    return await asyncio.to_thread(kube.list_services, env.api, env.namespace)


async def endpoint_slices(env: ClusterEnvironment, service_name: str) -> list[dict[str, Any]]:
    """The EndpointSlices the controller-manager keeps for the Service (ground truth: not the implementation's objects)."""
    return await asyncio.to_thread(kube.list_endpoint_slices, env.api, env.namespace, service_name)


async def worker_metadata(env: ClusterEnvironment) -> list[kube_objects.WorkerMetadata]:
    """What the engines registered for discovery in the case's namespace (the suite's fakes: ground truth)."""
    return await asyncio.to_thread(kube.list_worker_metadata, env.api, env.namespace)


async def nodes(env: ClusterEnvironment) -> dict[str, dict[str, str]]:
    """name -> labels of every node (the suite created them: ground truth of placement)."""
    found = await asyncio.to_thread(kube.list_nodes, env.api)
    return {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in found}


async def cluster_topology_levels(env: ClusterEnvironment, name: str) -> list[tuple[str, str]]:
    ct = await asyncio.to_thread(kube.get_cluster_topology, env.api, name)
    return [(str(level["domain"]), str(level["labelKey"])) for level in ct["spec"]["levels"]]


async def wait_for(probe: Callable[[], Awaitable[Any]], timeout_s: float, what: str, poll_s: float = 0.25) -> Any:
    """Poll until ``probe()`` returns something truthy; return it, or fail (``WaitTimeout``, an AssertionError) naming
    ``what``, the bound and the last value. ``servecert.protocol.waiting.until_async``, with the cluster checks' poll interval."""
    return await waiting.until_async(probe, timeout_s=timeout_s, what=what, interval_s=poll_s)


def fake_node(name: str, resource: str, count: int = 16) -> dict[str, Any]:
    """A kwok node of the test's own: its own zone and rack, 16 GPUs, and ``resource`` only it offers.

    Workloads that ask for ``resource`` stay unbound until the test creates this node, which lets
    a check observe what an operator does before binding and before readiness.
    """
    labels = {topology.ZONE_LABEL: f"zone-{name}", topology.RACK_LABEL: f"rack-{name}"}
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", topology.GPU_RESOURCE: "16", resource: str(count)}
    return topology.fake_node(name, labels, resources)


async def add_cluster_object(env: ClusterEnvironment, resource: Resource, body: Mapping[str, Any]) -> None:
    """Create a cluster-scoped object for this case; it is deleted when the environment closes."""
    await asyncio.to_thread(kube.create_cluster_object, env.api, resource, body)
    name = body["metadata"]["name"]
    env.cleanups.append(lambda: kube.delete_cluster_object(env.api, resource, name))


async def add_node(env: ClusterEnvironment, node: dict[str, Any]) -> None:
    """Create a node for this case; it is deleted when the environment closes."""
    await asyncio.to_thread(kube.create_node, env.api, node)
    name = node["metadata"]["name"]
    env.cleanups.append(lambda: kube.delete_node(env.api, name))


@contextlib.asynccontextmanager
async def cluster_without_crds(ctx: TestContext, crds: frozenset[str]) -> AsyncIterator[ClusterEnvironment]:
    """A case namespace on a cluster of the case's own, lacking ``crds``, with the implementation's operator installed."""
    shared = env_of(ctx).session
    stack = contextlib.ExitStack()  # NB: the cluster and the operator start and stop in a thread: they block
    try:
        session = await asyncio.to_thread(stack.enter_context, cluster_env.session_without_crds(shared, ctx.implementation, crds))
        env = await asyncio.to_thread(ClusterEnvironment, session)
        try:
            yield env
        finally:
            await env.close()
    finally:
        await asyncio.to_thread(stack.close)


def hold_resource(env: ClusterEnvironment) -> str:
    """An extended resource name no node has until the case adds one."""
    return f"servecert.io/{env.namespace}"


def pod_ready(pod: kube_objects.Pod) -> bool:
    return kube_objects.condition_true(pod, "Ready")


def env_value(pod: kube_objects.Pod, name: str) -> str | None:
    for container in pod["spec"]["containers"]:
        for item in container.get("env") or []:
            if item.get("name") == name:
                return str(item.get("value")) if "value" in item else "<valueFrom>"
    return None


def topology_labels(pod: kube_objects.Pod) -> dict[str, str]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return {k[len(kn.TOPOLOGY_LABEL_PREFIX) :]: v for k, v in labels.items() if k.startswith(kn.TOPOLOGY_LABEL_PREFIX)}


def runner_files(env: ClusterEnvironment, pod: kube_objects.Pod, volume: str) -> dict[str, str] | None:
    """The files the pod runner projected for ``volume``: what the engine process reads (None: not there)."""
    root = env.pods_dir
    if root is None:
        return None
    meta = pod["metadata"]
    matches = sorted(root.glob(f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}*/volumes/{volume}"))
    if not matches:
        return None
    return {path.name: path.read_text().strip() for path in Path(matches[-1]).iterdir() if path.is_file() and not path.name.startswith(".")}


@dataclass
class PodHistory:
    """Every version of every pod in a namespace, from a watch the suite started before the check acted.

    ``start()`` lists the namespace and watches from that list's resourceVersion, so nothing that
    happens after it returns can be missed. ``events`` keeps (monotonic time of receipt, event
    type, pod) — the times let a check bound how long a state lasted.
    """

    env: ClusterEnvironment
    events: list[tuple[float, str, kube_objects.Pod]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _resource_version: str = ""

    def start(self) -> PodHistory:
        self._relist()
        self._thread = threading.Thread(target=self._run, name=f"pod-history-{self.env.namespace}", daemon=True)
        self._thread.start()
        return self

    @property
    def versions(self) -> list[kube_objects.Pod]:
        """Every pod version seen, in order."""
        return [pod for _, _, pod in list(self.events)]

    def _record(self, kind: str, pod: kube_objects.Pod) -> None:
        self.events.append((time.monotonic(), kind, pod))

    def _relist(self) -> None:
        listed, self._resource_version = kube.list_pods_at(self.env.api, self.env.namespace)
        for pod in listed:
            self._record("LISTED", pod)

    def _run(self) -> None:
        deadline = waiting.Deadline(600)  # NB: a safety net: stop() ends the watch long before
        while not self._stop.is_set() and not deadline.expired:
            try:
                with contextlib.closing(kube.watch_pods(self.env.api, self.env.namespace, self._resource_version)) as events:
                    for kind, pod in events:
                        self._resource_version = pod["metadata"].get("resourceVersion") or self._resource_version
                        self._record(kind, pod)
                        if self._stop.is_set():
                            break
            except ApiException as exc:
                if exc.status == 410:  # NB: the resourceVersion expired; list again (states in between are lost, said by LISTED)
                    self._relist()
                else:
                    time.sleep(0.2)
            except Exception:
                time.sleep(0.2)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)


def refusal_must_name(refusal: Refusal | None, fragments: tuple[str, ...], what: str) -> None:
    if refusal is None:
        raise AssertionError(f"{what}: the resource was accepted; it must be refused at admission")
    missing = [f for f in fragments if f not in refusal.message]
    if missing:
        raise AssertionError(f"{what}: refused ({refusal.status}) but the message does not name {missing}: {refusal.message!r}")


def pods_must_have_names(found: Sequence[kube_objects.Pod], expected: set[str], what: str) -> None:
    names = {p["metadata"]["name"] for p in found}
    if names != expected:
        raise AssertionError(f"{what}: pods {sorted(names)}; expected exactly {sorted(expected)}")


def pod_must_carry(pod: kube_objects.Pod, kind: Literal["labels", "annotations"], expected: Mapping[str, str], what: str) -> None:
    actual = (pod.get("metadata") or {}).get(kind) or {}
    wrong = {k: (actual.get(k), v) for k, v in expected.items() if actual.get(k) != v}
    if wrong:
        detail = ", ".join(f"{k}={got!r} (expected {want!r})" for k, (got, want) in wrong.items())
        raise AssertionError(f"{what}: pod {pod['metadata']['name']} {kind}: {detail}")
