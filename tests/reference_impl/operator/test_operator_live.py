"""The reference operator on the shared cluster: least-privilege credentials, restart convergence, ownership.

Each test installs its own operator instance (RBAC, token, webhook, process) through
``servecert.adapters.reference.operator_install`` and works in namespaces of that instance only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.adapters.reference import operator_install
from servecert.harness import seed_examples
from servecert.harness.cluster.backends import Cluster
from servecert.protocol import kube_names as kn
from servecert.protocol import waiting
from servecert.reference_impl.operator import kube_access, run

pytestmark = pytest.mark.cluster
WAIT_S = 60.0


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[Any]:
    api_client = cluster.api()
    yield api_client
    api_client.close()


@pytest.fixture
def operator(api: Any) -> Iterator[tuple[operator_install.InstalledOperator, list[str]]]:
    installed = operator_install.install(api)
    yield installed, installed.argv
    installed.close()


@pytest.fixture
def namespace(api: Any, operator: tuple[operator_install.InstalledOperator, list[str]]) -> Iterator[str]:
    installed, _ = operator
    name = f"{installed.namespace_prefix}live"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": name, "labels": installed.namespace_labels()}})
    yield name
    core.delete_namespace(name)


def wait_until(probe: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    return waiting.until(probe, timeout_s=timeout, what=what, interval_s=0.25)


def test_the_operator_runs_with_its_service_account_not_as_admin(operator: tuple[operator_install.InstalledOperator, list[str]]) -> None:
    installed, _ = operator
    own = kube_access.api_client(installed.directory / "kubeconfig")
    try:
        with pytest.raises(ApiException) as refused:
            client.CoreV1Api(own).list_secret_for_all_namespaces()
        assert refused.value.status == 403
        with pytest.raises(ApiException) as refused_webhooks:
            client.AdmissionregistrationV1Api(own).list_validating_webhook_configuration()
        assert refused_webhooks.value.status == 403
        assert client.CoreV1Api(own).list_node().items, "the operator must be able to read nodes (the injector's source)"
    finally:
        own.close()


def _story4(namespace: str) -> dict[str, Any]:
    body = seed_examples.load("inferenceservice-story4")
    for role in body["spec"]["roles"]:
        role["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    return body


def test_killed_mid_reconcile_the_operator_converges_without_duplicates_or_orphans(
    api: Any, operator: tuple[operator_install.InstalledOperator, list[str]], namespace: str
) -> None:
    installed, _argv = operator
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    body = _story4(namespace)
    custom.create_namespaced_custom_object(kn.IS_GROUP, kn.IS_VERSION, namespace, kn.IS_PLURAL, body)
    wait_until(lambda: "created pod" in installed.log_path.read_text(), "the operator to start creating pods")
    installed.restart()  # SIGKILL, whatever it was doing; back when its webhook answers
    # Then change the spec the killed one was working on: decode 2 -> 1 replica.
    roles = body["spec"]["roles"]
    roles[1]["replicas"] = 1
    custom.patch_namespaced_custom_object(
        kn.IS_GROUP, kn.IS_VERSION, namespace, kn.IS_PLURAL, body["metadata"]["name"], {"spec": {"roles": roles}}
    )
    expected = {"deepseek-r1-disagg-prefill-0-0", "deepseek-r1-disagg-prefill-0-0-1"} | {
        "deepseek-r1-disagg-decode-0-0",
        *(f"deepseek-r1-disagg-decode-0-0-{w}" for w in (1, 2, 3)),
    }

    wanted_group = {"minMember": 6, "minTaskMember": {"prefill-0": 2, "decode-0": 4}}

    def groups() -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = custom.list_namespaced_custom_object(kn.PG_GROUP, kn.PG_VERSION, namespace, kn.PG_PLURAL)["items"]
        return found

    def converged() -> bool:
        # NB: the pods alone can match before the new operator's first reconcile (the killed one may have created
        # exactly the decode-0 pods and none of decode-1's), while the PodGroup still has the old spec.
        pods = core.list_namespaced_pod(namespace).items
        names = [p.metadata.name for p in pods if p.metadata.deletion_timestamp is None]
        group_specs = [{k: g["spec"].get(k) for k in wanted_group} for g in groups()]
        return sorted(names) == sorted(expected) and len(pods) == len(expected) and group_specs == [wanted_group]

    wait_until(converged, "exactly the 6 pods of prefill x1 (2 nodes) + decode x1 (4 nodes), nothing else, and one PodGroup of them")
    found = groups()
    assert [g["metadata"]["name"] for g in found] == ["deepseek-r1-disagg"]
    assert found[0]["spec"]["minTaskMember"] == wanted_group["minTaskMember"]
    assert found[0]["spec"]["minMember"] == 6


def test_deleting_a_dgd_removes_everything_it_owns(
    api: Any, operator: tuple[operator_install.InstalledOperator, list[str]], namespace: str
) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    dgd = _pause_like_dgd("owned", frontend=True)
    custom.create_namespaced_custom_object(kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL, dgd)
    wait_until(lambda: len(core.list_namespaced_pod(namespace).items) == 5, "the DGD's 5 pods (frontend, 2 decode, 2 proxies)")
    custom.delete_namespaced_custom_object(kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL, "owned")
    wait_until(lambda: not core.list_namespaced_pod(namespace).items, "the garbage collector to remove the DGD's pods")


def test_another_operator_leaves_a_dgd_alone_and_close_releases_its_finalizer(
    api: Any, operator: tuple[operator_install.InstalledOperator, list[str]], namespace: str
) -> None:
    """Each instance has its own finalizer: with kopf's shared one, every other operator on the cluster removed it
    and the owner put it back, a PATCH war through the owner's webhook (hundreds a minute with three operators)."""
    installed, _ = operator
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    mine = run.finalizer_of([f"{installed.namespace_prefix}*"])
    other = operator_install.install(api)
    try:
        assert run.finalizer_of([f"{other.namespace_prefix}*"]) != mine
        custom.create_namespaced_custom_object(kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL, _pause_like_dgd("owned", True))
        wait_until(lambda: len(core.list_namespaced_pod(namespace).items) == 5, "the DGD's 5 pods (frontend, 2 decode, 2 proxies)")
        for _ in waiting.holding(3.0, 0.25):  # three resyncs of the owner, each watch event seen by the other
            assert _dgd_meta(custom, namespace).get("finalizers") == [mine]
        their_prefix = run.instance_prefix([f"{other.namespace_prefix}*"])
        theirs = [k for k in _dgd_meta(custom, namespace).get("annotations") or {} if k.startswith(their_prefix)]
        assert not theirs, f"the other operator annotated a DGD outside its namespaces: {theirs}"
    finally:
        other.close()
    installed.close()
    assert not _dgd_meta(custom, namespace).get("finalizers"), "close() left the stopped operator's finalizer on its DGD"


def _dgd_meta(custom: Any, namespace: str) -> dict[str, Any]:
    meta: dict[str, Any] = custom.get_namespaced_custom_object(kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL, "owned")["metadata"]
    return meta


def test_a_dgd_serves_completions_through_its_frontend(
    api: Any, operator: tuple[operator_install.InstalledOperator, list[str]], namespace: str
) -> None:
    """End to end on the cluster: operator -> pods -> topology labels -> Kubernetes discovery -> a served request.

    Where the KV transfer went is ROUTER-TOPOLOGY's business (process environment); this checks the parts join up.
    Policy fallback: the scheduler may put the prefill worker in a zone without a decode worker.
    """
    import json
    import urllib.error
    import urllib.request

    from servecert.conformance.utils import manifests as cluster_manifests

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL, cluster_manifests.dgd("e2e", level="zone", policy="fallback")
    )

    def all_ready() -> list[Any]:
        pods = core.list_namespaced_pod(namespace, label_selector=f"{kn.DGD_NAME_LABEL}=e2e").items
        ready = [p for p in pods if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        return pods if len(pods) == 4 and len(ready) == 4 else []

    pods = wait_until(all_ready, "the DGD's frontend and 3 engines Ready")
    [frontend] = [p for p in pods if p.metadata.labels[kn.COMPONENT_TYPE_LABEL] == "frontend"]

    def discovered() -> set[str]:
        with urllib.request.urlopen(f"http://{frontend.status.pod_ip}:8000/status", timeout=10) as resp:
            listed = {w["engine_id"] for w in json.loads(resp.read())["workers"]}
        published = custom.list_namespaced_custom_object(kn.WM_GROUP, kn.WM_VERSION, namespace, kn.WM_PLURAL)["items"]
        ours = {item["spec"]["metadata"]["engine_id"] for item in published}
        return listed if len(ours) == 3 and listed == ours else set()

    wait_until(discovered, f"the frontend on {frontend.status.pod_ip} listing exactly the 3 engines published in {namespace}")
    body = json.dumps({"model": cluster_manifests.MODEL, "prompt": "hello cluster", "max_tokens": 4}).encode()

    errors: list[str] = []

    def completes() -> dict[str, Any] | None:
        request = urllib.request.Request(
            f"http://{frontend.status.pod_ip}:8000/v1/completions", data=body, headers={"content-type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                answer: dict[str, Any] = json.loads(resp.read())
                return answer
        except urllib.error.HTTPError as exc:
            errors.append(f"{exc}: {exc.read()[:300]!r}")
            return None
        except OSError as exc:
            errors.append(str(exc))
            return None

    try:
        answer = wait_until(completes, "a completion through the DGD's frontend (workers discovered through WorkerMetadata)")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last errors: {errors[-3:]}") from None
    assert answer["usage"]["completion_tokens"] == 4
    domains = {p.metadata.name: p.metadata.labels.get(f"{kn.TOPOLOGY_LABEL_PREFIX}zone") for p in pods if p is not frontend}
    assert all(domains.values()), f"every worker is labelled with its zone: {domains}"


def test_the_planners_kubernetes_connector_scales_a_dgd_through_the_operator(
    api: Any, operator: tuple[operator_install.InstalledOperator, list[str]], namespace: str
) -> None:
    import asyncio

    from servecert.conformance.utils import manifests as cluster_manifests
    from servecert.reference_impl.planner.connectors.kubernetes import KubernetesConnector
    from servecert.reference_impl.planner.connectors.protocol import AWAITING_ACK, ISSUED, UNCHANGED

    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(
        kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL, cluster_manifests.dgd("scaled", level=None, prefill=1, decode=1)
    )
    connector = KubernetesConnector(api, namespace, "scaled")
    assert asyncio.run(connector.validate()) == {"prefill": "prefill", "decode": "decode"}

    def counts() -> dict[str, int]:
        pods = core.list_namespaced_pod(namespace, label_selector=f"{kn.DGD_NAME_LABEL}=scaled").items
        ready = [p for p in pods if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
        return {t: sum(1 for p in ready if p.metadata.labels[kn.COMPONENT_TYPE_LABEL] == t) for t in ("prefill", "decode")}

    wait_until(lambda: counts() == {"prefill": 1, "decode": 1} and not asyncio.run(connector.in_progress()), "1 prefill + 1 decode Ready")
    assert asyncio.run(connector.scale_to(1, 1)) == UNCHANGED
    assert asyncio.run(connector.scale_to(2, 3)) == ISSUED
    assert asyncio.run(connector.scale_to(1, 1)) == AWAITING_ACK, "a new decision must wait until the last one is carried out"
    wait_until(lambda: counts() == {"prefill": 2, "decode": 3}, "2 prefill + 3 decode Ready after the connector's patch")
    wait_until(lambda: not asyncio.run(connector.in_progress()), "the connector to see its decision carried out")
    assert asyncio.run(connector.scale_to(1, 2)) == ISSUED
    wait_until(
        # NB: 6 pods: frontend, prefill, 2 decode, and the DGD's 2 traffic proxy replicas
        lambda: counts() == {"prefill": 1, "decode": 2} and len(core.list_namespaced_pod(namespace).items) == 6, "scaled down to 1 + 2"
    )


def _pause_like_dgd(name: str, frontend: bool) -> dict[str, Any]:
    components = [{"name": "decode", "type": "decode", "replicas": 2, "image": "servecert/pause-like", "args": []}]
    if frontend:
        components.insert(0, {"name": "frontend", "type": "frontend", "replicas": 1, "image": "servecert/pause-like", "args": []})
    return {
        "apiVersion": f"{kn.DGD_GROUP}/{kn.DGD_VERSION}",
        "kind": kn.DGD_KIND,
        "metadata": {"name": name},
        "spec": {"components": components},
    }


def test_a_dgd_of_workers_only_is_refused_as_the_shared_frontend_pattern(
    api: Any, operator: tuple[operator_install.InstalledOperator, list[str]], namespace: str
) -> None:
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL, _pause_like_dgd("workers", False))

    def refused() -> dict[str, Any] | None:
        found = custom.get_namespaced_custom_object(kn.DGD_GROUP, kn.DGD_VERSION, namespace, kn.DGD_PLURAL, "workers")
        conditions = (found.get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c.get("reason") == "SharedFrontendUnsupported"), None)

    condition = wait_until(refused, "status condition SharedFrontendUnsupported (seed 001 4.2)")
    assert condition["type"] == "Ready" and condition["status"] == "False"
    assert "add a component of type frontend" in condition["message"]
    time.sleep(2.0)  # NB: a few resyncs: still nothing created
    assert not core.list_namespaced_pod(namespace).items
