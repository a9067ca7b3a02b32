"""Kubernetes discovery on the embedded cluster: engine pods publish WorkerMetadata, a frontend pod routes to them.

The unit tests here check the cluster-side pieces without a cluster (the CRD file, the frontend
image, the pod processes' KUBECONFIG, kwok leaving frontend pods to the runner); the test marked
``cluster`` runs two fake-engine pods and a reference-frontend pod in a namespace of its own.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from kubernetes import client

from servecert.fakes.pod_runner import images
from servecert.fakes.pod_runner.runner import PodRunner, PodWork
from servecert.harness.cluster import crds, kube, kwok_stages
from servecert.protocol import kube_names
from tests.harness.cluster import checks

CRD_FILE = Path(crds.__file__).with_name("crds") / "workermetadatas.servecert.io.yaml"
ENGINE_IMAGE = f"{images.FAKE_ENGINE_IMAGE}:latest"
FRONTEND_IMAGE = f"{images.FRONTEND_IMAGE}:latest"
FRONTEND_ID = "kd-frontend"
DYNAMO_NAMESPACE = "kd"
GPU = "nvidia.com/gpu"
WAIT_S = 60.0


def _crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_FILE.read_text())
    return loaded


# --- without a cluster ----------------------------------------------------------------------


def test_the_crd_file_names_the_resource_as_protocol_does() -> None:
    crd = _crd()
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{kube_names.WM_PLURAL}.{kube_names.WM_GROUP}"
    assert (spec["group"], spec["names"]["plural"], spec["names"]["kind"], spec["scope"]) == (
        kube_names.WM_GROUP,
        kube_names.WM_PLURAL,
        kube_names.WM_KIND,
        "Namespaced",
    )
    (version,) = spec["versions"]
    assert version["name"] == kube_names.WM_VERSION and version["served"] and version["storage"]
    inner = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert inner["required"] == ["dynamoNamespace"]
    record = inner["properties"]["metadata"]
    assert record["type"] == "object" and record["x-kubernetes-preserve-unknown-fields"] is True


def test_the_frontend_image_serves_on_the_pod_ip_and_is_ready_on_health() -> None:
    spec = images.lookup(FRONTEND_IMAGE)
    assert spec is not None and spec.health_path == "/health"
    argv = spec.command(images.Launch(args=["--frontend-id", "f", "--port", "1"], host="127.64.0.7", port=8000))
    assert argv[:5] == [sys.executable, "-m", "servecert", "frontend", "serve"]
    assert argv[-4:] == ["--host", "127.64.0.7", "--port", "8000"]


def test_kwok_leaves_frontend_pods_to_the_runner() -> None:
    stages = {d["metadata"]["name"]: d for d in kwok_stages.stages(images.KNOWN_IMAGES)}
    last = stages["pod-ready"]["spec"]["selector"]["matchExpressions"][-1]
    assert images.FRONTEND_IMAGE in last["values"] and images.FAKE_ENGINE_IMAGE in last["values"]


def test_every_pod_process_gets_the_runners_kubeconfig_unless_the_pod_sets_its_own(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    runner = PodRunner(SimpleNamespace(), tmp_path / "pods", "127.99.0.0/16", kubeconfig=kubeconfig)
    try:
        pod = {"metadata": {"name": "f", "namespace": "n", "uid": "u"}, "spec": {"nodeName": "node-0"}}
        work = PodWork(uid="u", namespace="n", name="f", pod=pod, ip="127.99.0.2", host_ip="10.0.0.1", directory=tmp_path)
        run = runner.container_run(work, {"name": "c", "image": FRONTEND_IMAGE})
        assert run.env["KUBECONFIG"] == str(kubeconfig.resolve())
        assert run.health_url == "http://127.99.0.2:8000/health"
        own = runner.container_run(work, {"name": "c", "image": FRONTEND_IMAGE, "env": [{"name": "KUBECONFIG", "value": "/mine"}]})
        assert own.env["KUBECONFIG"] == "/mine"
    finally:
        runner.shutdown()


# --- on the cluster -------------------------------------------------------------------------


def _pod_env() -> list[dict[str, Any]]:
    def field(name: str, path: str) -> dict[str, Any]:
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}

    return [
        {"name": kube_names.ENV_DISCOVERY_BACKEND, "value": kube_names.DISCOVERY_KUBERNETES},
        {"name": kube_names.ENV_DYN_NAMESPACE, "value": DYNAMO_NAMESPACE},
        field(kube_names.ENV_POD_NAME, "metadata.name"),
        field(kube_names.ENV_POD_NAMESPACE, "metadata.namespace"),
        field(kube_names.ENV_POD_UID, "metadata.uid"),
    ]


def _pod(name: str, image: str, args: list[str], resources: dict[str, Any]) -> dict[str, Any]:
    container = {"name": "main", "image": image, "args": args, "env": _pod_env(), "resources": resources}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"terminationGracePeriodSeconds": 10, "containers": [container]},
    }


def engine_pod(name: str) -> dict[str, Any]:
    gpu = {"requests": {GPU: "1"}, "limits": {GPU: "1"}}
    return _pod(name, ENGINE_IMAGE, ["--model", "m", "--role", "agg", "--time-scale", "0"], gpu)


def frontend_pod(name: str) -> dict[str, Any]:
    return _pod(name, FRONTEND_IMAGE, ["--frontend-id", FRONTEND_ID], {})


def worker_metadatas(api: Any, ns: str) -> dict[str, dict[str, Any]]:
    return {item["metadata"]["name"]: item for item in kube.list_objects(api, kube.WORKER_METADATA, ns)}


def routed_engines(url: str) -> set[str]:
    return {w["engine_id"] for w in checks.http_json(f"{url}/status")["workers"]}


def complete(url: str) -> dict[str, Any] | None:
    try:
        return checks.http_json(f"{url}/v1/completions", {"model": "m", "prompt": "hello kubernetes discovery", "max_tokens": 3})
    except (urllib.error.URLError, OSError):
        return None


@pytest.mark.cluster
def test_engines_and_a_frontend_find_each_other_through_worker_metadata(api: Any) -> None:
    core = client.CoreV1Api(api)
    with checks.namespace(api, "kdisc") as ns:
        for name in ("e1", "e2"):
            core.create_namespaced_pod(ns, engine_pod(name))
        core.create_namespaced_pod(ns, frontend_pod("fe"))
        pods = {name: checks.pod_must_be_ready(api, ns, name, timeout=WAIT_S) for name in ("e1", "e2", "fe")}

        # Each engine published itself, labelled with its Dynamo namespace and owned by its pod.
        stored = checks.eventually(
            lambda: (found := worker_metadatas(api, ns)) and set(found) == {"e1", "e2"} and found,
            "WorkerMetadata e1 and e2",
            WAIT_S,
            lambda: f"found {sorted(worker_metadatas(api, ns))}",
        )
        engine_ids = {}
        for name in ("e1", "e2"):
            item = stored[name]
            owner = {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pods[name]["metadata"]["uid"]}
            assert item["metadata"]["ownerReferences"] == [owner]
            assert item["metadata"]["labels"][kube_names.DYNAMO_NAMESPACE_LABEL] == DYNAMO_NAMESPACE
            assert item["spec"]["podName"] == name and item["spec"]["dynamoNamespace"] == DYNAMO_NAMESPACE
            assert item["spec"]["metadata"]["url"] == f"http://{pods[name]['status']['podIP']}:8000"
            engine_ids[name] = item["spec"]["metadata"]["engine_id"]

        # The frontend found both and routes a completion to one of them.
        url = f"http://{pods['fe']['status']['podIP']}:8000"
        checks.eventually(
            lambda: routed_engines(url) == set(engine_ids.values()),
            "frontend routes to e1 and e2",
            WAIT_S,
            lambda: f"frontend status: {checks.http_json(url + '/status')}",
        )
        answer = checks.eventually(lambda: complete(url), "a completion through the frontend", WAIT_S)
        assert answer["usage"]["completion_tokens"] == 3
        served = {
            name
            for name in ("e1", "e2")
            for record in checks.http_json(f"{stored[name]['spec']['metadata']['url']}/groundtruth")["records"]
            if record["frontend"] == FRONTEND_ID
        }
        assert len(served) == 1, f"one engine should have served the frontend's request, got {served}"

        # Deleting an engine pod removes its WorkerMetadata, and the frontend stops routing to it.
        core.delete_namespaced_pod("e1", ns)
        checks.eventually(lambda: "e1" not in worker_metadatas(api, ns), "WorkerMetadata e1 gone", WAIT_S)
        checks.eventually(
            lambda: routed_engines(url) == {engine_ids["e2"]},
            "frontend dropped e1",
            WAIT_S,
            lambda: f"frontend status: {checks.http_json(url + '/status')}",
        )
        checks.pod_must_be_gone(api, ns, "e1", timeout=WAIT_S)
        again = checks.eventually(lambda: complete(url), "a completion after e1 left", WAIT_S)
        assert again["usage"]["completion_tokens"] == 3
