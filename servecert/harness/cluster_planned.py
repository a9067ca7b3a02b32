"""A ``DeploymentSpec`` with a planner, on a cluster: a DGD whose own planner component scales it.

In the process environment the planner writes decisions to a store and the suite's harness plays
the external system. On a cluster seed 003's KubernetesConnector is the interface: the planner
"Directly PATCHes the DGD resource to update replica counts. The operator watches for DGD changes
and reconciles component deployments". So the suite writes one DGD and lets the implementation's
planner and operator do everything else:

Data flow::

    DeploymentSpec (workers of one prefill and one decode template; aggregated: one set)
      -> two nodes, one per worker component, reserved to it (label + NoSchedule taint), with
         GPUS_PER_NODE GPUs, room for every replica the budget allows
      -> the DGD: a frontend; the prefill component ``ctx`` and the decode component ``gen``
         (type prefill / decode; aggregated: ``gen`` of type worker), named unlike their types on
         purpose (seed 003: components are resolved "by subComponentType field (prefill/decode),
         with fallback to legacy component names"), each pod asking ``*_engine_num_gpu`` GPUs and
         running the fake engine with a model-load time; beside them (disaggregated) two decoys at
         0 replicas, aggregated sets named ``prefill`` and ``decode``, which a planner going by
         names would scale; and the planner component the implementation describes
         (``ClusterPlanner.planner_component``)
      -> ready: every worker pod Ready with its engine registered, the planner pod Ready, the DGD
         Ready with an address routing to those engines (a gate, never a verdict)
      -> PlannedClusterDeployment: frontend_url = the DGD's ``status.address``; ``add_worker`` and
         ``remove_worker`` refuse (the planner scales this deployment, not the suite)

Ground truth is what the API server's pods did (``servecert.conformance.tests.planner_scaling._cluster``),
never the planner's account of itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import aiohttp

from servecert.adapters.contract import (
    AdapterError,
    ClusterPlanner,
    DeploymentSpec,
    WorkerRef,
    WorkerSpec,
)
from servecert.harness.cluster import kube, topology
from servecert.harness.cluster_deploy import ENGINE_IMAGE, FRONTEND_IMAGE, POLL_S, PROBE_TIMEOUT_S, DgdDeployment, engine_args
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, waiting

DGD_NAME = "planned"
PREFILL_COMPONENT, DECODE_COMPONENT, PLANNER_COMPONENT = "ctx", "gen", "planner"
GPU = "nvidia.com/gpu"
GPUS_PER_NODE = 64
NODE_PODS = "64"
AGG_ROLE = "agg"
COMPONENTS = {PREFILL_COMPONENT: "prefill", DECODE_COMPONENT: "decode"}
DECOYS = ("prefill", "decode")
"""Components of type worker, at 0 replicas, named as seed 003's legacy names (disaggregated graphs only)."""
_NODES = itertools.count()


def component_of(pod: kube_objects.Pod) -> str | None:
    """The planner's component (prefill, decode) a pod of the suite's worker components belongs to, else None: by the
    component's name, so a decoy of another type never counts."""
    name = ((pod.get("metadata") or {}).get("labels") or {}).get(kn.COMPONENT_LABEL)
    return COMPONENTS.get(str(name))


def _component_role(role: str) -> str:
    return "decode" if role == AGG_ROLE else role


def decoy(component: dict[str, Any], name: str) -> dict[str, Any]:
    """``component`` as an aggregated set named ``name``, at 0 replicas: what a planner going by names would scale."""
    args = list(component["args"])
    args[args.index("--role") + 1] = AGG_ROLE
    return {**component, "name": name, "type": "worker", "replicas": 0, "args": args}


def _template(spec: DeploymentSpec, role: str) -> tuple[WorkerSpec, int]:
    chosen = [w for w in spec.workers if w.role == role]
    if not chosen:
        return WorkerSpec(role=role), 0
    if any(w != chosen[0] for w in chosen):
        raise AdapterError(f"a planned deployment on a cluster scales one template per component; the {role} workers differ")
    return chosen[0], len(chosen)


@dataclass
class PlannedClusterDeployment(DgdDeployment):
    """A DGD whose planner component scales it (see the module docstring)."""

    PREFIX: ClassVar[str] = DGD_NAME
    implementation: object = field(default=None, kw_only=True)
    decisions: None = None
    """No decision store: on a cluster the planner's decisions are patches of the DGD."""

    @property
    def gpus_per_engine(self) -> dict[str, int]:
        assert self.spec.planner is not None
        return {"prefill": self.spec.planner.prefill_engine_num_gpu, "decode": self.spec.planner.decode_engine_num_gpu}

    async def start(self) -> PlannedClusterDeployment:
        await self.create()
        await self._wait_serving()
        return self

    async def create(self, edit: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None) -> None:
        """Write the nodes and the DGD, without waiting (``edit`` changes its components first: a test's broken graph)."""
        if not isinstance(self.implementation, ClusterPlanner):
            raise AdapterError(
                "this implementation describes no planner component for a cluster: give its adapter "
                "planner_component(spec) -> {image, args} (servecert.adapters.contract.ClusterPlanner)"
            )
        planner = self.implementation.planner_component(self.spec)
        frontend = {"name": "frontend", "type": "frontend", "replicas": 1, "image": FRONTEND_IMAGE}
        components = [{**frontend, "args": ["--router-mode", self.spec.router.mode]}]
        aggregated = any(w.role == AGG_ROLE for w in self.spec.workers)
        roles = ((DECODE_COMPONENT, AGG_ROLE, "worker", "decode"),) if aggregated else (
            (PREFILL_COMPONENT, "prefill", "prefill", "prefill"), (DECODE_COMPONENT, "decode", "decode", "decode"))
        for name, role, ctype, gpus_of in roles:
            components.append(await self._worker_component(name, role, ctype, self.gpus_per_engine[gpus_of]))
        if not aggregated:  # NB: seed 003 resolves "by subComponentType field (prefill/decode)": names are only its fallback
            components += [decoy(components[-1], name) for name in DECOYS]
        components.append({**planner, "name": PLANNER_COMPONENT, "type": "planner", "replicas": 1})
        body = {"apiVersion": f"{kn.DGD_GROUP}/{kn.DGD_VERSION}", "kind": kn.DGD_KIND, "metadata": {"name": self.name},
                "spec": {"components": edit(components) if edit is not None else components}}  # fmt: skip
        await self._call(kube.create_object, kube.DGD, self.env.namespace, body)

    async def _worker_component(self, name: str, role: str, ctype: str, gpus: int) -> dict[str, Any]:
        template, count = _template(self.spec, role)
        node = f"{self.env.namespace}-p{next(_NODES)}"
        resources = {"cpu": "64", "memory": "512Gi", "pods": NODE_PODS, GPU: str(GPUS_PER_NODE)}
        await self._call(kube.create_node, topology.fake_node(node, {}, resources, reserved_for=node))
        api = self.env.api
        self.env.cleanups.append(lambda: kube.delete_node(api, node))
        args = engine_args(template, self.spec, "")
        at = args.index("--engine-id")
        del args[at : at + 2]  # NB: each replica's engine names itself: one id per pod, not per component
        pod_spec = topology.reserve({}, node)
        return {
            "name": name,
            "type": ctype,
            "replicas": count,
            "image": ENGINE_IMAGE,
            "args": args,
            "resources": {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
            "extraPodSpec": {"nodeSelector": pod_spec["nodeSelector"], "tolerations": pod_spec["tolerations"]},
        }

    # -- readiness ------------------------------------------------------------------------------
    async def _pods(self) -> list[kube_objects.Pod]:
        return list(await self._call(kube.list_pods, self.env.namespace, f"{kn.DGD_NAME_LABEL}={self.name}"))

    async def _up(self) -> list[WorkerRef] | None:
        """The spec's workers Ready with their engines registered, and the planner Ready (None: not yet).

        At least the spec's count of each component: a planner may already have scaled up by the time the gate
        looks (its verdict is the checks'), and a worker it added that is still loading is not waited for."""
        pods = [p for p in await self._pods() if not p["metadata"].get("deletionTimestamp")]
        planners = [p for p in pods if (p["metadata"].get("labels") or {}).get(kn.COMPONENT_TYPE_LABEL) == "planner"]
        if not planners or not all(kube_objects.condition_true(p, "Ready") for p in planners):
            return None
        registered = await self._call(kube.list_worker_metadata, self.env.namespace)
        published = {str(wm["spec"]["podName"]): wm["spec"].get("metadata") or {} for wm in registered}
        refs = [
            WorkerRef(str(p["metadata"]["name"]), str(meta["engine_id"]), str(meta["url"]), str(meta["role"]), {})
            for p in pods
            if component_of(p) and kube_objects.condition_true(p, "Ready") and (meta := published.get(p["metadata"]["name"]))
        ]
        for component, name in ((c, n) for n, c in COMPONENTS.items()):
            wanted = sum(_component_role(w.role) == component for w in self.spec.workers)
            if sum(r.name.startswith(f"{self.name}-{name}-") for r in refs) < wanted:
                return None
        return refs

    async def _wait_serving(self) -> None:
        what = f"DGD {self.name}: {len(self.spec.workers)} worker pods Ready with their engines registered, and its planner Ready"
        refs = await self._until_up(self._up, what)
        if self.probe is not None:
            await self._wait_routed({r.engine_id for r in refs})
        self.workers = list(refs)

    async def _wait_routed(self, wanted: set[str]) -> None:
        assert self.probe is not None
        probe = self.probe
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)) as session:

            async def routed() -> bool:
                try:
                    # NB: at least these: a planner that scaled something else already is for the verdict, not the gate.
                    return wanted <= await probe.routed_engines(session, self.frontend_url)
                except (aiohttp.ClientError, TimeoutError):
                    return False

            await waiting.until_async(
                routed, timeout_s=self.bound_s, what=f"DGD {self.name}'s address routing to {sorted(wanted)}", interval_s=POLL_S
            )

    # -- the Deployment protocol ----------------------------------------------------------------
    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        raise AdapterError(f"DGD {self.name} is scaled by its planner; the suite adds no worker to it")

    async def remove_worker(self, ref: WorkerRef) -> None:
        raise AdapterError(f"DGD {self.name} is scaled by its planner; the suite removes no worker from it")
