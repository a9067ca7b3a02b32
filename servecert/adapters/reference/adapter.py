"""The reference implementation behind the adapter contract (registered as ``reference``).

``deploy`` starts the reference frontend in the suite's event loop on a loopback address, with
an in-memory discovery backend; every worker the suite asks for is a fake engine started by the
environment, whose published metadata (``/engine/metadata``) is registered into that discovery,
as a worker announcing itself would be. The router's topology policy comes from the spec's
``RouterSpec`` (the seed's frontend-level configuration); per-worker policies (Dynamo's
spelling) travel in the workers' own metadata.

``config_hook`` and ``frontend_hook`` let tests build deliberately broken variants
(``tests/nonconforming``) from the same parts.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from servecert.adapters.contract import (
    DeploymentSpec,
    Environment,
    ImplementationMetadata,
    LogRecord,
    WorkerRef,
    WorkerSpec,
    engine_config,
    features,
)
from servecert.adapters.reference import operator_install
from servecert.adapters.reference import planner as reference_planner
from servecert.protocol import connection_guard
from servecert.protocol.planner_decisions import MemoryDecisionStore
from servecert.reference_impl.frontend import app as frontend_app
from servecert.reference_impl.frontend import topology
from servecert.reference_impl.frontend.discovery import MemoryDiscovery, WorkerInfo
from servecert.reference_impl.frontend.routing import KvRouterConfig
from servecert.reference_impl.planner.planner import Planner

FEATURES = frozenset(
    {
        features.DISAGGREGATED_SERVING,
        features.KV_TRANSFER_TOPOLOGY_FILTER,
        features.KV_TRANSFER_TOPOLOGY_UNSET,
        features.KV_TRANSFER_TOPOLOGY_FALLBACK,
        features.KV_TRANSFER_TOPOLOGY_ERROR_503,
        features.KV_TRANSFER_TOPOLOGY_PREFILL_PRESELECTION,
        features.KV_TRANSFER_TOPOLOGY_PREFERRED_WEIGHT,
        features.KV_TRANSFER_TOPOLOGY_LATENCY,
        *reference_planner.FEATURES,
        features.OPERATOR_TOPOLOGY_ADMISSION,
        features.OPERATOR_TOPOLOGY_INJECTION,
        features.OPERATOR_TOPOLOGY_LABELS,
        features.WORKER_TOPOLOGY_STARTUP,
        features.INFERENCE_SERVICE_OBJECTS,
        features.INFERENCE_SERVICE_POD_GROUP,
        features.INFERENCE_SERVICE_STATUS,
        features.INFERENCE_SERVICE_UPDATE,
        features.GANG_SCHEDULING_TABLE,
        features.GANG_REPLICA_ATOMICITY,
        features.GANG_CROSS_ROLE,
        features.GANG_REPLICA_SCALING,
        features.NETWORK_TOPOLOGY_HARD,
        features.NETWORK_TOPOLOGY_SOFT,
        features.NETWORK_TOPOLOGY_WORKERS,
        features.HYPERNODE_GENERATION,
        features.ROLLOUT_MDC_ISOLATION,
        features.ROLLOUT_KV_LAYOUT_ISOLATION,
        features.ROLLOUT_RUNTIME_ISOLATION,
        features.ROLLOUT_FRONTEND,
        features.ROLLOUT_PAUSE_RESUME,
        features.ROLLOUT_ROLLBACK,
        features.ROLLOUT_TRAFFIC_SPLIT,
        features.ROLLOUT_STEPS,
        features.ROLLOUT_CONTROLLER_RESTART,
        features.ROLLOUT_PROXY_REPLICA_LOSS,
    }
)
METADATA_TIMEOUT_S = 10.0
DRAIN_LIMIT_S = 10.0
"""A removed worker serves its work in flight at most this long (real seconds) before it stops."""

_FRONTEND_IDS = itertools.count(1)
"""Frontend ids unique in the process: each frontend logs on a logger of its own id."""

ConfigHook = Callable[[frontend_app.FrontendConfig], frontend_app.FrontendConfig]
FrontendHook = Callable[[frontend_app.Frontend], None]


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("servecert")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def frontend_config(spec: DeploymentSpec, frontend_id: str) -> frontend_app.FrontendConfig:
    router = spec.router
    # NB: an unset policy stays unset: the frontend's own default applies, as with no env var.
    policy = topology.TopologyPolicy(router.topology_level)
    if router.mismatch_policy is not None:
        policy = topology.TopologyPolicy(router.topology_level, router.mismatch_policy)
    return frontend_app.FrontendConfig(
        frontend_id=frontend_id,
        router_mode=router.mode,
        topology=policy,
        kv=KvRouterConfig(temperature=spec.router.temperature),
        namespace=spec.namespace,
    )


class ReferenceDeployment:
    def __init__(self, spec: DeploymentSpec, env: Environment, frontend: frontend_app.Frontend, discovery: MemoryDiscovery) -> None:
        self.spec = spec
        self.env = env
        self.frontend = frontend
        self.discovery = discovery
        self.workers: list[WorkerRef] = []
        self.frontend_url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.planner: Planner | None = None
        self.decisions: MemoryDecisionStore | None = None
        self.planner_config_hook: reference_planner.ConfigHook | None = None
        self.planner_hook: reference_planner.PlannerHook | None = None
        self._stopping: dict[asyncio.Task[None], WorkerRef] = {}
        self._log = _Records()
        frontend.log.addHandler(self._log)

    async def log_records(self) -> list[LogRecord]:
        """What the frontend logged at WARNING or above since it started (the adapter contract's ``LoggingDeployment``)."""
        return list(self._log.records)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=METADATA_TIMEOUT_S))
        app = frontend_app.create_app(self.frontend)
        self._runner = await connection_guard.start_runner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.frontend_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        for worker in self.spec.workers:
            await self.add_worker(worker)
        if self.spec.planner is not None:
            self.planner, self.decisions = reference_planner.start(
                self.spec, self.discovery, self._session, self.planner_config_hook, self.planner_hook
            )

    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        ref = await self.env.start_engine(engine_config(spec, self.spec))
        assert self._session is not None
        if spec.startup_seconds > 0:  # a worker announces itself once its model is loaded
            limit = reference_planner.READY_GRACE_S + spec.startup_seconds / max(self.spec.time_scale, 1e-9)
            await reference_planner.wait_ready(self._session, ref.url, limit)
        async with self._session.get(ref.url + "/engine/metadata") as resp:
            meta = await resp.json()
        self.discovery.register(WorkerInfo.from_metadata(meta))
        self.workers.append(ref)
        return ref

    async def remove_worker(self, ref: WorkerRef) -> None:
        """Withdraw the worker at once; it stops once its work in flight is served (in the background, as a pod terminates).

        Stopping it at once failed requests in the planner's scale-downs: a decode chosen just
        before its removal refused the connection, and a decode could not pull KV from a prefill
        stopped between the prefill and the pull (1-3 of 57 judged requests in a burst's scale-down).
        """
        await self._withdraw(ref)
        task = asyncio.get_running_loop().create_task(self.env.stop_engine(ref, drain_s=DRAIN_LIMIT_S))
        self._stopping[task] = ref
        task.add_done_callback(lambda done: self._stopping.pop(done, None))

    async def _withdraw(self, ref: WorkerRef) -> None:
        self.discovery.unregister(ref.engine_id)
        if ref in self.workers:
            self.workers.remove(ref)
        if self.planner is not None:  # NB: an open FPM stream would hold the engine's shutdown for its grace period
            await self.planner.fpm.unfollow(ref.engine_id)

    async def close(self) -> None:
        # NB: the frontend goes first: its KV-event subscriptions would otherwise hold every
        # engine's shutdown for the full grace period; so would the planner's FPM subscriptions.
        if self.planner is not None:
            await self.planner.stop()
            reference_planner.write_report(self.planner)
            self.planner = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        for ref in list(self.workers):  # NB: the test is over: no drain
            await self._withdraw(ref)
            await self.env.stop_engine(ref)
        draining = dict(self._stopping)
        for task in draining:
            task.cancel()
        await asyncio.gather(*draining, return_exceptions=True)
        for ref in draining.values():
            await self.env.stop_engine(ref)
        if self._session is not None:
            await self._session.close()
            self._session = None
        self.frontend.log.removeHandler(self._log)


class _Records(logging.Handler):
    """Keeps a frontend's records at WARNING or above, for ``log_records``."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(LogRecord(record.levelname, record.getMessage()))


@dataclass
class ReferenceImplementation:
    metadata: ImplementationMetadata = field(
        default_factory=lambda: ImplementationMetadata(
            organization="servecert",
            project="servecert-reference",
            url="https://servecert.dev/reference",
            version=_version(),
            contact=("servecert maintainers",),
        )
    )
    supported_features: frozenset[str] = FEATURES
    config_hook: ConfigHook | None = None
    frontend_hook: FrontendHook | None = None
    planner_config_hook: reference_planner.ConfigHook | None = None
    planner_hook: reference_planner.PlannerHook | None = None
    operator_behaviour: str | None = None
    """``module:ATTRIBUTE`` of the operator's Behaviour (None: the reference's)."""
    planner_serve_hooks: str | None = None
    """``module:ATTRIBUTE`` of the planner pod's ``servecert.reference_impl.planner.serve.Hooks`` (None: the reference's)."""

    def planner_component(self, spec: DeploymentSpec) -> dict[str, Any]:
        """The DGD component of the reference planner (``contract.ClusterPlanner``)."""
        return reference_planner.component(spec, self.planner_serve_hooks)

    def install_operator(self, api: Any) -> operator_install.InstalledOperator:
        """Start the reference operator on the cluster behind ``api`` (see servecert.adapters.reference.operator_install)."""
        return operator_install.install(api, self.operator_behaviour)

    async def routed_engines(self, session: aiohttp.ClientSession, frontend_url: str) -> set[str]:
        """The engines a frontend pod routes to (``contract.RoutingProbe``): its ``/status`` workers."""
        async with session.get(f"{frontend_url}/status") as resp:
            resp.raise_for_status()
            body = await resp.json()
        return {str(worker["engine_id"]) for worker in body.get("workers") or []}

    async def deploy(self, spec: DeploymentSpec, env: Environment) -> ReferenceDeployment:
        config = frontend_config(spec, f"frontend-{next(_FRONTEND_IDS)}")
        if self.config_hook is not None:
            config = self.config_hook(config)
        discovery = MemoryDiscovery()
        frontend = frontend_app.Frontend(config, discovery)
        if self.frontend_hook is not None:
            self.frontend_hook(frontend)
        deployment = ReferenceDeployment(spec, env, frontend, discovery)
        deployment.planner_config_hook, deployment.planner_hook = self.planner_config_hook, self.planner_hook
        try:
            await deployment.start()
        except BaseException:
            await deployment.close()
            raise
        return deployment
