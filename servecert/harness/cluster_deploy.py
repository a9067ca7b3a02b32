"""A ``DeploymentSpec`` in the cluster environment: the suite's own nodes plus a DGD the implementation's operator makes real.

In the process environment an adapter's ``deploy`` starts the router beside the suite's engines.
On a cluster the implementation's interface is its operator and the DGD, so the suite writes the
DGD itself and the same router checks run unchanged against what the operator makes of it:

Data flow::

    DeploymentSpec
      -> one node per worker (worker_node): the worker's domains under the ClusterTopology's label
         keys, reserved to that worker (a label and a NoSchedule taint), no GPUs, so no other pod lands there
      -> the DGD (dgd_for): a frontend with ``kvCacheTransferTopology {level, mismatchPolicy}`` when the
         router has a level (no policy when the spec leaves it unset: the CRD's default applies), and one
         component per worker, one replica, pinned to its node by ``extraPodSpec`` (nodeSelector +
         toleration), its engine's parameters as the fake engine's arguments
      -> the operator: pods, topology labels copied from the nodes after binding, the level in every
         pod's environment, the Downward API files the engines read their domains from
      -> ready (ClusterDeployment.wait_serving): every worker pod Ready and its engine's WorkerMetadata
         published (the fakes' own word), the DGD Ready with an address, and its frontends routing to
         exactly the current workers (``RoutingProbe``; without one, a grace of ``cluster_routing_grace_s``)
      -> ClusterDeployment: frontend_url = the DGD's ``status.address``; one WorkerRef per worker, its
         engine reached at the pod IP it published, so ``servecert.harness.observe.GroundTruth`` reads the same logs

``add_worker`` / ``remove_worker`` scale a worker's component between 1 and 0 (a spec's ``standby``
workers are declared at 0, so a join is a scale-up, not a new revision) and wait for the frontends to follow;
``log_records`` reads the frontend containers' logs as the pod runner keeps them (``LoggingDeployment``).
A worker without the level's label (seed 000's "missing label" rows) sits on a node without it, and
names its remaining domains itself (the fake engine's ``--topology``): an injected worker without the
label would exit at start-up, as seed 000 asks and ``WorkerTopologyStartupHardExit`` judges. With no
level the operator injects nothing, and every engine names its domains itself, as in the process
environment (the network prices transfers by distance; the router must ignore the labels).
Dynamo's per-worker transfer policy has no DGD field, so a spec that asks for it is refused.
"""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import aiohttp
from kubernetes.client.rest import ApiException

from servecert.adapters.contract import (
    AdapterError,
    ClusterEnvironment,
    DeploymentSpec,
    EnginePod,
    LogRecord,
    RoutingProbe,
    WorkerRef,
    WorkerSpec,
)
from servecert.harness.cluster import kube, topology
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, waiting

DGD_NAME = "router"
"""Its deployments are named ``router-<n>``: a case may deploy twice before the first is removed."""
CLUSTER_TOPOLOGY = "servecert"
"""The ClusterTopology the embedded cluster creates from its nodes (levels zone, rack, host)."""
FRONTEND_IMAGE = "servecert/frontend"
ENGINE_IMAGE = "servecert/fake-engine"
ENGINE_CONTAINER = "engine"
FRONTEND_CONTAINER = "main"
NODE_RESOURCES = {"cpu": "64", "memory": "512Gi", "pods": "16"}
POLL_S = 0.2
_NODES = itertools.count()
_DGDS = itertools.count()
PROBE_TIMEOUT_S = 5.0
LOG_LEVEL = re.compile(r"\b(CRITICAL|ERROR|WARNING|WARN|INFO|DEBUG)\b")
REPORTED = frozenset({"CRITICAL", "ERROR", "WARNING"})


@dataclass
class Placed:
    """One worker of the spec as deployed: its DGD component (also its engine id), its node, its replicas (0 or 1)."""

    spec: WorkerSpec
    component: str
    node: str
    replicas: int = 1


def component_name(index: int, spec: WorkerSpec) -> str:
    name = re.sub(r"[^a-z0-9-]+", "-", spec.name.lower()).strip("-")
    return f"{spec.role}-{index}" + (f"-{name}" if name else "")[: 40]


def node_labels(domains: Mapping[str, str], levels: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The worker's domains under the ClusterTopology's label keys (a level it lacks has no label)."""
    return {key: str(domains[domain]) for domain, key in levels if domain in domains}


def worker_node(name: str, domains: Mapping[str, str], levels: Sequence[tuple[str, str]]) -> dict[str, Any]:
    node = topology.fake_node(name, node_labels(domains, levels), NODE_RESOURCES, reserved_for=name)
    if not any(key == topology.HOST_LABEL for domain, key in levels if domain in domains):
        node["metadata"]["labels"].pop(topology.HOST_LABEL, None)  # NB: fake_node names the host; this worker has none
    return node


def engine_args(spec: WorkerSpec, deployment: DeploymentSpec, engine_id: str) -> list[str]:
    """The fake engine's command line for ``spec`` (the process environment's ``engine_config``, as arguments)."""
    if spec.transfer_enforcement is not None:
        raise AdapterError(
            "the cluster environment deploys seed 000's design (the level on the frontend); "
            f"a per-worker transfer policy ({spec.transfer_enforcement}) has no DGD field: run this test with --env process"
        )
    time_scale = deployment.time_scale
    args = [
        "--model", deployment.model,
        "--role", spec.role,
        "--engine-id", engine_id,
        "--time-scale", f"{time_scale:g}",
        "--timing", deployment.timing,
        "--block-size", str(spec.block_size),
        "--context-length", str(spec.context_length),
        "--tensor-parallel-size", str(spec.tensor_parallel_size),
        "--engine-version", spec.engine_version,
        "--protocol-version", spec.protocol_version,
        "--num-gpu-blocks", str(spec.num_gpu_blocks),
        "--max-num-batched-tokens", str(spec.max_num_batched_tokens),
    ]  # fmt: skip
    if spec.startup_seconds > 0 and time_scale > 0:
        args += ["--startup-seconds", f"{spec.startup_seconds / time_scale:g}"]
    if spec.spec_accept_length != 1.0:
        args += ["--spec-accept-length", f"{spec.spec_accept_length:g}"]
    level = deployment.router.topology_level
    if level is not None and not spec.domains:
        raise AdapterError(f"a worker with no topology label at all cannot run under level {level}: give it a domain at another level")
    if spec.domains and (level is None or level not in spec.domains):
        # NB: with a level, seed 000's start-up makes an injected worker without the level's label exit, so a worker
        # the router sees without it names its domains itself (its node lacks the label too). Without a level nothing
        # is injected; the engine still knows where it sits, as in the process environment, so the fake network
        # prices its transfers by distance (not "unknown") and a router that filters anyway has labels to misuse.
        args += ["--topology", ",".join(f"{lv}={value}" for lv, value in spec.domains.items())]
    return args


def topology_levels(api: Any) -> list[tuple[str, str]]:
    """(domain, node label key) of each level of the cluster's ClusterTopology, top level first."""
    ct = kube.get_cluster_topology(api, CLUSTER_TOPOLOGY)
    return [(str(level["domain"]), str(level["labelKey"])) for level in ct["spec"]["levels"]]


def engine_pod(pod: EnginePod, node: str) -> dict[str, Any]:
    """``pod`` as a Pod manifest: the fake engine image with the worker's parameters, pinned to ``node`` (reserved to it)."""
    args = [*engine_args(pod.worker, pod.spec, pod.name), "--port", str(pod.port)]
    if pod.pd_protocol is not None:
        args += ["--pd-protocol", pod.pd_protocol]
    container = {"name": ENGINE_CONTAINER, "image": ENGINE_IMAGE, "args": args, "ports": [{"containerPort": pod.port}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod.name, "labels": dict(pod.labels), "annotations": dict(pod.annotations)},
        "spec": topology.reserve({"containers": [container], "terminationGracePeriodSeconds": int(pod.grace_s)}, node),
    }


def worker_component(placed: Placed, deployment: DeploymentSpec) -> dict[str, Any]:
    pod_spec = topology.reserve({}, placed.node)
    return {
        "name": placed.component,
        "type": placed.spec.role,
        "replicas": placed.replicas,
        "image": ENGINE_IMAGE,
        "args": engine_args(placed.spec, deployment, placed.component),
        "extraPodSpec": {"nodeSelector": pod_spec["nodeSelector"], "tolerations": pod_spec["tolerations"]},
    }


def frontend_component(deployment: DeploymentSpec) -> dict[str, Any]:
    router = deployment.router
    component: dict[str, Any] = {"name": "frontend", "type": "frontend", "replicas": 1, "image": FRONTEND_IMAGE, "args": []}
    component["args"] = ["--router-mode", router.mode]
    if router.topology_level is not None:
        transfer: dict[str, Any] = {"level": router.topology_level}
        if router.mismatch_policy is not None:
            transfer["mismatchPolicy"] = router.mismatch_policy
        component["kvCacheTransferTopology"] = transfer
    return component


def dgd_for(deployment: DeploymentSpec, placed: Sequence[Placed], name: str = DGD_NAME) -> dict[str, Any]:
    spec: dict[str, Any] = {"components": [frontend_component(deployment), *(worker_component(p, deployment) for p in placed)]}
    if deployment.router.topology_level is not None:
        spec["topologyConstraint"] = {"clusterTopologyName": CLUSTER_TOPOLOGY}
    return {"apiVersion": f"{kn.DGD_GROUP}/{kn.DGD_VERSION}", "kind": kn.DGD_KIND, "metadata": {"name": name}, "spec": spec}


def _serving(pod: kube_objects.Pod) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and kube_objects.condition_true(pod, "Ready")


def parse_log(text: str) -> list[LogRecord]:
    """Lines of a container log whose first level name is WARNING or above, as records (``WARN`` counts as ``WARNING``)."""
    records = []
    for line in text.splitlines():
        found = LOG_LEVEL.search(line)
        level = "WARNING" if found and found.group(1) == "WARN" else found.group(1) if found else ""
        if level in REPORTED and found:
            records.append(LogRecord(level, line[found.end() :].strip(" :-")))
    return records


@dataclass
class DgdDeployment:
    """What every DGD the suite writes on a cluster shares: the case's namespace, the bound on readiness,
    the DGD's name and address, and its removal. ``ClusterDeployment`` places one node per worker and
    scales components itself; ``PlannedClusterDeployment`` (``cluster_planned``) leaves scaling to the
    implementation's planner."""

    PREFIX: ClassVar[str] = DGD_NAME
    """The DGD's name before its number (a name given at construction is kept)."""

    env: ClusterEnvironment
    spec: DeploymentSpec
    bound_s: float
    probe: RoutingProbe | None = None
    name: str = field(default="", kw_only=True)
    frontend_url: str = field(default="", kw_only=True)
    workers: list[WorkerRef] = field(default_factory=list, kw_only=True)

    def __post_init__(self) -> None:
        self.name = self.name or f"{self.PREFIX}-{next(_DGDS)}"

    async def _call(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, self.env.api, *args)

    async def _address(self) -> str:
        """The DGD's address once it is Ready ("" before)."""
        dgd = await self._call(kube.get_dgd, self.env.namespace, self.name)
        address = (dgd.get("status") or {}).get("address") if dgd else None
        return str(address) if address and kube_objects.condition_true(dgd, "Ready") else ""

    async def _until_up(self, up: Callable[[], Awaitable[list[WorkerRef] | None]], what: str) -> list[WorkerRef]:
        """``up()``'s workers once it names them, then the DGD's address once it is Ready, each within ``bound_s``."""
        refs = cast(list[WorkerRef], await waiting.until_async(up, timeout_s=self.bound_s, what=what, interval_s=POLL_S))
        self.frontend_url = await waiting.until_async(
            self._address, timeout_s=self.bound_s, what=f"DGD {self.name} Ready with a status.address", interval_s=POLL_S
        )
        return refs

    async def close(self) -> None:
        try:
            await self._call(kube.delete_object, kube.DGD, self.env.namespace, self.name)
        except ApiException as exc:
            if exc.status != 404:  # NB: never created (setup failed first), or gone with the namespace
                raise


@dataclass
class ClusterDeployment(DgdDeployment):
    """A deployment made of nodes and a DGD on the case's namespace (see the module docstring)."""

    grace_s: float = 0.0
    levels: list[tuple[str, str]] = field(default_factory=list)
    placed: list[Placed] = field(default_factory=list)

    # -- the API --------------------------------------------------------------------------------
    async def start(self) -> ClusterDeployment:
        self.levels = await self._call(topology_levels)
        for worker in self.spec.workers:
            await self._place(worker)
        for worker in self.spec.standby:
            await self._place(worker, replicas=0)
        await self._call(kube.create_object, kube.DGD, self.env.namespace, dgd_for(self.spec, self.placed, self.name))
        await self._wait_serving()
        return self

    async def _place(self, worker: WorkerSpec, replicas: int = 1) -> Placed:
        component = component_name(len(self.placed), worker)  # NB: placed never shrinks: a worker that left has 0 replicas
        node = f"{self.env.namespace}-{next(_NODES)}"  # NB: a case may deploy twice; node names are cluster-wide
        await self._call(kube.create_node, worker_node(node, worker.domains, self.levels))
        api = self.env.api
        self.env.cleanups.append(lambda: kube.delete_node(api, node))
        placed = Placed(worker, component, node, replicas)
        self.placed.append(placed)
        return placed

    async def _patch_components(self) -> None:
        body = {"spec": {"components": dgd_for(self.spec, self.placed, self.name)["spec"]["components"]}}
        await self._call(kube.patch_object, kube.DGD, self.env.namespace, self.name, body)

    # -- readiness ------------------------------------------------------------------------------
    async def _workers_up(self) -> list[WorkerRef] | None:
        """One Ready pod per component with its engine registered, as WorkerRefs in the spec's order (None: not yet)."""
        pods = await self._call(kube.list_pods, self.env.namespace, f"{kn.DGD_NAME_LABEL}={self.name}")
        registered = await self._call(kube.list_worker_metadata, self.env.namespace)
        published = {str(wm["spec"]["podName"]): wm["spec"].get("metadata") or {} for wm in registered}
        refs = []
        for placed in (p for p in self.placed if p.replicas):
            mine = [p for p in pods if (p["metadata"].get("labels") or {}).get(kn.COMPONENT_LABEL) == placed.component and _serving(p)]
            meta = published.get(mine[0]["metadata"]["name"]) if len(mine) == 1 else None
            if not meta or meta.get("engine_id") != placed.component:
                return None
            refs.append(WorkerRef(placed.component, placed.component, str(meta["url"]), placed.spec.role, self._domains_of(placed, meta)))
        return refs

    def _domains_of(self, placed: Placed, meta: Mapping[str, Any]) -> dict[str, str]:
        """The domains the engine registered (ground truth); with a level set they must be its node's labels."""
        registered = dict((meta.get("runtime_config") or {}).get("topology_domains") or {})
        if self.spec.router.topology_level is not None and registered != dict(placed.spec.domains):
            raise AssertionError(
                f"worker {placed.component} registered the domains {registered}, but its node {placed.node} carries "
                f"{dict(placed.spec.domains)}: the operator must give each worker its own node's topology labels (seed 000)"
            )
        return registered

    async def _frontends(self) -> list[kube_objects.Pod]:
        selector = f"{kn.DGD_NAME_LABEL}={self.name},{kn.COMPONENT_TYPE_LABEL}=frontend"
        return list(await self._call(kube.list_pods, self.env.namespace, selector))

    async def _frontend_urls(self) -> list[str]:
        pods = [p for p in await self._frontends() if _serving(p)]
        return [f"http://{p['status']['podIP']}:{self._frontend_port(p)}" for p in pods]

    @staticmethod
    def _frontend_port(pod: kube_objects.Pod) -> int:
        ports = pod["spec"]["containers"][0].get("ports") or []
        return int(ports[0]["containerPort"]) if ports else 8000

    async def _routed(self, session: aiohttp.ClientSession, wanted: set[str]) -> bool:
        assert self.probe is not None
        urls = await self._frontend_urls()
        if not urls:
            return False
        # NB: and the DGD's address itself: a Service reaches a Ready proxy a moment after the DGD says Ready.
        for url in [*urls, *([self.frontend_url] if self.frontend_url else [])]:
            try:
                if await self.probe.routed_engines(session, url) != wanted:
                    return False
            except (aiohttp.ClientError, TimeoutError):
                return False
        return True

    async def _wait_serving(self) -> None:
        what = f"DGD {self.name}: {len(self.placed)} worker pods Ready with their engines registered"
        refs = await self._until_up(self._workers_up, what)
        await self._wait_routed({r.engine_id for r in refs})
        self.workers = refs

    async def _wait_routed(self, wanted: set[str]) -> None:
        if self.probe is None:
            await asyncio.sleep(self.grace_s)
            return
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)) as session:
            await waiting.until_async(
                lambda: self._routed(session, wanted),
                timeout_s=self.bound_s,
                what=f"every frontend of DGD {self.name} routing to exactly {sorted(wanted)}",
                interval_s=POLL_S,
            )

    # -- the Deployment protocol ----------------------------------------------------------------
    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        """A standby worker of the spec scales its component to 1; any other becomes a new component.

        A new component changes the DGD's worker templates, which an operator following seed 001
        rolls out as a new revision (every worker replaced); a scale-up changes replicas only.
        """
        standby = next((p for p in self.placed if not p.replicas and p.spec == spec), None)
        placed = standby or await self._place(spec)
        placed.replicas = 1
        await self._patch_components()
        await self._wait_serving()
        return next(r for r in self.workers if r.engine_id == placed.component)

    async def remove_worker(self, ref: WorkerRef) -> None:
        """Scale the worker's component to 0 (replicas are no template: nothing else rolls)."""
        for placed in self.placed:
            if placed.component == ref.engine_id:
                placed.replicas = 0
        await self._patch_components()
        await self._wait_serving()

    async def log_records(self) -> list[LogRecord]:
        """What the frontend containers logged at WARNING or above (the pod runner's copy of their output)."""
        root = self.env.pods_dir
        if root is None:
            raise AdapterError("this cluster keeps no container logs the suite can read (only the embedded cluster does)")
        pods = await self._frontends()
        records: list[LogRecord] = []
        for pod in pods:
            meta = pod["metadata"]
            for path in sorted(root.glob(f"{meta['namespace']}_{meta['name']}_{meta['uid'][:8]}*/{FRONTEND_CONTAINER}.log")):
                records += parse_log(path.read_text(errors="replace"))
        return records


def routing_probe(implementation: object) -> RoutingProbe | None:
    return implementation if isinstance(implementation, RoutingProbe) else None
