"""A real P/D router process in front of the suite's fake engines: what the vllm-router and sglang-router adapters share.

``deploy`` starts each worker of the spec as a fake engine in the suite's environment, speaking
the router's own handshake (``EngineConfig.pd_protocol``: vLLM's ``kv_transfer_params`` or
SGLang's bootstrap room, ``servecert.fakes.pd_wire``), then the router, unmodified, as its own process
on 127.0.0.1 with the workers' URLs on its command line (``--prefill URL PORT --decode URL``),
the way its documentation deploys it. The suite sends OpenAI traffic to the router; every
prefill, decode and KV transfer lands in the engines' ground truth, so verdicts never read the
router's own account. Workers join and leave through the router's worker API
(``RouterKind.add``/``remove``); a left worker is stopped after its work in flight.

On a cluster (``deploy_on_cluster``) the workers are labelled engine pods instead and the router
finds them through its own Kubernetes service discovery (``servecert.adapters.pd_routers.discovery``).

Neither router filters KV transfers by topology; an adapter declares only what its router does,
and a spec asking for a topology level is refused with an error saying so.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import aiohttp

from servecert.adapters.contract import (
    KV,
    RANDOM,
    ROUND_ROBIN,
    AdapterError,
    Deadline,
    DeploymentSpec,
    Environment,
    Proc,
    ProcessStartError,
    WorkerRef,
    WorkerSpec,
    engine_config,
    features,
    free_port,
    wait_for,
)

READY_S = 28.0  # below the suite's deploy_ready_s (30 s)
CHANGE_S = 10.0  # a worker added or removed through the router's API shows in its list within this
STOP_S = 10.0
DRAIN_S = 10.0
HTTP_TIMEOUT_S = 2.0
KEEP_ENV = "SERVECERT_PD_ROUTER_KEEP"  # keep each deployment's folder (the router's log) after close()
FEATURES = frozenset({features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_UNSET})
"""What both routers declare: neither has a topology setting, so no filtering, fallback or prefill pre-selection."""
POLICIES = {KV: "cache_aware", ROUND_ROBIN: "round_robin", RANDOM: "random"}
"""The suite's router modes as both routers' ``--policy``: their KV-aware choice without KV events is cache_aware."""


class RouterKind(Protocol):
    """What differs between the routers: their command line and their worker API."""

    @property
    def name(self) -> str: ...

    @property
    def pd_protocol(self) -> str:
        """The handshake its engines speak (``EngineConfig.pd_protocol``)."""
        ...

    @property
    def module(self) -> str:
        """Its Python package, present when its extra is installed."""
        ...

    @property
    def install(self) -> str:
        """The command that installs it."""
        ...

    def argv(self, port: int, metrics_port: int, prefill: list[WorkerRef], decode: list[WorkerRef], policy: str) -> list[str]: ...

    def discovery_argv(
        self, port: int, metrics_port: int, namespace: str, prefill: dict[str, str], decode: dict[str, str], engine_port: int, policy: str
    ) -> list[str]:
        """Its command line on a cluster: Kubernetes service discovery of ``namespace``'s pods by the two label selectors."""
        ...

    def prefill_annotations(self, engine_port: int) -> dict[str, str]:
        """What a prefill pod carries for the router's discovery to find its bootstrap port (nothing if it reads none)."""
        ...

    async def add(self, http: RouterHttp, ref: WorkerRef) -> None: ...

    async def remove(self, http: RouterHttp, ref: WorkerRef) -> None: ...


@dataclass
class RouterHttp:
    """The router's own HTTP API (its worker list and management routes)."""

    base: str
    session: aiohttp.ClientSession

    async def call(self, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        try:
            async with self.session.request(
                method, self.base + path, timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S), **kwargs
            ) as resp:
                text = await resp.text()
                try:
                    return resp.status, json.loads(text)
                except ValueError:
                    return resp.status, text
        except (aiohttp.ClientError, TimeoutError):
            return 0, None

    async def workers(self) -> dict[str, dict[str, Any]]:
        """The router's workers by URL (``GET /workers``, both routers): type, health, id."""
        status, body = await self.call("GET", "/workers")
        if status != 200 or not isinstance(body, dict):
            return {}
        return {str(w["url"]): w for w in body.get("workers", []) if isinstance(w, dict) and "url" in w}

    async def routable(self, urls: set[str]) -> bool:
        listed = await self.workers()
        return all(url in listed and listed[url].get("is_healthy") for url in urls)


def host_port(ref: WorkerRef) -> int:
    """The engine's HTTP port: its KV side channel too (``servecert.fakes.pd_wire``), so each prefill's bootstrap port."""
    return int(ref.url.rsplit(":", 1)[1])


def check_spec(kind: RouterKind, spec: DeploymentSpec) -> str:
    """The router's ``--policy`` for the spec; AdapterError for what the router cannot do (a topology level)."""
    if spec.router.topology_level is not None:
        raise AdapterError(f"{kind.name} has no topology filtering of KV transfers (asked: level {spec.router.topology_level!r})")
    policy = POLICIES.get(spec.router.mode)
    if policy is None:
        raise AdapterError(f"{kind.name}: no policy for router mode {spec.router.mode!r} (known: {', '.join(POLICIES)})")
    return policy


def installed(kind: RouterKind) -> bool:
    """Whether the router's package is importable here (its extra is installed)."""
    return importlib.util.find_spec(kind.module) is not None


def require(kind: RouterKind) -> None:
    if not installed(kind):
        raise AdapterError(f"{kind.name} is not installed: {kind.install}")


class RouterDeployment:
    def __init__(self, kind: RouterKind, spec: DeploymentSpec, env: Environment, workdir: Path) -> None:
        self.kind = kind
        self.spec = spec
        self.env = env
        self.workdir = workdir
        self.frontend_url = ""
        self.workers: list[WorkerRef] = []
        self._router: Proc | None = None
        self._session: aiohttp.ClientSession | None = None
        self._http: RouterHttp | None = None
        self._stopping: set[asyncio.Task[None]] = set()
        self.failed = False

    async def start(self) -> None:
        policy = check_spec(self.kind, self.spec)
        for worker in self.spec.workers:
            self.workers.append(await self._start_engine(worker))
        prefill = [w for w in self.workers if w.role == "prefill"]
        decode = [w for w in self.workers if w.role == "decode"]
        if not prefill or not decode:
            raise AdapterError(f"{self.kind.name} in P/D mode needs prefill and decode workers (asked: {[w.role for w in self.workers]})")
        port = free_port()
        argv = self.kind.argv(port, free_port(), prefill, decode, policy)
        self._router = Proc(self.kind.name, argv, dict(os.environ), self.workdir / "router.log", self.workdir)
        self._session = aiohttp.ClientSession()
        self._http = RouterHttp(f"http://127.0.0.1:{port}", self._session)
        await self._router.start()
        urls = {w.url for w in self.workers}
        await wait_for(
            lambda: self._http_().routable(urls), Deadline(READY_S), f"{self.kind.name} to route to {sorted(urls)}", [self._router]
        )
        self.frontend_url = self._http_().base

    def _http_(self) -> RouterHttp:
        assert self._http is not None, "the router is not started"
        return self._http

    async def _start_engine(self, worker: WorkerSpec) -> WorkerRef:
        if worker.role not in ("prefill", "decode"):
            raise AdapterError(f"{self.kind.name} in P/D mode serves prefill and decode workers, not {worker.role!r}")
        config = replace(engine_config(worker, self.spec), pd_protocol=self.kind.pd_protocol)
        return await self.env.start_engine(config)

    # -- the Deployment protocol ------------------------------------------------------------------
    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        ref = await self._start_engine(spec)
        try:
            await self.kind.add(self._http_(), ref)
            await self._until(lambda: self._http_().routable({ref.url}), f"{self.kind.name} to add {ref.url}")
        except BaseException:
            await self.env.stop_engine(ref)
            raise
        self.workers.append(ref)
        return ref

    async def remove_worker(self, ref: WorkerRef) -> None:
        """Withdraw the worker through the router's API; it stops once its work in flight is served (as a pod terminates)."""
        if ref in self.workers:
            self.workers.remove(ref)
        await self.kind.remove(self._http_(), ref)

        async def gone() -> bool:
            return ref.url not in await self._http_().workers()

        await self._until(gone, f"{self.kind.name} to remove {ref.url}")
        task = asyncio.get_running_loop().create_task(self.env.stop_engine(ref, drain_s=DRAIN_S))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _until(self, probe: Any, what: str) -> None:
        procs = [self._router] if self._router is not None else []
        try:
            await wait_for(probe, Deadline(CHANGE_S), what, procs)
        except ProcessStartError as exc:
            raise AdapterError(str(exc)) from exc

    async def close(self) -> None:
        if self._router is not None:
            await self._router.stop(STOP_S)
        if self._stopping:
            await asyncio.gather(*self._stopping, return_exceptions=True)
        await asyncio.gather(*(self.env.stop_engine(w) for w in self.workers), return_exceptions=True)
        self.workers.clear()
        if self._session is not None:
            await self._session.close()
            self._session = None
        if not self.failed and os.environ.get(KEEP_ENV, "") in ("", "0"):
            shutil.rmtree(self.workdir, ignore_errors=True)


async def deploy(kind: RouterKind, spec: DeploymentSpec, env: Environment) -> RouterDeployment:
    """Start the workers and the router; on failure stop what started and keep the log named in the error."""
    require(kind)
    workdir = Path(tempfile.mkdtemp(prefix=f"servecert-{kind.name}-"))
    deployment = RouterDeployment(kind, spec, env, workdir)
    try:
        await deployment.start()
    except ProcessStartError as exc:
        deployment.failed = True
        await deployment.close()
        raise AdapterError(f"{kind.name} deployment in {workdir} did not come up: {exc}") from exc
    except BaseException:
        deployment.failed = True
        await deployment.close()
        raise
    return deployment


def installed_version(distribution: str, default: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return default


def discovery_args(namespace: str, prefill: dict[str, str], decode: dict[str, str], engine_port: int) -> list[str]:
    """Both routers' Kubernetes service discovery flags: one namespace, a label selector per role, the engines' port."""
    return ["--service-discovery", "--service-discovery-namespace", namespace, "--service-discovery-port", str(engine_port),
            "--prefill-selector", *(f"{k}={v}" for k, v in prefill.items()),
            "--decode-selector", *(f"{k}={v}" for k, v in decode.items())]  # fmt: skip


def listen_args(port: int, metrics_port: int, policy: str) -> list[str]:
    """Both routers' flags for where they listen (loopback only, their metrics too) and how they choose workers."""
    return ["--host", "127.0.0.1", "--port", str(port), "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port),
            "--policy", policy]  # fmt: skip


def python_module(module: str) -> list[str]:
    """Run a router's Python entry module with the suite's own interpreter (the extra installs it there)."""
    return [sys.executable, "-m", module]
