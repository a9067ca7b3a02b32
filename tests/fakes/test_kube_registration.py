"""The engine's WorkerMetadata registration against a fake API: the object, retries, give-ups, withdrawal, start-up errors."""

from __future__ import annotations

import asyncio
import copy
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException
from urllib3.exceptions import MaxRetryError

from servecert.fakes import faults
from servecert.fakes.engine import Engine
from servecert.fakes.kube_registration import PodIdentity, Registration, RegistrationConfigError, RegistrationError, manifest
from servecert.protocol import kube_names
from tests.conftest import config

POD = PodIdentity(name="engine-0", namespace="team-a", uid="uid-0", kubeconfig="/k/config")
WHERE = (kube_names.WM_GROUP, kube_names.WM_VERSION, "team-a", kube_names.WM_PLURAL)


class FakeApi:
    """CustomObjectsApi + CoreV1Api for one namespace; ``failures`` are raised by the next calls, in order."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.failures: list[BaseException] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._next = 0

    def _call(self, name: str, **kwargs: Any) -> None:
        self.calls.append((name, kwargs))
        assert 0 < kwargs["request_timeout"] <= 3.0, "every call is bounded"
        if self.failures:
            raise self.failures.pop(0)

    def _stored(self, body: dict[str, Any], uid: str | None = None) -> dict[str, Any]:
        self._next += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["uid"] = uid or f"obj-{self._next}"
        stored["metadata"]["resourceVersion"] = str(self._next)
        self.objects[stored["metadata"]["name"]] = stored
        return stored

    def create_namespaced_custom_object(self, *where: Any, _request_timeout: float) -> dict[str, Any]:
        *path, body = where
        self._call("create", where=tuple(path), request_timeout=_request_timeout)
        if body["metadata"]["name"] in self.objects:
            raise ApiException(status=409, reason="Conflict")
        return self._stored(body)

    def get_namespaced_custom_object(self, *where: str, _request_timeout: float) -> dict[str, Any]:
        self._call("get", where=where, request_timeout=_request_timeout)
        if where[-1] not in self.objects:
            raise ApiException(status=404, reason="Not Found")
        return self.objects[where[-1]]

    def replace_namespaced_custom_object(self, *where: Any, _request_timeout: float) -> dict[str, Any]:
        *path, name, body = where
        self._call("replace", where=(*path, name), body=body, request_timeout=_request_timeout)
        current = self.objects[name]
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        return self._stored(body, uid=current["metadata"]["uid"])

    def delete_namespaced_custom_object(self, *where: str, body: dict[str, Any], _request_timeout: float) -> None:
        self._call("delete", where=where, body=body, request_timeout=_request_timeout)
        current = self.objects.get(where[-1])
        if current is None:
            raise ApiException(status=404, reason="Not Found")
        if current["metadata"]["uid"] != body["preconditions"]["uid"]:
            raise ApiException(status=409, reason="Conflict")
        del self.objects[where[-1]]

    def read_namespaced_pod(self, name: str, namespace: str, _request_timeout: float) -> Any:
        self._call("read_pod", where=(namespace, name), request_timeout=_request_timeout)
        return SimpleNamespace(metadata=SimpleNamespace(uid=f"looked-up-{name}"))


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def registration(api: FakeApi, clock: FakeClock, pod: PodIdentity = POD) -> Registration:
    return Registration(pod, api, api, sleep=clock.sleep, clock=clock)


def engine_metadata() -> dict[str, Any]:
    engine = Engine(config(engine_id="e-1", namespace="dyn"))
    engine.url = "http://127.64.0.5:8000"
    return engine.metadata()


def test_publish_creates_a_labelled_object_owned_by_the_pod(api: FakeApi, clock: FakeClock) -> None:
    meta = engine_metadata()
    uid = registration(api, clock).publish(meta)
    stored = api.objects["engine-0"]
    assert uid == stored["metadata"]["uid"]
    assert api.calls[0][1]["where"] == WHERE
    assert stored["apiVersion"] == f"{kube_names.WM_GROUP}/{kube_names.WM_VERSION}" and stored["kind"] == kube_names.WM_KIND
    assert stored["metadata"]["namespace"] == "team-a"
    assert stored["metadata"]["labels"] == {kube_names.DYNAMO_NAMESPACE_LABEL: "dyn"}
    assert stored["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "engine-0", "uid": "uid-0"}]
    assert stored["spec"] == {"dynamoNamespace": "dyn", "podName": "engine-0", "metadata": meta}


def test_a_stale_object_of_the_same_pod_is_replaced(api: FakeApi, clock: FakeClock) -> None:
    api.objects["engine-0"] = manifest(POD, "old-pod-uid", {**engine_metadata(), "engine_id": "old"})
    api.objects["engine-0"]["metadata"] |= {"uid": "obj-old", "resourceVersion": "7"}
    uid = registration(api, clock).publish(engine_metadata())
    assert [name for name, _ in api.calls] == ["create", "get", "replace"]
    assert uid == "obj-old"
    stored = api.objects["engine-0"]
    assert stored["spec"]["metadata"]["engine_id"] == "e-1"
    assert stored["metadata"]["ownerReferences"][0]["uid"] == "uid-0"


def test_transient_failures_are_retried_with_growing_pauses(api: FakeApi, clock: FakeClock) -> None:
    unreachable = MaxRetryError(None, "/apis", "connection refused")  # type: ignore[arg-type]
    api.failures = [ApiException(status=503, reason="Service Unavailable"), unreachable, ApiException(status=500, reason="x")]
    registration(api, clock).publish(engine_metadata())
    assert "engine-0" in api.objects
    assert clock.sleeps == [0.2, 0.4, 0.8]


def test_a_persistent_outage_gives_up_at_the_deadline_naming_the_pod(api: FakeApi, clock: FakeClock) -> None:
    api.failures = [ApiException(status=503, reason="Service Unavailable") for _ in range(100)]
    with pytest.raises(RegistrationError, match=r"pod team-a/engine-0: cannot publish its WorkerMetadata after \d+ attempt") as err:
        registration(api, clock).publish(engine_metadata())
    assert "503" in str(err.value)
    assert clock.now <= 10.0 and len(api.calls) < 15


@pytest.mark.parametrize(
    ("status", "hint"),
    [(404, "WorkerMetadata CRD"), (403, "KUBECONFIG=/k/config"), (422, "refused the object")],
)
def test_a_refusal_is_not_retried_and_says_what_to_check(api: FakeApi, clock: FakeClock, status: int, hint: str) -> None:
    api.failures = [ApiException(status=status, reason="No")]
    with pytest.raises(RegistrationError, match="after 1 attempt") as err:
        registration(api, clock).publish(engine_metadata())
    assert hint in str(err.value) and clock.sleeps == []


def test_without_pod_uid_the_owner_is_read_from_the_pod(api: FakeApi, clock: FakeClock) -> None:
    pod = PodIdentity(name="engine-0", namespace="team-a", uid="", kubeconfig="/k/config")
    registration(api, clock, pod).publish(engine_metadata())
    assert api.calls[0][0] == "read_pod"
    assert api.objects["engine-0"]["metadata"]["ownerReferences"][0]["uid"] == "looked-up-engine-0"


def test_withdraw_deletes_only_the_object_it_wrote(api: FakeApi, clock: FakeClock) -> None:
    reg = registration(api, clock)
    reg.withdraw()
    assert api.calls == [], "nothing published, nothing deleted"
    uid = reg.publish(engine_metadata())
    reg.withdraw()
    assert api.objects == {}
    assert api.calls[-1][1]["body"] == {"preconditions": {"uid": uid}}

    reg.publish(engine_metadata())
    api.objects["engine-0"]["metadata"]["uid"] = "someone-else"  # deleted and re-created meanwhile
    reg.withdraw()
    assert "engine-0" in api.objects and reg.uid is None


def test_withdraw_gives_up_sooner_than_registration(api: FakeApi, clock: FakeClock) -> None:
    reg = registration(api, clock)
    reg.publish(engine_metadata())
    api.failures = [ApiException(status=503, reason="Service Unavailable") for _ in range(100)]
    with pytest.raises(RegistrationError, match="cannot delete its WorkerMetadata"):
        reg.withdraw()
    assert clock.now <= 5.0


async def test_publish_waits_for_the_model_load_and_not_after_a_stop(api: FakeApi) -> None:
    reg = Registration(POD, api, api)
    engine = Engine(config(engine_id="e-1", faults=faults.Faults(startup_seconds=0.3)))
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await reg.publish_when_ready(engine, asyncio.Event())
    assert loop.time() - started >= 0.25 and "engine-0" in api.objects
    await reg.withdraw_quietly()
    assert api.objects == {}

    stop = asyncio.Event()
    slow = Engine(config(engine_id="e-2", faults=faults.Faults(startup_seconds=30)))
    loop.call_later(0.1, stop.set)
    assert await reg.publish_when_ready(slow, stop)
    assert api.objects == {} and loop.time() - started < 5


async def test_a_failed_registration_is_reported_not_raised(api: FakeApi, capsys: pytest.CaptureFixture[str]) -> None:
    reg = Registration(POD, api, api)
    api.failures = [ApiException(status=404, reason="Not Found")]
    assert not await reg.publish_when_ready(Engine(config(engine_id="e-1")), asyncio.Event())
    assert "pod team-a/engine-0" in capsys.readouterr().err


def test_the_environment_says_who_the_pod_is() -> None:
    assert PodIdentity.from_env({}) is None
    backend = {kube_names.ENV_DISCOVERY_BACKEND: kube_names.DISCOVERY_KUBERNETES}
    with pytest.raises(RegistrationConfigError, match="POD_NAME, POD_NAMESPACE, KUBECONFIG"):
        PodIdentity.from_env(backend)
    with pytest.raises(RegistrationConfigError, match="'files'"):
        PodIdentity.from_env({kube_names.ENV_DISCOVERY_BACKEND: "files"})
    env = backend | {"POD_NAME": "p", "POD_NAMESPACE": "n", "KUBECONFIG": "/k"}
    assert PodIdentity.from_env(env) == PodIdentity("p", "n", "", "/k")
    assert PodIdentity.from_env(env | {"POD_UID": "u"}) == PodIdentity("p", "n", "u", "/k")


def _serve(extra_env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "servecert", "engine", "serve", "--model", "m", "--port", "0", "--time-scale", "0", *args]
    env = {"PATH": "/usr/bin:/bin", kube_names.ENV_DISCOVERY_BACKEND: kube_names.DISCOVERY_KUBERNETES, **extra_env}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({}, (), "needs POD_NAME, POD_NAMESPACE, KUBECONFIG set"),
        ({"POD_NAME": "p", "POD_NAMESPACE": "n", "KUBECONFIG": "/nonexistent/kubeconfig"}, (), "cannot load KUBECONFIG="),
        ({"POD_NAME": "p", "POD_NAMESPACE": "n", "KUBECONFIG": "/k"}, ("--count", "2"), "one engine per process"),
    ],
)
def test_the_engine_process_exits_2_at_start_up_when_it_cannot_register(env: dict[str, str], args: tuple[str, ...], message: str) -> None:
    done = _serve(env, *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
