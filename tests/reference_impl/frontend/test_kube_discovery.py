"""Kubernetes discovery in the frontend, against a fake CustomObjectsApi; the shared listing diff; the env wiring."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from servecert.fakes.engine import Engine
from servecert.protocol import discovery_files, kube_names, waiting
from servecert.reference_impl.frontend import serve
from servecert.reference_impl.frontend.app import FrontendConfig
from servecert.reference_impl.frontend.discovery import FileDiscovery, KubeDiscoverySettings, WorkerInfo
from servecert.reference_impl.frontend.kube_discovery import KubernetesDiscovery
from tests.conftest import config

NS = "team-a"
SELECTOR = f"{kube_names.DYNAMO_NAMESPACE_LABEL}=dyn"


def metadata(engine_id: str, port: int = 8000) -> dict[str, Any]:
    engine = Engine(config(engine_id=engine_id, namespace="dyn"))
    engine.url = f"http://127.0.0.9:{port}"
    return engine.metadata()


class FakeObjects:
    """Just enough of CustomObjectsApi: a namespace's WorkerMetadata objects, filtered by label."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.fail: BaseException | None = None
        self.calls: list[dict[str, Any]] = []

    def put(self, name: str, spec_metadata: object, dynamo_namespace: str = "dyn", **meta: object) -> None:
        self.version += 1
        labels = {kube_names.DYNAMO_NAMESPACE_LABEL: dynamo_namespace}
        self.items[name] = {
            "metadata": {"name": name, "namespace": NS, "resourceVersion": str(self.version), "labels": labels, **meta},
            "spec": {"dynamoNamespace": dynamo_namespace, "podName": name, "metadata": spec_metadata},
        }

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str, **kwargs: Any) -> dict[str, Any]:
        self.calls.append({"where": (group, version, namespace, plural), **kwargs})
        if self.fail is not None:
            raise self.fail
        key, _, value = kwargs["label_selector"].partition("=")
        return {"items": [i for i in self.items.values() if i["metadata"]["labels"].get(key) == value]}


@pytest.fixture
def objects() -> FakeObjects:
    return FakeObjects()


def discovery(objects: FakeObjects, **kwargs: Any) -> tuple[KubernetesDiscovery, list[tuple[str, str]]]:
    found = KubernetesDiscovery(NS, "dyn", objects=objects, **kwargs)
    events: list[tuple[str, str]] = []
    found.watch(lambda kind, worker: events.append((kind, worker.engine_id)))
    return found, events


async def test_objects_that_appear_change_and_disappear_register_and_unregister_workers(objects: FakeObjects) -> None:
    found, events = discovery(objects)
    objects.put("pod-a", metadata("a"))
    objects.put("pod-b", metadata("b"))
    objects.put("other", metadata("x"), dynamo_namespace="elsewhere")
    await found.refresh()
    assert sorted(events) == [("added", "a"), ("added", "b")]
    assert objects.calls[0]["where"] == (kube_names.WM_GROUP, kube_names.WM_VERSION, NS, kube_names.WM_PLURAL)
    assert objects.calls[0]["label_selector"] == SELECTOR and objects.calls[0]["_request_timeout"] > 0

    events.clear()
    await found.refresh()
    assert events == [], "an unchanged listing changes nothing"

    objects.put("pod-a", metadata("a2", port=8001))  # the pod's engine restarted under a new id
    objects.items.pop("pod-b")
    await found.refresh()
    assert sorted(events) == [("added", "a2"), ("removed", "a"), ("removed", "b")]
    assert [(w.engine_id, w.url) for w in found.workers()] == [("a2", "http://127.0.0.9:8001")]

    events.clear()
    objects.put("pod-a", metadata("a2"), deletionTimestamp="2025-01-01T00:00:00Z")
    await found.refresh()
    assert events == [("removed", "a2")], "an object being deleted is gone already"


async def test_an_api_error_keeps_the_known_workers_and_is_logged_once(objects: FakeObjects, caplog: pytest.LogCaptureFixture) -> None:
    found, events = discovery(objects)
    objects.put("pod-a", metadata("a"))
    await found.refresh()
    caplog.set_level(logging.INFO, logger="servecert.frontend.discovery")
    objects.fail = ApiException(status=503, reason="Service Unavailable")
    for _ in range(3):
        await found.refresh()
    assert [w.engine_id for w in found.workers()] == ["a"] and events == [("added", "a")]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "503" in warnings[0] and NS in warnings[0]

    objects.fail = ApiException(status=404, reason="Not Found")
    await found.refresh()
    assert "CRD" in (found.problem or "")

    objects.fail = None
    objects.items.clear()
    await found.refresh()
    assert found.problem is None and found.workers() == []
    assert any("works again" in r.getMessage() for r in caplog.records)


async def test_a_call_that_hangs_is_cut_by_the_timeout(objects: FakeObjects) -> None:
    found, _ = discovery(objects, call_timeout=0.05)

    def hang(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        time.sleep(1.5)
        return {"items": []}

    objects.list_namespaced_custom_object = hang  # type: ignore[method-assign]
    started = asyncio.get_running_loop().time()
    await found.refresh()
    assert asyncio.get_running_loop().time() - started < 1.4
    assert "no answer within" in (found.problem or "")


async def test_a_malformed_object_is_skipped_until_it_changes(objects: FakeObjects, caplog: pytest.LogCaptureFixture) -> None:
    found, events = discovery(objects)
    objects.put("pod-a", {"engine_id": "a"})  # no card, no url
    objects.put("pod-b", "not an object")
    with caplog.at_level(logging.WARNING, logger="servecert.frontend.discovery"):
        await found.refresh()
        await found.refresh()
    assert events == [] and len(caplog.records) == 2, [r.getMessage() for r in caplog.records]
    objects.put("pod-a", metadata("a"))
    await found.refresh()
    assert events == [("added", "a")]


async def test_polling_picks_up_new_objects_until_stopped(objects: FakeObjects) -> None:
    found, events = discovery(objects, interval=0.05)
    await found.start()
    try:
        objects.put("pod-a", metadata("a"))
        await waiting.until_async(lambda: events, timeout_s=5.0, what="a discovery event", interval_s=0.05)
        assert events == [("added", "a")]
    finally:
        await found.stop()
    calls = len(objects.calls)
    await asyncio.sleep(0.15)
    assert len(objects.calls) == calls, "no listing after stop()"


async def test_file_discovery_shares_the_listing_diff(tmp_path: Path) -> None:
    found = FileDiscovery(tmp_path)
    events: list[tuple[str, str]] = []
    found.watch(lambda kind, worker: events.append((kind, worker.engine_id)))
    discovery_files.publish(tmp_path, metadata("a"))
    (tmp_path / "broken.json").write_text("{")
    found.scan()
    assert events == [("added", "a")]
    discovery_files.unpublish(tmp_path, "a")
    found.scan()
    assert events == [("added", "a"), ("removed", "a")]


def test_the_environment_selects_kubernetes_discovery_and_names_what_is_missing() -> None:
    assert KubeDiscoverySettings.from_env({}) is None
    env = {kube_names.ENV_DISCOVERY_BACKEND: kube_names.DISCOVERY_KUBERNETES}
    with pytest.raises(ValueError, match=f"{kube_names.ENV_POD_NAMESPACE} and KUBECONFIG"):
        KubeDiscoverySettings.from_env(env)
    with pytest.raises(ValueError, match="'etcd'"):
        KubeDiscoverySettings.from_env({kube_names.ENV_DISCOVERY_BACKEND: "etcd"})
    env |= {kube_names.ENV_POD_NAMESPACE: NS, "KUBECONFIG": "/k"}
    assert KubeDiscoverySettings.from_env(env) == KubeDiscoverySettings(NS, "dynamo", "/k")
    settings = FrontendConfig.from_env(env | {kube_names.ENV_DYN_NAMESPACE: "dyn"}).kube_discovery
    assert settings == KubeDiscoverySettings(NS, "dyn", "/k")


def test_the_frontend_command_builds_the_backend_the_config_asks_for(tmp_path: Path) -> None:
    assert isinstance(serve.discovery_for(FrontendConfig(), tmp_path), FileDiscovery)
    with pytest.raises(ValueError, match="--discovery-dir"):
        serve.discovery_for(FrontendConfig(), None)
    missing = FrontendConfig(kube_discovery=KubeDiscoverySettings(NS, "dyn", str(tmp_path / "nope")))
    with pytest.raises(ValueError, match="KUBECONFIG="):
        serve.discovery_for(missing, None)


def test_the_frontend_process_refuses_kubernetes_discovery_without_kubeconfig() -> None:
    cmd = [sys.executable, "-m", "servecert", "frontend", "serve", "--port", "0"]
    env = {kube_names.ENV_DISCOVERY_BACKEND: kube_names.DISCOVERY_KUBERNETES, kube_names.ENV_POD_NAMESPACE: NS, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 2, done.stderr
    assert "KUBECONFIG" in done.stderr and "Traceback" not in done.stderr


def test_worker_info_reads_what_the_engine_publishes() -> None:
    info = WorkerInfo.from_metadata(metadata("a"))
    assert (info.engine_id, info.namespace, info.url) == ("a", "dyn", "http://127.0.0.9:8000")
