"""The suite's ``cluster`` environment: a namespace per case on a shared cluster with the implementation's operator.

Data flow::

    ClusterSession (one per process and implementation)
        cluster: the embedded cluster the plugin started or joined (or one a test injects)
        operator: implementation.install_operator(admin api)   -> watches namespaces <prefix>*
                  (NoOperator for a router that finds its engine pods itself: DeploysOnCluster)
    ClusterEnvironment (one per case)
        namespace <prefix><n>, labelled for the operator's webhook; deleted in close()
        the check applies manifests there and reads what the operator made

Ground truth lives beside the API: the nodes' labels (the suite created the nodes), the pod
runner's per-pod directories (what the engine process actually sees), and pod histories
recorded by the suite's own watches — never the operator's status claims alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from servecert.adapters.contract import (
    ClusterImplementation,
    Deployment,
    DeploymentSpec,
    DeploysOnCluster,
    EnginePod,
    Implementation,
    OperatorInstallation,
    WorkerRef,
)
from servecert.fakes.engine import EngineConfig
from servecert.harness import cluster_deploy, cluster_planned
from servecert.harness.cluster import binaries, kube
from servecert.harness.cluster.backends import Cluster
from servecert.harness.environment import Cleanup, DeployBounds

_counter = itertools.count()


class ClusterUnavailable(RuntimeError):
    """No cluster was provided for the ``cluster`` environment; the message says how to get one."""


@dataclass
class ClusterSession:
    cluster: Cluster
    api: Any
    operator: OperatorInstallation

    @classmethod
    def start(cls, cluster: Cluster, implementation: object) -> ClusterSession:
        if not isinstance(implementation, ClusterImplementation):
            raise ClusterUnavailable(f"{type(implementation).__name__} has no install_operator(); it cannot run in the cluster environment")
        api = cluster.api()
        return cls(cluster, api, implementation.install_operator(api))

    def close(self) -> None:
        try:
            self.operator.close()
        finally:
            self.api.close()


@contextlib.contextmanager
def session_without_crds(shared: ClusterSession, implementation: object, crds: frozenset[str]) -> Iterator[ClusterSession]:
    """The implementation's operator on a cluster of its own whose API server lacks ``crds`` (names), removed afterwards.

    For admission rules about a missing CRD: the shared cluster cannot lose one under the other
    tests. Only the embedded backend can start such a cluster (an API server and etcd, no nodes).
    """
    from servecert.harness.cluster import embedded

    if shared.cluster.state is None:
        raise ClusterUnavailable(
            f"a cluster without {', '.join(sorted(crds))} can only be started beside the embedded cluster; "
            f"this run uses the {shared.cluster.backend} backend"
        )
    name = f"{shared.cluster.name}-bare{next(_counter)}"
    state = embedded.up_api_only(name, crds)
    try:
        session = ClusterSession.start(Cluster(name, "embedded", Path(state.kubeconfig), state), implementation)
        try:
            yield session
        finally:
            session.close()
    finally:
        embedded.down(name)


@dataclass
class ClusterEnvironment:
    session: ClusterSession
    name: str = "cluster"
    namespace: str = ""
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    _levels: list[tuple[str, str]] | None = None

    def __post_init__(self) -> None:
        self.namespace = f"{self.session.operator.namespace_prefix}{next(_counter)}-{id(self) % 10000}"
        body = {"metadata": {"name": self.namespace, "labels": self.session.operator.namespace_labels()}}
        self.core.create_namespace(body)

    @property
    def api(self) -> Any:
        return self.session.api

    @property
    def core(self) -> Any:
        return client.CoreV1Api(self.session.api)

    @property
    def custom(self) -> Any:
        return client.CustomObjectsApi(self.session.api)

    @property
    def kubeconfig(self) -> Path:
        return Path(self.session.cluster.kubeconfig)

    @property
    def pods_dir(self) -> Path | None:
        """The pod runner's per-pod directories (embedded clusters only)."""
        state = self.session.cluster.state
        return state.pods_dir if state is not None else None

    def deploy_bound(self, bounds: DeployBounds) -> tuple[float, str]:
        return bounds.pods_ready_s, "pods_ready_s"

    async def deploy(
        self, spec: DeploymentSpec, implementation: Implementation, bounds: DeployBounds, add_cleanup: Callable[[Cleanup], None]
    ) -> Deployment:
        """The suite writes ``spec`` as a DGD in this namespace and the implementation's operator makes it real.

        With a planner, the planned DGD the implementation's planner scales (``cluster_planned``); for
        an implementation that ships no operator, its own ``deploy_on_cluster``. Each checks the same
        ground truth as in process.
        """
        if isinstance(implementation, DeploysOnCluster):  # NB: a router without an operator: its own discovery of pods
            deployed = await implementation.deploy_on_cluster(spec, self)
            add_cleanup(deployed.close)
            return deployed
        probe = cluster_deploy.routing_probe(implementation)
        if spec.planner is not None:  # NB: the implementation's planner scales this one, through its operator
            planned = cluster_planned.PlannedClusterDeployment(self, spec, bounds.pods_ready_s, probe, implementation=implementation)
            add_cleanup(planned.close)
            return await planned.start()
        deployment = cluster_deploy.ClusterDeployment(self, spec, bounds.pods_ready_s, probe, grace_s=bounds.cluster_routing_grace_s)
        add_cleanup(deployment.close)  # NB: before start(): a DGD that never became ready is removed too
        return await deployment.start()

    def tool(self, name: str) -> Path:
        return binaries.built_tool(name)

    async def place_engine_pod(self, pod: EnginePod) -> None:
        """The pod on a node of its own carrying its worker's domains; the node is removed when the case ends."""
        if self._levels is None:
            self._levels = await asyncio.to_thread(cluster_deploy.topology_levels, self.api)
        node = f"{self.namespace}-{pod.name}"  # NB: node names are cluster-wide
        await asyncio.to_thread(kube.create_node, self.api, cluster_deploy.worker_node(node, pod.worker.domains, self._levels))
        api = self.api
        self.cleanups.append(lambda: kube.delete_node(api, node))
        await asyncio.to_thread(kube.create_pod, self.api, self.namespace, cluster_deploy.engine_pod(pod, node))

    async def start_engine(self, config: EngineConfig) -> WorkerRef:
        raise NotImplementedError("the cluster environment runs engines as pods; apply a manifest instead")

    async def stop_engine(self, ref: WorkerRef, drain_s: float = 0.0) -> None:
        raise NotImplementedError("the cluster environment runs engines as pods; delete the pod instead")

    async def close(self) -> None:
        for cleanup in reversed(self.cleanups):
            with contextlib.suppress(Exception):
                await asyncio.to_thread(cleanup)
        with contextlib.suppress(ApiException):
            await asyncio.to_thread(self.core.delete_namespace, self.namespace)
