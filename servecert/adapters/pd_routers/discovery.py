"""A real P/D router on a cluster: the engines as labelled pods, the router finding them through its Kubernetes service discovery.

Neither vllm-router nor sglang-router ships an operator; on Kubernetes their users run the
engines as pods carrying a prefill or decode label and start the router with
``--service-discovery --prefill-selector ... --decode-selector ...``, which watches the pods and
routes to each Ready one at ``http://<pod IP>:<--service-discovery-port>``. The suite deploys
them that way:

Data flow::

    DeploymentSpec
      -> one node per worker (cluster_deploy.worker_node: its domains under the ClusterTopology's
         label keys, reserved to it), one pod per worker pinned there: the fake engine image with the
         worker's parameters (cluster_deploy.engine_args) and the router's handshake (--pd-protocol),
         labels <deployment>/<role> (the selectors), on prefill pods the router's bootstrap-port
         annotation where it reads one (sglang-router: sglang.ai/bootstrap-port)
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
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes.client.rest import ApiException

from servecert.adapters.contract import AdapterError, ClusterEnvironment, DeploymentSpec, WorkerRef, WorkerSpec
from servecert.adapters.pd_routers import deployment as shared
from servecert.adapters.pd_routers.deployment import RouterHttp, RouterKind
from servecert.harness import cluster_deploy
from servecert.harness.cluster import kube, topology
from servecert.harness.processes import Proc, ProcessStartError, wait_for
from servecert.protocol import kube_objects, waiting

ENGINE_PORT = 8000
"""Every engine pod listens here on its own pod IP: the routers' ``--service-discovery-port``."""
DEPLOYMENT_LABEL = "servecert.io/pd-deployment"
ROLE_LABEL = "servecert.io/pd-role"
ENGINE_CONTAINER = "engine"
_DEPLOYMENTS = itertools.count()


def selector(name: str, role: str) -> dict[str, str]:
    """The labels a router's ``--prefill-selector``/``--decode-selector`` names for one deployment's role."""
    return {DEPLOYMENT_LABEL: name, ROLE_LABEL: role}


def engine_pod(kind: RouterKind, spec: DeploymentSpec, worker: WorkerSpec, name: str, deployment: str, node: str) -> dict[str, Any]:
    """The worker's pod: the fake engine speaking ``kind``'s handshake, labelled for the router's selectors, on its own node."""
    args = [*cluster_deploy.engine_args(worker, spec, name), "--pd-protocol", kind.pd_protocol]
    container = {"name": ENGINE_CONTAINER, "image": cluster_deploy.ENGINE_IMAGE, "args": args, "ports": [{"containerPort": ENGINE_PORT}]}
    annotations = kind.prefill_annotations(ENGINE_PORT) if worker.role == "prefill" else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": selector(deployment, worker.role), "annotations": annotations},
        "spec": topology.reserve({"containers": [container], "terminationGracePeriodSeconds": int(shared.DRAIN_S)}, node),
    }


def _pod_url(pod: kube_objects.Pod) -> str:
    ip = (pod.get("status") or {}).get("podIP")
    return f"http://{ip}:{ENGINE_PORT}" if ip else ""


@dataclass
class Placed:
    spec: WorkerSpec
    pod: str
    node: str


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
    levels: list[tuple[str, str]] = field(default_factory=list)
    failed: bool = False
    _router: Proc | None = None
    _session: aiohttp.ClientSession | None = None
    _http: RouterHttp | None = None

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, self.env.api, *args, **kwargs)

    def _procs(self) -> list[Proc]:
        return [self._router] if self._router is not None else []

    def _http_(self) -> RouterHttp:
        assert self._http is not None, "the router is not started"
        return self._http

    async def start(self) -> None:
        policy = shared.check_spec(self.kind, self.spec)
        ct = await self._call(kube.get_cluster_topology, cluster_deploy.CLUSTER_TOPOLOGY)
        self.levels = [(str(level["domain"]), str(level["labelKey"])) for level in ct["spec"]["levels"]]
        for worker in self.spec.workers:
            await self._create(worker)
        port = shared.free_port()
        namespace = self.env.namespace
        argv = self.kind.discovery_argv(
            port, shared.free_port(), namespace, selector(self.name, "prefill"), selector(self.name, "decode"), ENGINE_PORT,
            policy,
        )  # fmt: skip
        env = {**os.environ, "KUBECONFIG": str(self.env.kubeconfig)}
        self._router = Proc(self.kind.name, argv, env, self.workdir / "router.log", self.workdir)
        self._session = aiohttp.ClientSession()
        self._http = RouterHttp(f"http://127.0.0.1:{port}", self._session)
        await self._router.start()
        self.workers = await self._until_listed([p.pod for p in self.placed], waiting.Deadline(shared.READY_S))
        self.frontend_url = self._http_().base

    async def _create(self, worker: WorkerSpec) -> Placed:
        if worker.role not in ("prefill", "decode"):
            raise AdapterError(f"{self.kind.name} in P/D mode serves prefill and decode workers, not {worker.role!r}")
        index = len(self.placed)
        pod = f"{self.name}-{cluster_deploy.component_name(index, worker)}"
        node = f"{self.env.namespace}-{pod}"  # NB: node names are cluster-wide
        await self._call(kube.create_node, cluster_deploy.worker_node(node, worker.domains, self.levels))
        api = self.env.api
        self.env.cleanups.append(lambda: kube.delete_node(api, node))
        placed = Placed(worker, pod, node)
        self.placed.append(placed)
        await self._call(kube.create_pod, self.env.namespace, engine_pod(self.kind, self.spec, worker, pod, self.name, node))
        return placed

    async def _refs(self, pods: list[str], listed: bool) -> list[WorkerRef] | None:
        """WorkerRefs of ``pods`` once each is Ready and the router lists it healthy (``listed``), else None."""
        found = {p["metadata"]["name"]: p for p in await self._call(kube.list_pods, self.env.namespace, f"{DEPLOYMENT_LABEL}={self.name}")}
        refs = []
        for name in pods:
            pod = found.get(name)
            if pod is None or pod["metadata"].get("deletionTimestamp") or not kube_objects.condition_true(pod, "Ready"):
                return None
            spec = next(p.spec for p in self.placed if p.pod == name)
            refs.append(WorkerRef(name, name, _pod_url(pod), spec.role, dict(spec.domains)))
        if listed and not await self._http_().routable({r.url for r in refs}):
            return None
        return refs

    async def _until_listed(self, pods: list[str], deadline: waiting.Deadline) -> list[WorkerRef]:
        result: list[WorkerRef] = []

        async def probe() -> bool:
            refs = await self._refs(pods, listed=True)
            if refs is not None:
                result[:] = refs
            return refs is not None

        what = f"{self.kind.name} to discover pods {pods} in namespace {self.env.namespace} and list them healthy"
        try:
            await wait_for(probe, deadline, what, self._procs(), poll_s=cluster_deploy.POLL_S)
        except ProcessStartError as exc:
            hint = f"router log in {self.workdir}; pods: kubectl -n {self.env.namespace} get pods"
            raise AdapterError(f"{exc} ({hint})") from exc
        return result

    # -- the Deployment protocol ------------------------------------------------------------------
    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        """A new labelled pod; the router's discovery adds it once it is Ready."""
        placed = await self._create(spec)
        (ref,) = await self._until_listed([placed.pod], waiting.Deadline(shared.READY_S))
        self.workers.append(ref)
        return ref

    async def remove_worker(self, ref: WorkerRef) -> None:
        """Delete the worker's pod (graceful); the router drops it on the deletionTimestamp, the engine drains and ends."""
        if ref in self.workers:
            self.workers.remove(ref)
        await self._call(kube.delete_pod, self.env.namespace, ref.name)

        async def gone() -> bool:
            return ref.url not in await self._http_().workers()

        try:
            await wait_for(gone, waiting.Deadline(shared.CHANGE_S), f"{self.kind.name} to drop deleted pod {ref.name}", self._procs())
        except ProcessStartError as exc:
            raise AdapterError(str(exc)) from exc

    async def close(self) -> None:
        if self._router is not None:
            await self._router.stop(shared.STOP_S)
        try:
            await self._call(kube.delete_pods, self.env.namespace, f"{DEPLOYMENT_LABEL}={self.name}", grace_period_seconds=0)
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
