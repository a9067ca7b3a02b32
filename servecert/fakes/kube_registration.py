"""Kubernetes discovery, engine side: a ready engine publishes itself as a WorkerMetadata object.

Data flow (``DYN_DISCOVERY_BACKEND=kubernetes``, one engine per process)::

    env POD_NAME, POD_NAMESPACE, POD_UID (downward API), DYN_NAMESPACE, KUBECONFIG
      -> PodIdentity.from_env           missing ones: RegistrationConfigError -> exit 2 at start-up
      -> connect(): CustomObjectsApi + CoreV1Api from KUBECONFIG (the pod runner passes its own)
    engine ready -> publish(engine.metadata()):
        create servecert.io/v1alpha1 WorkerMetadata <POD_NAME> in <POD_NAMESPACE>
          labels nvidia.com/dynamo-namespace=<engine namespace>, ownerReferences [the Pod]
          spec {dynamoNamespace, podName, metadata: <the engine's metadata record>}
        (409: replace the stale one a previous container of the pod left)
    clean stop -> withdraw(): delete it, precondition uid = the object we wrote

Why: on a cluster, engines and frontends share no folder; the reference frontend lists these
objects (``servecert.reference_impl.frontend.kube_discovery``), as Dynamo's Kubernetes discovery backend
does with its own resource. The ownerReference makes the garbage collector delete the object with
the pod, so a SIGKILLed engine does not stay routable. Every call goes through the synchronous
``kubernetes`` client in a thread, with a per-call timeout and bounded retries (registration gives
up after ~10 s, withdrawal after ~5 s so it fits in a termination grace period); errors name the
pod and say what to check.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError as TransportError

from servecert.protocol import kube_names

if TYPE_CHECKING:
    from servecert.fakes.engine import Engine

T = TypeVar("T")
REGISTER_DEADLINE_S = 10.0
WITHDRAW_DEADLINE_S = 5.0
CALL_TIMEOUT_S = 3.0
FIRST_DELAY_S = 0.2
MAX_DELAY_S = 2.0
READY_WAITS = 100
"""At most this many waits for the engine's model load (its ready time can move under the admin API)."""
RETRYABLE = frozenset({409, 429, 500, 502, 503, 504})
KUBECONFIG = "KUBECONFIG"


class RegistrationConfigError(ValueError):
    """The environment does not say who the pod is or how to reach the API server."""


class RegistrationError(RuntimeError):
    """A bounded registration or withdrawal gave up; the message names the pod and what to check."""


class _Retry(Exception):
    """A race with another writer (the object vanished while being replaced): try again."""


@dataclass(frozen=True)
class PodIdentity:
    name: str
    namespace: str
    uid: str
    """Empty when POD_UID is not set: read from the pod object then."""
    kubeconfig: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PodIdentity | None:
        """None unless the kubernetes backend is chosen; raises RegistrationConfigError naming what is missing."""
        backend = (env.get(kube_names.ENV_DISCOVERY_BACKEND) or "").strip().lower()
        if not backend:
            return None
        if backend != kube_names.DISCOVERY_KUBERNETES:
            raise RegistrationConfigError(
                f"{kube_names.ENV_DISCOVERY_BACKEND} must be {kube_names.DISCOVERY_KUBERNETES!r} or unset "
                f"(file discovery with --discovery-dir), got {backend!r}"
            )
        needed = (kube_names.ENV_POD_NAME, kube_names.ENV_POD_NAMESPACE, KUBECONFIG)
        missing = [name for name in needed if not env.get(name)]
        if missing:
            raise RegistrationConfigError(
                f"{kube_names.ENV_DISCOVERY_BACKEND}={backend} needs {', '.join(missing)} set: POD_NAME and POD_NAMESPACE "
                "from the downward API (fieldRef metadata.name / metadata.namespace), KUBECONFIG naming a kubeconfig "
                "(the pod runner sets it)"
            )
        return cls(
            name=env[kube_names.ENV_POD_NAME],
            namespace=env[kube_names.ENV_POD_NAMESPACE],
            uid=env.get(kube_names.ENV_POD_UID, ""),
            kubeconfig=env[KUBECONFIG],
        )


def manifest(pod: PodIdentity, pod_uid: str, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The WorkerMetadata object of ``pod``: labelled with the engine's Dynamo namespace, owned by the pod."""
    dynamo_namespace = str(metadata["namespace"])
    return {
        "apiVersion": f"{kube_names.WM_GROUP}/{kube_names.WM_VERSION}",
        "kind": kube_names.WM_KIND,
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "labels": {kube_names.DYNAMO_NAMESPACE_LABEL: dynamo_namespace},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod_uid}],
        },
        "spec": {"dynamoNamespace": dynamo_namespace, "podName": pod.name, "metadata": dict(metadata)},
    }


class Registration:
    """Publishes and withdraws one pod's WorkerMetadata through ``objects`` (CustomObjectsApi) and ``pods`` (CoreV1Api)."""

    def __init__(
        self,
        pod: PodIdentity,
        objects: Any,
        pods: Any,
        *,
        register_deadline_s: float = REGISTER_DEADLINE_S,
        withdraw_deadline_s: float = WITHDRAW_DEADLINE_S,
        call_timeout_s: float = CALL_TIMEOUT_S,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.pod = pod
        self.objects = objects
        self.pods = pods
        self.register_deadline_s = register_deadline_s
        self.withdraw_deadline_s = withdraw_deadline_s
        self.call_timeout_s = call_timeout_s
        self.sleep = sleep
        self.clock = clock
        self._close = close
        self.uid: str | None = None
        """uid of the object we wrote; None when nothing of ours is published."""

    # --- synchronous core (run in a thread by the async wrappers) ---------------------------

    def publish(self, metadata: Mapping[str, Any]) -> str:
        """Create or replace the pod's WorkerMetadata; returns its uid; raises RegistrationError."""
        owner = self.pod.uid or self._retry("read its pod's uid", self._read_pod_uid, self.register_deadline_s)
        body = manifest(self.pod, owner, metadata)
        self.uid = self._retry(f"publish its {kube_names.WM_KIND}", lambda t: self._put(body, t), self.register_deadline_s)
        return self.uid

    def withdraw(self) -> None:
        """Delete what ``publish`` wrote (404: gone already; 409: replaced by someone else); raises RegistrationError."""
        if self.uid is None:
            return
        self._retry(f"delete its {kube_names.WM_KIND}", self._delete, self.withdraw_deadline_s)
        self.uid = None

    def close(self) -> None:
        if self._close is not None:
            self._close()

    def _put(self, body: dict[str, Any], timeout: float) -> str:
        args = (kube_names.WM_GROUP, kube_names.WM_VERSION, self.pod.namespace, kube_names.WM_PLURAL)
        try:
            stored = self.objects.create_namespaced_custom_object(*args, body, _request_timeout=timeout)
        except ApiException as exc:
            if exc.status != 409:
                raise
            try:
                current = self.objects.get_namespaced_custom_object(*args, self.pod.name, _request_timeout=timeout)
            except ApiException as gone:
                if gone.status == 404:
                    raise _Retry("it was deleted while being replaced") from None
                raise
            version = current["metadata"]["resourceVersion"]
            body = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
            stored = self.objects.replace_namespaced_custom_object(*args, self.pod.name, body, _request_timeout=timeout)
        return str(stored["metadata"]["uid"])

    def _delete(self, timeout: float) -> None:
        args = (kube_names.WM_GROUP, kube_names.WM_VERSION, self.pod.namespace, kube_names.WM_PLURAL, self.pod.name)
        try:
            self.objects.delete_namespaced_custom_object(*args, body={"preconditions": {"uid": self.uid}}, _request_timeout=timeout)
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise

    def _read_pod_uid(self, timeout: float) -> str:
        return str(self.pods.read_namespaced_pod(self.pod.name, self.pod.namespace, _request_timeout=timeout).metadata.uid)

    def _retry(self, what: str, call: Callable[[float], T], deadline_s: float) -> T:
        started = self.clock()
        deadline = started + deadline_s
        delay = FIRST_DELAY_S
        for attempt in range(1, 1000):  # NB: the deadline ends it long before the count does
            try:
                return call(max(0.1, min(self.call_timeout_s, deadline - self.clock())))
            except (ApiException, TransportError, OSError, _Retry) as exc:
                retryable, problem = self._explain(exc)
            if not retryable or self.clock() + delay >= deadline:
                elapsed = self.clock() - started
                raise RegistrationError(f"pod {self.pod.key}: cannot {what} after {attempt} attempt(s) in {elapsed:.1f}s: {problem}")
            self.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
        raise RegistrationError(f"pod {self.pod.key}: cannot {what}: too many attempts")

    def _explain(self, exc: BaseException) -> tuple[bool, str]:
        """(worth retrying, what went wrong and what to check)."""
        resource = f"{kube_names.WM_PLURAL}.{kube_names.WM_GROUP}/{kube_names.WM_VERSION}"
        if isinstance(exc, _Retry):
            return True, str(exc)
        if not isinstance(exc, ApiException):
            return True, f"cannot reach the API server named in {KUBECONFIG}={self.pod.kubeconfig}: {exc}"
        answer = f"{exc.status} {exc.reason}"
        if exc.status == 404:
            return False, (
                f"{answer}: check that the WorkerMetadata CRD ({resource}, servecert/harness/cluster/crds/) is installed, and that "
                f"namespace {self.pod.namespace} and pod {self.pod.name} exist ({kube_names.ENV_POD_NAME}/{kube_names.ENV_POD_NAMESPACE})"
            )
        if exc.status in (401, 403):
            identity = f"the identity in {KUBECONFIG}={self.pod.kubeconfig}"
            said = f" (the API server said: {str(exc.body)[:300]})" if exc.body else ""
            return False, f"{answer}{said}: check that {identity} may write {resource} in {self.pod.namespace}"
        if exc.status in RETRYABLE:
            return True, answer
        return False, f"{answer}: the API server refused the object: {str(exc.body)[:300]}"

    # --- asynchronous wrappers for ``servecert.fakes.serve`` --------------------------------------------

    async def publish_when_ready(self, engine: Engine, stop: asyncio.Event) -> bool:
        """Wait for the engine's model load (or ``stop``), then publish; False after printing why it failed."""
        for _ in range(READY_WAITS):
            if engine.ready or engine.crashed or stop.is_set():
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.05, engine.model_load.remaining()))
        if not engine.ready or stop.is_set():
            return True  # stopping (or crashed) before it was ready: nothing to publish
        try:
            await asyncio.to_thread(self.publish, engine.metadata())
        except RegistrationError as exc:
            print(f"servecert engine serve: error: {exc}", file=sys.stderr, flush=True)
            return False
        print(f"engine {engine.engine_id} registered as {kube_names.WM_KIND} {self.pod.key}", flush=True)
        return True

    async def withdraw_quietly(self) -> None:
        """Withdraw on a clean stop; a failure is printed, the garbage collector removes the object with the pod."""
        try:
            await asyncio.to_thread(self.withdraw)
        except RegistrationError as exc:
            print(f"servecert engine serve: warning: {exc}; it goes with the pod", file=sys.stderr, flush=True)
        finally:
            self.close()


def connect(pod: PodIdentity) -> Registration:
    """A Registration with clients built from the pod's KUBECONFIG; raises RegistrationConfigError if it cannot load."""
    try:
        api = config.new_client_from_config(config_file=pod.kubeconfig)
    except (ConfigException, OSError, TypeError, ValueError) as exc:
        raise RegistrationConfigError(f"pod {pod.key}: cannot load {KUBECONFIG}={pod.kubeconfig}: {exc}") from None
    return Registration(pod, client.CustomObjectsApi(api), client.CoreV1Api(api), close=api.close)
