"""The harness's one way to the Kubernetes API: clients, CRDs, bulk creation, waits, and every read and write.

Data flow: callers (the cluster fixtures, the suite's ``servecert.conformance.utils.kube`` and profile
helpers, the benchmarks, ``tests/harness/cluster``) hand in an ``ApiClient`` and plain dict manifests
(camelCase, as in YAML, so the topology and HyperNode generators stay pure); what comes back is
plain JSON-like dicts named by the typed views in ``servecert.protocol.kube_objects``, so the verdicts
that read them are checked by mypy. Synchronous on purpose: the suite's async helpers call in
through ``asyncio.to_thread``, the fixtures and tests directly.

Why one module: every read and write is bounded by one setting, ``REQUEST_TIMEOUT_S`` (a watch
by its own two, named below), every wait has a deadline and names the object it waited for, and
a 404 means "not there" (None) the same way everywhere. NB: the cluster bring-up helpers (CRDs,
bulk node creation, node readiness) still send their requests unbounded, as they always have.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from servecert.harness.cluster import hypernodes
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, kube_raw, waiting

POLL_S = 0.2
BULK_WORKERS = 16
REQUEST_TIMEOUT_S = 30.0
"""Seconds one API request may take: a local API server answers in far less, so a request open this long is a broken
connection, and the bounded wait around it fails saying what it waited for instead of hanging."""
WATCH_WINDOW_S = 5
"""Seconds the server keeps one pod watch open (``timeoutSeconds``); the watcher reopens it from its last resourceVersion."""
WATCH_REQUEST_TIMEOUT_S = 10.0
"""Client-side bound on a watch request and the list it starts from: twice the window, so only a dead connection hits it."""

Resource = tuple[str, str, str]
"""(group, version, plural) of a custom resource."""
DGD: Resource = (kn.DGD_GROUP, kn.DGD_VERSION, kn.DGD_PLURAL)
ISVC: Resource = (kn.IS_GROUP, kn.IS_VERSION, kn.IS_PLURAL)
PODGROUP: Resource = (kn.PG_GROUP, kn.PG_VERSION, kn.PG_PLURAL)
CLUSTER_TOPOLOGY: Resource = (kn.CT_GROUP, kn.CT_VERSION, kn.CT_PLURAL)
WORKER_METADATA: Resource = (kn.WM_GROUP, kn.WM_VERSION, kn.WM_PLURAL)
HYPERNODE: Resource = (hypernodes.GROUP, hypernodes.VERSION, hypernodes.PLURAL)


class KubeWaitError(RuntimeError):
    """A bounded wait on the API ran out; the message names the objects and their last state."""


def api_client(kubeconfig: str | Path, pool: int = 32) -> Any:
    """An ApiClient for ``kubeconfig`` with a connection pool large enough for bulk creation."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)


def load_yaml_dir(directory: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def apply_crds(api: Any, crds: Iterable[dict[str, Any]], timeout: float = 60.0) -> list[str]:
    """Create (or replace) CRDs and wait until each is Established; returns their names."""
    ext = client.ApiextensionsV1Api(api)
    names: list[str] = []
    for crd in crds:
        name = crd["metadata"]["name"]
        names.append(name)
        try:
            ext.create_custom_resource_definition(body=crd)
        except ApiException as exc:
            if exc.status != 409:
                raise
            current = ext.read_custom_resource_definition(name)
            updated = {**crd, "metadata": {**crd["metadata"], "resourceVersion": current.metadata.resource_version}}
            ext.replace_custom_resource_definition(name, body=updated)

    def established(name: str) -> bool:
        conditions = ext.read_custom_resource_definition(name).status.conditions or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    waiting.until(
        lambda: all(established(n) for n in names),
        timeout_s=timeout,
        what=f"CRDs {names} to be Established",
        interval_s=POLL_S,
        tolerate=(ApiException,),
        error=KubeWaitError,
    )
    return names


def create_cluster_custom(api: Any, body: dict[str, Any], plural: str, replace: bool = True) -> None:
    group, version = body["apiVersion"].split("/")
    custom = client.CustomObjectsApi(api)
    try:
        custom.create_cluster_custom_object(group, version, plural, body)
    except ApiException as exc:
        if exc.status != 409 or not replace:
            raise
        current = custom.get_cluster_custom_object(group, version, plural, body["metadata"]["name"])
        body = {**body, "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
        custom.replace_cluster_custom_object(group, version, plural, body["metadata"]["name"], body)


def bulk(fn: Callable[[dict[str, Any]], object], items: Sequence[dict[str, Any]], workers: int = BULK_WORKERS) -> None:
    """Run ``fn`` over ``items`` on a thread pool; re-raises the first failure."""
    if len(items) <= 2:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        for future in [pool.submit(fn, item) for item in items]:
            future.result()


def create_nodes(api: Any, nodes: Sequence[dict[str, Any]]) -> None:
    core = client.CoreV1Api(api)

    def create(node: dict[str, Any]) -> None:
        try:
            core.create_node(body=node)
        except ApiException as exc:
            if exc.status != 409:
                raise

    bulk(create, nodes)


def ready_node_names(api: Any, label_selector: str = "") -> set[str]:
    ready: set[str] = set()
    for node in client.CoreV1Api(api).list_node(label_selector=label_selector).items:
        if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []):
            ready.add(node.metadata.name)
    return ready


LIFECYCLE_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
"""What the node lifecycle controller puts on a node it has not yet seen Ready, and takes off a moment after it has."""


def schedulable_node_names(api: Any) -> set[str]:
    """Nodes Ready and free of the lifecycle controller's taints: a pod without tolerations can land there."""
    out: set[str] = set()
    for node in client.CoreV1Api(api).list_node().items:
        ready = any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])
        if ready and not any(t.key in LIFECYCLE_TAINTS for t in node.spec.taints or []):
            out.add(node.metadata.name)
    return out


def wait_nodes_ready(api: Any, names: Iterable[str], timeout: float) -> float:
    """Until every node is Ready and the node lifecycle controller has taken its not-ready taint off.

    NB: Ready alone raced: a test that ran at once saw ``node.kubernetes.io/not-ready:NoSchedule`` still there.
    """
    wanted = set(names)

    def missing() -> set[str]:
        return wanted - schedulable_node_names(api)

    clock = waiting.Deadline(timeout)
    waiting.until(
        lambda: not missing(),
        timeout_s=timeout,
        what=f"{len(wanted)} nodes to be Ready and untainted",
        interval_s=POLL_S,
        tolerate=(ApiException,),
        describe=lambda: f"not Ready or still tainted: {sorted(missing())[:10]} (kwok's log is logs/kwok.log in the cluster dir)",
        error=KubeWaitError,
    )
    return clock.elapsed()


# -- reads and writes: each bounded by REQUEST_TIMEOUT_S --------------------------------------


def _core(api: Any) -> Any:
    return client.CoreV1Api(api)


def _custom(api: Any) -> Any:
    return client.CustomObjectsApi(api)


def list_pods(api: Any, namespace: str, selector: str = "") -> list[kube_objects.Pod]:
    found = _core(api).list_namespaced_pod(namespace, label_selector=selector, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
    return kube_raw.items_of(found)


def read_pod(api: Any, namespace: str, name: str) -> kube_objects.Pod | None:
    """The pod in the API server's own JSON, or None when there is none."""
    try:
        raw = _core(api).read_namespaced_pod(name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
    except ApiException as exc:
        if exc.status == 404:  # NB: "not there" is an answer, None; anything else is raised
            return None
        raise
    found: kube_objects.Pod = kube_raw.from_response(raw)
    return found


def pod_nodes(api: Any, namespace: str, selector: str = "") -> dict[str, str]:
    """name -> node ('' while unbound) of the matching pods."""
    return {p["metadata"]["name"]: p["spec"].get("nodeName") or "" for p in list_pods(api, namespace, selector)}


def label_pod(api: Any, namespace: str, name: str, labels: Mapping[str, str]) -> None:
    """Add or change ``labels`` on the pod (a merge patch: its other labels stay)."""
    body = {"metadata": {"labels": dict(labels)}}
    _core(api).patch_namespaced_pod(name, namespace, body, _request_timeout=REQUEST_TIMEOUT_S)


def set_pod_finalizers(api: Any, namespace: str, name: str, finalizers: Sequence[str]) -> None:
    """Replace the pod's ``metadata.finalizers`` whole."""
    body = {"metadata": {"finalizers": list(finalizers)}}
    # NB: a JSON merge patch: the client's default, a strategic merge patch, merges the list (an empty one removes nothing)
    _core(api).patch_namespaced_pod(
        name, namespace, body, _content_type="application/merge-patch+json", _request_timeout=REQUEST_TIMEOUT_S
    )


def patch_pod_status(api: Any, namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """Patch the pod's status subresource, as its kubelet (or the node lifecycle controller) would."""
    _core(api).patch_namespaced_pod_status(name, namespace, {"status": dict(status)}, _request_timeout=REQUEST_TIMEOUT_S)


def read_service(api: Any, namespace: str, name: str) -> dict[str, Any] | None:
    """The Service, or None when there is none."""
    try:
        found = _core(api).read_namespaced_service(name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return dict(kube_raw.from_response(found))


def list_services(api: Any, namespace: str) -> list[dict[str, Any]]:
    """Every Service of ``namespace``, as the API server's JSON."""
    found = _core(api).list_namespaced_service(namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
    return [dict(item) for item in kube_raw.items_of(found)]


def list_endpoint_slices(api: Any, namespace: str, service: str) -> list[dict[str, Any]]:
    """The EndpointSlices the controller-manager keeps for ``service`` (label ``kubernetes.io/service-name``)."""
    found = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={service}", _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S
    )
    return [dict(item) for item in kube_raw.items_of(found)]


def create_pod(api: Any, namespace: str, body: Mapping[str, Any]) -> None:
    _core(api).create_namespaced_pod(namespace, dict(body), _request_timeout=REQUEST_TIMEOUT_S)


def delete_pods(api: Any, namespace: str, selector: str, *, grace_period_seconds: int | None = None) -> None:
    _core(api).delete_collection_namespaced_pod(
        namespace, label_selector=selector, grace_period_seconds=grace_period_seconds, _request_timeout=REQUEST_TIMEOUT_S
    )


def delete_pod(api: Any, namespace: str, name: str, *, grace_period_seconds: int | None = None) -> None:
    _core(api).delete_namespaced_pod(name, namespace, grace_period_seconds=grace_period_seconds, _request_timeout=REQUEST_TIMEOUT_S)


def list_pods_at(api: Any, namespace: str) -> tuple[list[kube_objects.Pod], str]:
    """Every pod of ``namespace`` and the list's resourceVersion, to watch from (bounded as a watch is)."""
    answer = _core(api).list_namespaced_pod(namespace, _preload_content=False, _request_timeout=WATCH_REQUEST_TIMEOUT_S)
    listed = kube_raw.from_response(answer)
    return list(listed.get("items") or []), (listed.get("metadata") or {}).get("resourceVersion") or ""


def watch_pods(api: Any, namespace: str, resource_version: str) -> Generator[tuple[str, kube_objects.Pod], None, None]:
    """(event type, pod) for each change after ``resource_version``, for one ``WATCH_WINDOW_S`` window.

    An expired resourceVersion is raised as ``ApiException`` (status 410): the caller lists again.
    """
    w = kube_raw.RawWatch()
    try:
        for event in w.stream(
            _core(api).list_namespaced_pod,
            namespace,
            resource_version=resource_version,
            timeout_seconds=WATCH_WINDOW_S,
            _request_timeout=WATCH_REQUEST_TIMEOUT_S,
        ):
            yield str(event["type"]), event["object"]
    finally:
        w.stop()


def list_nodes(api: Any, selector: str = "") -> list[kube_objects.Node]:
    return kube_raw.items_of(_core(api).list_node(label_selector=selector, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S))


def read_node(api: Any, name: str) -> kube_objects.Node:
    found: kube_objects.Node = kube_raw.from_response(
        _core(api).read_node(name, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
    )
    return found


def create_node(api: Any, body: Mapping[str, Any]) -> None:
    _core(api).create_node(dict(body), _request_timeout=REQUEST_TIMEOUT_S)


def delete_node(api: Any, name: str) -> None:
    _core(api).delete_node(name, _request_timeout=REQUEST_TIMEOUT_S)


def create_namespace(api: Any, body: Mapping[str, Any]) -> None:
    _core(api).create_namespace(dict(body), _request_timeout=REQUEST_TIMEOUT_S)


def delete_namespace(api: Any, name: str, *, grace_period_seconds: int | None = None) -> None:
    _core(api).delete_namespace(name, grace_period_seconds=grace_period_seconds, _request_timeout=REQUEST_TIMEOUT_S)


def list_events(api: Any, namespace: str) -> list[kube_objects.Event]:
    return kube_raw.items_of(_core(api).list_namespaced_event(namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S))


# -- custom objects: namespaced, then cluster-scoped ------------------------------------------------


def create_object(api: Any, resource: Resource, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
    group, version, plural = resource
    created: dict[str, Any] = _custom(api).create_namespaced_custom_object(
        group, version, namespace, plural, dict(body), _request_timeout=REQUEST_TIMEOUT_S
    )
    return created


def _read_object(api: Any, resource: Resource, namespace: str, name: str) -> Any:
    group, version, plural = resource
    try:
        return _custom(api).get_namespaced_custom_object(group, version, namespace, plural, name, _request_timeout=REQUEST_TIMEOUT_S)
    except ApiException as exc:
        if exc.status == 404:  # NB: "not there" is an answer, None; anything else is raised
            return None
        raise


def get_object(api: Any, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = _read_object(api, resource, namespace, name)
    return found


def get_dgd(api: Any, namespace: str, name: str) -> kube_objects.DynamoGraphDeployment | None:
    found: kube_objects.DynamoGraphDeployment | None = _read_object(api, DGD, namespace, name)
    return found


def patch_object(api: Any, resource: Resource, namespace: str, name: str, body: Mapping[str, Any]) -> None:
    group, version, plural = resource
    _custom(api).patch_namespaced_custom_object(group, version, namespace, plural, name, dict(body), _request_timeout=REQUEST_TIMEOUT_S)


def delete_object(api: Any, resource: Resource, namespace: str, name: str) -> None:
    group, version, plural = resource
    _custom(api).delete_namespaced_custom_object(group, version, namespace, plural, name, _request_timeout=REQUEST_TIMEOUT_S)


def _list_objects(api: Any, resource: Resource, namespace: str) -> list[Any]:
    group, version, plural = resource
    found = _custom(api).list_namespaced_custom_object(group, version, namespace, plural, _request_timeout=REQUEST_TIMEOUT_S)
    return list(found.get("items") or [])


def list_objects(api: Any, resource: Resource, namespace: str) -> list[dict[str, Any]]:
    return _list_objects(api, resource, namespace)


def list_pod_groups(api: Any, namespace: str) -> list[kube_objects.PodGroup]:
    return _list_objects(api, PODGROUP, namespace)


def list_worker_metadata(api: Any, namespace: str) -> list[kube_objects.WorkerMetadata]:
    return _list_objects(api, WORKER_METADATA, namespace)


def create_cluster_object(api: Any, resource: Resource, body: Mapping[str, Any]) -> None:
    """Create a cluster-scoped object; a conflict (409) is raised like any refusal (``create_cluster_custom`` replaces)."""
    group, version, plural = resource
    _custom(api).create_cluster_custom_object(group, version, plural, dict(body), _request_timeout=REQUEST_TIMEOUT_S)


def get_cluster_topology(api: Any, name: str) -> kube_objects.ClusterTopology:
    group, version, plural = CLUSTER_TOPOLOGY
    found: kube_objects.ClusterTopology = _custom(api).get_cluster_custom_object(
        group, version, plural, name, _request_timeout=REQUEST_TIMEOUT_S
    )
    return found


def delete_cluster_object(api: Any, resource: Resource, name: str) -> None:
    group, version, plural = resource
    _custom(api).delete_cluster_custom_object(group, version, plural, name, _request_timeout=REQUEST_TIMEOUT_S)
