"""NVIDIA Dynamo 1.6.1 behind the adapter contract (registered as ``dynamo``; extra ``servecert[dynamo]``).

``deploy`` runs a real Dynamo on one machine, without etcd or NATS: file discovery
(``DYN_DISCOVERY_BACKEND=file``, ``DYN_FILE_KV`` in the deployment's own folder), the TCP request
plane and the ZMQ event plane, everything on 127.0.0.1. The frontend is Dynamo's own
(``python -m dynamo.frontend --router-mode kv``: its Rust HTTP service, preprocessor, KV router
and prefill router). Each worker is ``python -m servecert.fakes.dynamo_worker``: the suite's fake
engine hosted as a Dynamo Python backend (``dynamo.common.backend.LLMEngine`` under the
runtime's ``Worker``), registered with ``--disaggregation-mode``'s role, so the ground truth of
every prefill, decode and KV transfer is the suite's own (``WorkerRef.url`` serves
``/groundtruth``). The model card comes from a generated local folder (``model_folder``).

Topology is configured the way Dynamo 1.6 does it — on the **workers**, not the frontend:

- each worker's placement becomes one file per level in its own ``DYN_TOPOLOGY_MOUNT_PATH``
  (the seed's Downward-API volume), with ``DYN_TOPOLOGY_ENABLED=true``;
- the seed's frontend-level ``RouterSpec.topology_level`` becomes ``DYN_KV_TRANSFER_DOMAIN`` on
  every worker, and its mismatch policy becomes the **prefill** workers'
  ``DYN_KV_TRANSFER_ENFORCEMENT`` (Dynamo's frontend reads the policy from the prefill worker
  it chose): ``fail`` -> ``required``; ``fallback`` -> ``preferred`` with the strongest weight
  (``FALLBACK_PREFERRED_WEIGHT``; Dynamo has no exact equivalent of fallback, see
  ``docs/dynamo.md``);
- a worker spec with its own ``transfer_enforcement`` (Dynamo's per-worker spelling) keeps it;
- a worker lacking the level's label would make Dynamo's start-up wait 30 s and exit, so its
  ``DYN_KV_TRANSFER_DOMAIN`` names a level it has (a decode worker's own policy is never read);
  a worker with no label at all runs with topology off;
- with the level unset and no per-worker policy, topology stays off on every worker.

Every process is started by this module and ended by its pid in ``close()`` (or when ``deploy``
fails); every wait is bounded and its error names the log file to read.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp

from servecert.adapters.contract import (
    FAIL,
    PREFERRED,
    REQUIRED,
    AdapterError,
    Deadline,
    DeploymentSpec,
    Environment,
    ImplementationMetadata,
    LogRecord,
    Proc,
    ProcessStartError,
    RouterSpec,
    WorkerRef,
    WorkerSpec,
    engine_config,
    engine_settings,
    features,
    free_port,
    wait_for,
)
from servecert.adapters.dynamo import model_folder

DYNAMO_VERSION = "1.6.1"
FALLBACK_PREFERRED_WEIGHT = 1.0  # Dynamo 1.6.1 accepts weights in [0, 1]; 1 is its strongest preference (cost x e^-tanh(1))
READY_S = float(os.environ.get("SERVECERT_DYNAMO_READY_S", "28"))  # below the suite's deploy_ready_s (30 s)
WORKER_STOP_S = 10.0
HTTP_TIMEOUT_S = 2.0
KEEP_ENV = "SERVECERT_DYNAMO_KEEP"  # keep each deployment's folder (logs, discovery) after close()
WORKDIR_ENV = "SERVECERT_DYNAMO_WORKDIR"

FEATURES = frozenset(
    {
        features.DISAGGREGATED_SERVING,
        features.KV_TRANSFER_TOPOLOGY_FILTER,
        features.KV_TRANSFER_TOPOLOGY_UNSET,
        features.KV_TRANSFER_TOPOLOGY_ERROR_503,
        features.KV_TRANSFER_TOPOLOGY_PREFERRED_WEIGHT,
        features.KV_TRANSFER_TOPOLOGY_LATENCY,
    }
)
# NB: not declared, see docs/dynamo.md: KVTransferTopologyFallback (``preferred`` is a soft cost
# multiplier, not "same domain when possible, else anywhere") and
# KVTransferTopologyPrefillPreselection (1.6.1 chooses the prefill worker without regard to
# where decode workers are).


def _installed_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("ai-dynamo")
    except metadata.PackageNotFoundError:
        return DYNAMO_VERSION


def base_env(kv_dir: Path) -> dict[str, str]:
    """What every Dynamo process of a deployment shares: one machine, no etcd, no NATS."""
    env = dict(os.environ)
    for key in [k for k in env if k.startswith(("DYN_TOPOLOGY_", "DYN_KV_TRANSFER_"))]:
        del env[key]  # placement and policy are per worker, never inherited
    env.update(
        {
            "DYN_DISCOVERY_BACKEND": "file",
            "DYN_FILE_KV": str(kv_dir),
            "DYN_REQUEST_PLANE": "tcp",
            "DYN_EVENT_PLANE": "zmq",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "DYN_TCP_RPC_HOST": "127.0.0.1",
            "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
            "DYN_EVENT_PLANE_HOST": "127.0.0.1",
            "DYN_SYSTEM_HOST": "127.0.0.1",
            "DYN_SELF_HOST_METADATA": "0",
            # NB: test-speed shutdown: no grace period, a short prefill drain (the suite removes
            # workers mid-test; Dynamo's defaults hold a leaving worker for tens of seconds).
            "DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS": "0",
            "DYN_PREFILL_DRAIN_TIMEOUT_S": "2",
            "NO_COLOR": "1",
        }
    )
    return env


@dataclass(frozen=True)
class TopologyPlan:
    """One worker's Dynamo topology settings: files to write and variables to set."""

    files: dict[str, str] = field(default_factory=dict)
    transfer_domain: str | None = None
    enforcement: str | None = None
    preferred_weight: float | None = None

    @property
    def enabled(self) -> bool:
        return self.transfer_domain is not None

    def env(self, mount: Path) -> dict[str, str]:
        if not self.enabled:
            return {}
        out = {
            "DYN_TOPOLOGY_ENABLED": "true",
            "DYN_TOPOLOGY_MOUNT_PATH": str(mount),
            "DYN_KV_TRANSFER_DOMAIN": str(self.transfer_domain),
        }
        if self.enforcement is not None:
            out["DYN_KV_TRANSFER_ENFORCEMENT"] = self.enforcement
        if self.preferred_weight is not None:
            out["DYN_KV_TRANSFER_PREFERRED_WEIGHT"] = repr(float(self.preferred_weight))
        return out


def transfer_levels(spec: DeploymentSpec) -> tuple[str, ...]:
    """The levels KV transfers are constrained at in this deployment (the router's, the workers' own)."""
    levels = [spec.router.topology_level] if spec.router.topology_level else []
    levels += [w.transfer_domain for w in spec.workers if w.transfer_enforcement is not None and w.transfer_domain]
    return tuple(dict.fromkeys(level for level in levels if level))


def topology_plan(worker: WorkerSpec, router: RouterSpec, levels: tuple[str, ...] = ()) -> TopologyPlan:
    """Map the suite's placement and policy onto Dynamo 1.6's per-worker variables.

    ``levels`` are the deployment's transfer levels (``transfer_levels``); the router's level
    is one of them when set.
    """
    files = {level: value for level, value in worker.domains.items() if value}
    levels = tuple(dict.fromkeys([*([router.topology_level] if router.topology_level else []), *levels]))
    if worker.transfer_enforcement is not None:  # Dynamo's own spelling, per worker
        domain = worker.transfer_domain or router.topology_level
        if domain is None:
            raise AdapterError(f"worker {worker.name or worker.role}: transfer_enforcement needs transfer_domain")
        weight = worker.preferred_weight if worker.transfer_enforcement == PREFERRED else None
        return TopologyPlan(files, domain, worker.transfer_enforcement, weight)
    if not levels or not files:
        return TopologyPlan()  # no level: Dynamo never sees placement; no label: no taints
    level = levels[0]
    if worker.role == "prefill" and router.topology_level is not None:
        if router.mismatch_policy is None:  # unset: Dynamo's own default enforcement applies
            return TopologyPlan(files, level)
        if router.mismatch_policy == FAIL:
            return TopologyPlan(files, level, REQUIRED)
        return TopologyPlan(files, level, PREFERRED, FALLBACK_PREFERRED_WEIGHT)
    # NB: other workers publish their placement (the taints the prefill's policy is matched
    # against); the frontend reads the policy from the prefill worker only, yet Dynamo needs a
    # transfer domain to enable topology at all. A worker lacking the level's label names a
    # level it has (else Dynamo waits 30 s for the file and exits).
    present = [lv for lv in levels if lv in files]
    return TopologyPlan(files, present[0] if present else sorted(files)[0], REQUIRED)


_SEVERITY = re.compile(r"\b(WARN|WARNING|ERROR|CRITICAL)\b")
_LEVEL_NAMES = {"WARN": "WARNING", "WARNING": "WARNING", "ERROR": "ERROR", "CRITICAL": "CRITICAL"}


def warnings_in(log: str) -> list[LogRecord]:
    """The lines of a Dynamo log at WARN or above, as the adapter contract's records (the whole line as message)."""
    records = []
    for line in log.splitlines():
        found = _SEVERITY.search(line)
        if found:
            records.append(LogRecord(_LEVEL_NAMES[found.group(1)], line.strip()))
    return records


@dataclass
class _Worker:
    ref: WorkerRef
    proc: Proc
    instance_id: int


class DynamoDeployment:
    prompt_token_ids = True
    """The suite's loads are counted in its own tokens; Dynamo's frontend would tokenize a prompt's text with the model
    folder's BPE, about five tokens per suite word (``load_generator.as_token_ids``)."""

    def __init__(self, spec: DeploymentSpec, workdir: Path, keep: bool) -> None:
        self.spec = spec
        self.workdir = workdir
        self.keep = keep
        self.kv_dir = workdir / "kv"
        self.env = base_env(self.kv_dir)
        self.model_path = model_folder.ensure(max([8192, *(w.context_length for w in spec.workers)]))
        self.frontend_url = ""
        self.workers: list[WorkerRef] = []
        self._by_engine: dict[str, _Worker] = {}
        self._frontend: Proc | None = None
        self._procs: list[Proc] = []  # every process started, until it is stopped
        self._session: aiohttp.ClientSession | None = None
        self._count = 0
        self._failed = False

    # -- start ------------------------------------------------------------------------------------
    def _http(self) -> aiohttp.ClientSession:
        """The deployment's HTTP session, made on first use (closed by ``close``)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S))
        return self._session

    async def start(self) -> None:
        self.kv_dir.mkdir(parents=True, exist_ok=True)
        self._http()
        deadline = Deadline(READY_S)
        await self._start_frontend(deadline)
        launched = [await self._launch(w) for w in self.spec.workers]
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._await_worker(*one, deadline)) for one in launched]
        except BaseExceptionGroup as group_error:
            raise group_error.exceptions[0] from None
        self.workers.extend(t.result() for t in tasks)
        await self._await_model(deadline)

    async def _start_frontend(self, deadline: Deadline) -> None:
        router = self.spec.router
        port = free_port()
        argv = [
            sys.executable, "-m", "dynamo.frontend",
            "--http-host", "127.0.0.1", "--http-port", str(port),
            "--router-mode", router.mode,
            "--namespace", self.spec.namespace,
            "--discovery-backend", self.env["DYN_DISCOVERY_BACKEND"], "--request-plane", "tcp", "--event-plane", "zmq",
        ]  # fmt: skip
        if router.mode == "kv":
            argv += ["--router-temperature", repr(float(router.temperature))]
        proc = Proc("dynamo frontend", argv, self.env, self.workdir / "logs" / "frontend.log", self.workdir)
        self._frontend = proc
        self._procs.append(proc)
        await proc.start()
        self.frontend_url = f"http://127.0.0.1:{port}"

        async def live() -> bool:
            return await self._get_json("/live") is not None

        await wait_for(live, deadline, f"the Dynamo frontend on {self.frontend_url}", [proc])

    async def _launch(self, spec: WorkerSpec) -> tuple[str, Proc, dict[str, Any]]:
        self._count += 1
        name = spec.name or f"{spec.role}-{uuid.uuid4().hex[:8]}"
        config = engine_config(replace(spec, name=name), self.spec)
        plan = topology_plan(spec, self.spec.router, transfer_levels(self.spec))
        wdir = self.workdir / "workers" / f"{self._count:02d}-{name}"
        mount = wdir / "topology"
        mount.mkdir(parents=True, exist_ok=True)
        for level, value in plan.files.items():
            (mount / level).write_text(value + "\n")
        settings = engine_settings(config, self.spec.timing)
        argv = [
            sys.executable, "-m", "servecert.fakes.dynamo_worker",
            "--model-path", str(self.model_path),
            "--engine", json.dumps(settings),
            "--ready-file", str(wdir / "ready.json"),
        ]  # fmt: skip
        env = {**self.env, **plan.env(mount)}
        (wdir / "dynamo-env.json").write_text(json.dumps(plan.env(mount), indent=2, sort_keys=True) + "\n")
        proc = Proc(f"dynamo worker {name} ({spec.role})", argv, env, wdir / "worker.log", wdir)
        self._procs.append(proc)
        await proc.start()
        return name, proc, settings

    async def _await_worker(self, name: str, proc: Proc, settings: dict[str, Any], deadline: Deadline) -> WorkerRef:
        ready_file = proc.cwd / "ready.json"

        async def written() -> bool:
            return ready_file.is_file()

        await wait_for(written, deadline, f"{proc.name} to start its fake engine", [proc])
        ready = json.loads(ready_file.read_text())
        instance_id = int(ready["dynamo_worker_id"])

        async def discovered() -> bool:
            return instance_id in await self._frontend_instances()

        await wait_for(discovered, deadline, f"the frontend to discover {proc.name} (instance {instance_id:x})", [proc])
        if self.spec.router.mode == "kv":
            # NB: /health lists a discovered instance before the KV router that schedules its pool
            # (the prefill router's, or the decode/agg one) holds it; a request in between is
            # refused with 503 "no backend worker available". 1.6.1 exposes that step only as
            # the frontend's log line "Adding worker WorkerWithDpRank { worker_id: N, ... }".
            await wait_for(
                lambda: self._frontend_logged(f"worker_id: {instance_id}, dp_rank"),
                deadline,
                f"the frontend's KV router to add {proc.name} (instance {instance_id})",
                [proc],
            )
        ref = WorkerRef(
            name=name,
            engine_id=str(ready["engine_id"]),
            url=str(ready["url"]),
            role=str(settings["role"]),
            domains=dict(settings["domains"]),
        )
        self._by_engine[ref.engine_id] = _Worker(ref, proc, instance_id)
        return ref

    async def _await_model(self, deadline: Deadline) -> None:
        async def listed() -> bool:
            body = await self._get_json("/v1/models") or {}
            return any(m.get("id") == self.spec.model for m in body.get("data", []))

        if self.spec.workers:
            assert self._frontend is not None
            await wait_for(listed, deadline, f"model {self.spec.model!r} in the frontend's /v1/models", [self._frontend])

    async def _get_json(self, path: str) -> dict[str, Any] | None:
        assert self._session is not None
        try:
            async with self._session.get(self.frontend_url + path) as resp:
                if resp.status != 200:
                    return None
                body = await resp.json(content_type=None)
                return body if isinstance(body, dict) else None
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None

    async def _frontend_logged(self, needle: str) -> bool:
        assert self._frontend is not None
        try:
            return needle in self._frontend.log_path.read_text(errors="replace")
        except OSError:
            return False

    async def _frontend_instances(self) -> set[int]:
        body = await self._get_json("/health") or {}
        return {int(i["instance_id"]) for i in body.get("instances", []) if "instance_id" in i}

    # -- the Deployment protocol ------------------------------------------------------------------
    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        name, proc, settings = await self._launch(spec)
        try:
            ref = await self._await_worker(name, proc, settings, Deadline(READY_S))
        except BaseException:
            await self._stop(proc)
            raise
        self.workers.append(ref)
        return ref

    async def log_records(self) -> list[LogRecord]:
        """The frontend's log lines at WARN or ERROR (Dynamo's tracing format: ``<time>  WARN <target>: <message>``)."""
        if self._frontend is None or not self._frontend.log_path.is_file():
            return []
        return warnings_in(self._frontend.log_path.read_text(errors="replace"))

    async def remove_worker(self, ref: WorkerRef) -> None:
        worker = self._by_engine.pop(ref.engine_id, None)
        if ref in self.workers:
            self.workers.remove(ref)
        if worker is not None:
            await self._stop(worker.proc)

    async def _stop(self, proc: Proc, grace_s: float = WORKER_STOP_S) -> None:
        await proc.stop(grace_s)
        if proc in self._procs:
            self._procs.remove(proc)

    async def close(self) -> None:
        self._by_engine.clear()
        self.workers.clear()
        await asyncio.gather(*(self._stop(p) for p in list(self._procs)))
        self._frontend = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if not self.keep and not self._failed:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def fail(self) -> None:
        """Keep the folder (its logs are named in the error) when deploy fails."""
        self._failed = True


@dataclass
class DynamoImplementation:
    metadata: ImplementationMetadata = field(
        default_factory=lambda: ImplementationMetadata(
            organization="NVIDIA",
            project="dynamo",
            url="https://github.com/ai-dynamo/dynamo",
            version=_installed_version(),
            contact=("servecert maintainers (adapter: servecert/adapters/dynamo)",),
        )
    )
    supported_features: frozenset[str] = FEATURES

    def new_deployment(self, spec: DeploymentSpec, env: Environment, workdir: Path, keep: bool) -> DynamoDeployment:
        """The deployment ``deploy`` starts (the planner adapter's adds etcd and Dynamo's planner)."""
        return DynamoDeployment(spec, workdir, keep)

    async def deploy(self, spec: DeploymentSpec, env: Environment) -> DynamoDeployment:
        _require_dynamo()
        root = Path(os.environ.get(WORKDIR_ENV) or tempfile.gettempdir())
        root.mkdir(parents=True, exist_ok=True)
        workdir = Path(tempfile.mkdtemp(prefix="servecert-dynamo-", dir=root))
        deployment = self.new_deployment(spec, env, workdir, keep=os.environ.get(KEEP_ENV, "") not in ("", "0"))
        try:
            await deployment.start()
        except ProcessStartError as exc:
            deployment.fail()
            await deployment.close()
            raise AdapterError(f"Dynamo deployment in {workdir} did not come up: {exc}") from exc
        except BaseException:
            deployment.fail()
            await deployment.close()
            raise
        return deployment


def _require_dynamo() -> None:
    import importlib.util

    if importlib.util.find_spec("dynamo") is None or importlib.util.find_spec("dynamo.frontend") is None:
        raise AdapterError(
            "NVIDIA Dynamo is not installed: pip install 'servecert[dynamo]' and "
            "'ai-dynamo==1.6.1' --no-deps (see docs/dynamo.md)"
        )
