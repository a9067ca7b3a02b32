"""A real P/D router on a cluster: the engines as labelled pods, the router finding them through its Kubernetes service discovery.

Neither vllm-router nor sglang-router ships an operator; on Kubernetes their users run the
engines as pods carrying a prefill or decode label and start the router with
``--service-discovery --prefill-selector ... --decode-selector ...``, which watches the pods and
routes to each Ready one at ``http://<pod IP>:<--service-discovery-port>``. The suite deploys
them that way:

Data flow::

    DeploymentSpec
      -> one fake engine pod per worker, each on a node of its own that carries the worker's domains
         (the environment's place_engine_pod): the worker's parameters, the router's handshake
         (EnginePod.pd_protocol), labels <deployment>/<role> (the selectors), on prefill pods the
         router's bootstrap-port annotation where it reads one (sglang-router: sglang.ai/bootstrap-port)
      -> the router, unmodified, as a host process with the cluster's KUBECONFIG, watching the case's
         namespace (RouterKind.discovery_argv)
      -> ready: every pod Ready (the pod runner's word: the engine answers /health) and listed healthy
         by the router's GET /workers at its pod IP
      -> a WorkerRef per pod (engine id = pod name, url = its pod IP), so the engines' ground truth
         judges, as in the process environment

``add_worker`` creates a pod and waits until the router lists it; ``remove_worker`` deletes the pod
(the router drops a pod once it carries a deletionTimestamp) and waits until the router no longer
lists it; the pod runner ends the engine after its grace period. A spec asking for a topology level
is refused, as in the process environment: neither router has one.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.adapters.contract import (
    AdapterError,
    ClusterEnvironment,
    Deadline,
    DeploymentSpec,
    EnginePod,
    Proc,
    ProcessStartError,
    WorkerRef,
    WorkerSpec,
    free_port,
    wait_for,
)
from servecert.adapters.pd_routers import deployment as shared
from servecert.adapters.pd_routers.deployment import RouterHttp, RouterKind

ENGINE_PORT = 8000
"""Every engine pod listens here on its own pod IP: the routers' ``--service-discovery-port``."""
DEPLOYMENT_LABEL = "servecert.io/pd-deployment"
ROLE_LABEL = "servecert.io/pd-role"
POLL_S = 0.2
REQUEST_TIMEOUT_S = 10.0
_DEPLOYMENTS = itertools.count()


def selector(name: str, role: str) -> dict[str, str]:
    """The labels a router's ``--prefill-selector``/``--decode-selector`` names for one deployment's role."""
    return {DEPLOYMENT_LABEL: name, ROLE_LABEL: role}


def engine_pod(kind: RouterKind, spec: DeploymentSpec, worker: WorkerSpec, name: str, deployment: str) -> EnginePod:
    """The worker's pod: the fake engine speaking ``kind``'s handshake, labelled for the router's selectors."""
    annotations = kind.prefill_annotations(ENGINE_PORT) if worker.role == "prefill" else {}
    return EnginePod(
        name, worker, spec, ENGINE_PORT, kind.pd_protocol, selector(deployment, worker.role), annotations, grace_s=shared.DRAIN_S
    )


def _pod_url(pod: Any) -> str:
    ip = pod.status.pod_ip if pod.status is not None else None
    return f"http://{ip}:{ENGINE_PORT}" if ip else ""


def _ready(pod: Any) -> bool:
    conditions = (pod.status.conditions if pod.status is not None else None) or []
    return pod.metadata.deletion_timestamp is None and any(c.type == "Ready" and c.status == "True" for c in conditions)


def _component(index: int, worker: WorkerSpec) -> str:
    """A DNS label from the worker's role, index and name (as the DGD's components are named)."""
    name = re.sub(r"[^a-z0-9-]+", "-", worker.name.lower()).strip("-")
    return f"{worker.role}-{index}" + (f"-{name}" if name else "")[:40]


@dataclass
class Placed:
    spec: WorkerSpec
    pod: str


@dataclass
class DiscoveredDeployment:
    """The router and its engine pods in a case's namespace (see the module docstring)."""

    kind: RouterKind
    spec: DeploymentSpec
    env: ClusterEnvironment
    workdir: Path
    name: str = field(default_factory=lambda: f"pd-{next(_DEPLOYMENTS)}")
    frontend_url: str = ""
    workers: list[WorkerRef] = field(default_factory=list)
    placed: list[Placed] = field(default_factory=list)
    failed: bool = False
    _router: Proc | None = None
    _session: aiohttp.ClientSession | None = None
    _http: RouterHttp | None = None

    async def _core(self, method: str, *args: Any, **kwargs: Any) -> Any:
        call = getattr(client.CoreV1Api(self.env.api), method)
        return await asyncio.to_thread(call, *args, _request_timeout=REQUEST_TIMEOUT_S, **kwargs)

    def _procs(self) -> list[Proc]:
        return [self._router] if self._router is not None else []

    def _http_(self) -> RouterHttp:
        assert self._http is not None, "the router is not started"
        return self._http

    async def start(self) -> None:
        policy = shared.check_spec(self.kind, self.spec)
        for worker in self.spec.workers:
            await self._create(worker)
        port = free_port()
        namespace = self.env.namespace
        argv = self.kind.discovery_argv(
            port, free_port(), namespace, selector(self.name, "prefill"), selector(self.name, "decode"), ENGINE_PORT,
            policy,
        )  # fmt: skip
        env = {**os.environ, "KUBECONFIG": str(self.env.kubeconfig)}
        self._router = Proc(self.kind.name, argv, env, self.workdir / "router.log", self.workdir)
        self._session = aiohttp.ClientSession()
        self._http = RouterHttp(f"http://127.0.0.1:{port}", self._session)
        await self._router.start()
        self.workers = await self._until_listed([p.pod for p in self.placed], Deadline(shared.READY_S))
        self.frontend_url = self._http_().base

    async def _create(self, worker: WorkerSpec) -> Placed:
        if worker.role not in ("prefill", "decode"):
            raise AdapterError(f"{self.kind.name} in P/D mode serves prefill and decode workers, not {worker.role!r}")
        pod = f"{self.name}-{_component(len(self.placed), worker)}"
        placed = Placed(worker, pod)
        self.placed.append(placed)
        await self.env.place_engine_pod(engine_pod(self.kind, self.spec, worker, pod, self.name))
        return placed

    async def _refs(self, pods: list[str], listed: bool) -> list[WorkerRef] | None:
        """WorkerRefs of ``pods`` once each is Ready and the router lists it healthy (``listed``), else None."""
        pod_list = await self._core("list_namespaced_pod", self.env.namespace, label_selector=f"{DEPLOYMENT_LABEL}={self.name}")
        found = {p.metadata.name: p for p in pod_list.items}
        refs = []
        for name in pods:
            pod = found.get(name)
            if pod is None or not _ready(pod):
                return None
            spec = next(p.spec for p in self.placed if p.pod == name)
            refs.append(WorkerRef(name, name, _pod_url(pod), spec.role, dict(spec.domains)))
        if listed and not await self._http_().routable({r.url for r in refs}):
            return None
        return refs

    async def _until_listed(self, pods: list[str], deadline: Deadline) -> list[WorkerRef]:
        result: list[WorkerRef] = []

        async def probe() -> bool:
            refs = await self._refs(pods, listed=True)
            if refs is not None:
                result[:] = refs
            return refs is not None

        what = f"{self.kind.name} to discover pods {pods} in namespace {self.env.namespace} and list them healthy"
        try:
            await wait_for(probe, deadline, what, self._procs(), poll_s=POLL_S)
        except ProcessStartError as exc:
            hint = f"router log in {self.workdir}; pods: kubectl -n {self.env.namespace} get pods"
            raise AdapterError(f"{exc} ({hint})") from exc
        return result

    # -- the Deployment protocol ------------------------------------------------------------------
    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        """A new labelled pod; the router's discovery adds it once it is Ready."""
        placed = await self._create(spec)
        (ref,) = await self._until_listed([placed.pod], Deadline(shared.READY_S))
        self.workers.append(ref)
        return ref

    async def remove_worker(self, ref: WorkerRef) -> None:
        """Delete the worker's pod (graceful); the router drops it on the deletionTimestamp, the engine drains and ends."""
        if ref in self.workers:
            self.workers.remove(ref)
        await self._core("delete_namespaced_pod", ref.name, self.env.namespace)

        async def gone() -> bool:
            return ref.url not in await self._http_().workers()

        try:
            await wait_for(gone, Deadline(shared.CHANGE_S), f"{self.kind.name} to drop deleted pod {ref.name}", self._procs())
        except ProcessStartError as exc:
            raise AdapterError(str(exc)) from exc

    async def close(self) -> None:
        if self._router is not None:
            await self._router.stop(shared.STOP_S)
        try:
            selected = f"{DEPLOYMENT_LABEL}={self.name}"
            await self._core("delete_collection_namespaced_pod", self.env.namespace, label_selector=selected, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:  # NB: the namespace may be gone already
                raise
        self.workers.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None
        if not self.failed and os.environ.get(shared.KEEP_ENV, "") in ("", "0"):
            shutil.rmtree(self.workdir, ignore_errors=True)


async def deploy(kind: RouterKind, spec: DeploymentSpec, env: ClusterEnvironment) -> DiscoveredDeployment:
    """Create the engine pods and start the router; on failure stop what started and keep the router's log named in the error."""
    shared.require(kind)
    if env.pods_dir is None:
        raise AdapterError(f"{kind.name} on a cluster needs the embedded cluster's pod runner to run the fake engines' pods")
    deployment = DiscoveredDeployment(kind, spec, env, Path(tempfile.mkdtemp(prefix=f"servecert-{kind.name}-cluster-")))
    try:
        await deployment.start()
    except BaseException:
        deployment.failed = True
        await deployment.close()
        raise
    return deployment
