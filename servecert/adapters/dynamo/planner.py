"""NVIDIA Dynamo 1.6.1's planner behind the adapter contract (registered as ``dynamo-planner``).

``deploy`` runs the router adapter's deployment (Dynamo's frontend, one ``servecert.fakes.dynamo_worker``
per worker: the suite's fake engines, which publish their forward-pass metrics on Dynamo's event
plane) and beside it Dynamo's own planner, ``python -m dynamo.planner``, on its Virtual connector:

    PlannerSpec (simulated ms and s) --planner_config--> Dynamo's --config JSON (real ms and s)
    etcd (the cluster build's binary, on 127.0.0.1, data in the deployment's folder)
        <-- num_prefill_workers, num_decode_workers, decision_id --  the planner
        -- scaled_decision_id -->                                     (after the suite scaled)
    the suite's ScalingHarness reads and acknowledges them through ``decisions``
    (``EtcdDecisionStore``) and adds or removes workers with ``add_worker``/``remove_worker``;
    the planner counts them through Dynamo's discovery and reads their FPMs, as it would vLLM's.

Why a virtualenv of its own (``make dynamo-planner``): the planner pins ``kubernetes<33``, which
the suite's environment is past, and imports ``aisimulate_core``, whose wheel comes only from
NVIDIA's index. ``planner_stand_in/`` puts in its place the two names the planner imports, over
aiconfigurator-core's forward-pass regression (the model the planner learns with is NVIDIA's; the
stand-in only builds it, with no download attempt).

What runs as it would in production (each a cause of an unfair verdict before; ``docs/dynamo.md``):

- **Prometheus** (``servecert.adapters.contract.prometheus``, Debian's binary): it scrapes Dynamo's
  frontend every 0.5 s and adds the ``dynamo_namespace`` label a Kubernetes PodMonitor would (the
  frontend's own series carry only ``model``), so the throughput loop reads its
  ``dynamo_frontend_*`` queries as seed 003's Step 1 says, and is on when the spec says so.
- **etcd discovery** for the frontend, the workers and the planner: a stopped worker's lease is
  revoked as it exits, so it leaves discovery then, not when a file store's 10 s expiry runs out.
- **Scale-downs as a terminating pod's**: a removed worker gets SIGTERM, leaves discovery, and keeps Dynamo's
  default grace period and prefill drain (the router adapter's test-speed zeros are not set), so the requests
  already sent to it finish (the fake prefill engine answers Dynamo's ``is_quiescent`` once its KV handles were
  pulled); ``remove_worker`` returns once it unregistered, its exit goes on in the background.
- **Every setting the spec carries that Dynamo has**: the acknowledgement timeout
  (``SCALING_MAX_WAIT_TIME``, checked every second), ``scale_down_sensitivity``
  (``load_scaling_down_sensitivity``, in percent), the predictor, both loops' switches.

What the mapping cannot carry (said in ``docs/dynamo.md`` and in the submitted report):

- Dynamo's intervals are whole real seconds: the scenario's load and throughput intervals divided
  by the time scale must be integers (``--timeout planner_time_scale=2``: 2 simulated s = 1 s).
- ``profile`` (Dynamo ignores a profile's throughput per GPU) and ``warmup_trace`` (its trace is in
  real time, the suite's simulated) are not passed on; ``backend`` is ``mocker``, so its
  accept-length query (vLLM, SGLang, TRT-LLM only) does not run.

Every process is started by this module and ended by its pid in ``close()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from servecert.adapters.contract import (
    AGG,
    AdapterError,
    Deadline,
    DeploymentSpec,
    Environment,
    PlannerSpec,
    Proc,
    ProcessStartError,
    WorkerRef,
    cache_root,
    features,
    free_port,
    wait_for,
)
from servecert.adapters.contract.prometheus import PrometheusServer, ScrapeTarget, start_prometheus
from servecert.adapters.dynamo.adapter import DynamoDeployment, DynamoImplementation
from servecert.adapters.dynamo.etcd_decisions import EtcdDecisionStore

PLANNER_PYTHON_ENV = "SERVECERT_DYNAMO_PLANNER_PYTHON"
STAND_IN = Path(__file__).with_name("planner_stand_in")
ETCD_READY_S = 15.0
PLANNER_READY_S = float(os.environ.get("SERVECERT_DYNAMO_PLANNER_READY_S", "75"))
"""Its imports take ~13 s, and it waits 10 s per component for a self-benchmark endpoint the fakes do not serve."""
FIRST_TICK = re.compile(r"\[summary\] (HOLD|SCALE_UP|SCALE_DOWN)")
PREDICTORS = frozenset({"constant", "arima", "prophet", "kalman"})  # Dynamo 1.6.1's load_predictor values
TEST_SPEED_SHUTDOWN = ("DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS", "DYN_PREFILL_DRAIN_TIMEOUT_S")
"""The router adapter's test-speed shutdown settings, which the planner's deployment leaves at Dynamo's defaults."""
WORKER_EXIT_S = 45.0  # a leaving worker's grace (5 s), prefill drain (at most 30 s) and cleanup, before SIGKILL
LEAVE_DISCOVERY_S = 10.0
UNREGISTERED = "Endpoint unregistered from discovery"  # Dynamo's backend Worker, right after SIGTERM
ACK_CHECK_INTERVAL_S = 1  # SCALING_CHECK_INTERVAL: how often its Virtual connector looks for the acknowledgement
PLANNER_FEATURES = frozenset(
    {
        features.PLANNER_VIRTUAL_CONNECTOR,
        features.PLANNER_LOAD_BASED_SCALING,
        features.PLANNER_SCALING_BOUNDS,
        features.PLANNER_STABILITY,
        features.PLANNER_SLA_ATTAINMENT,
    }
)
"""Not PlannerKubernetesConnector: on a cluster the planner is a DGD component of the implementation's operator, which
here is the reference's; Dynamo's operator cannot be had."""


def planner_python() -> Path:
    """The planner's own interpreter: ``$SERVECERT_DYNAMO_PLANNER_PYTHON``, else ``make dynamo-planner``'s."""
    given = os.environ.get(PLANNER_PYTHON_ENV)
    path = Path(given) if given else cache_root() / "dynamo-planner" / "bin" / "python"
    if not path.is_file():
        raise AdapterError(
            f"Dynamo's planner runs in a virtualenv of its own, not found at {path}: run `make dynamo-planner` "
            f"(or set {PLANNER_PYTHON_ENV} to its python); see docs/dynamo.md"
        )
    return path


def whole_seconds(simulated_s: float, time_scale: float, what: str) -> int:
    """``simulated_s`` in real seconds, which Dynamo takes only as a positive integer."""
    real = simulated_s / time_scale if time_scale > 0 else simulated_s
    if real < 1 or not math.isclose(real, round(real), abs_tol=1e-9):
        raise AdapterError(
            f"Dynamo's planner takes its {what} in whole seconds; {simulated_s:g} simulated s at time scale {time_scale:g} "
            f"is {real:g} s: choose a time scale that divides it (--timeout planner_time_scale=2 for PLANNER-SCALING)"
        )
    return round(real)


def planner_config(spec: DeploymentSpec, planner: PlannerSpec, metrics_port: int, prometheus_url: str) -> dict[str, Any]:
    """Dynamo's ``--config``: the SLA in real milliseconds, the intervals in whole real seconds."""
    scale = spec.time_scale if spec.time_scale > 0 else 1.0
    if planner.predictor not in PREDICTORS:
        raise AdapterError(f"Dynamo 1.6.1's planner has no predictor {planner.predictor!r}; it has {sorted(PREDICTORS)}")
    return {
        "environment": "virtual",
        "namespace": spec.namespace,
        "model_name": spec.model,
        "mode": "agg" if planner.mode == AGG else "disagg",
        "backend": "mocker",
        "optimization_target": "sla",
        "ttft_ms": planner.ttft_ms / scale,
        "itl_ms": planner.itl_ms / scale,
        "enable_load_scaling": planner.enable_load_scaling,
        "enable_throughput_scaling": planner.enable_throughput_scaling,
        "throughput_metrics_source": "frontend",
        "metric_pulling_prometheus_endpoint": prometheus_url,
        "load_predictor": planner.predictor,
        "load_scaling_down_sensitivity": round(100 * planner.scale_down_sensitivity),
        "load_adjustment_interval_seconds": whole_seconds(planner.load_interval_s, scale, "load interval"),
        "throughput_adjustment_interval_seconds": whole_seconds(planner.throughput_interval_s, scale, "throughput interval"),
        "prefill_engine_num_gpu": planner.prefill_engine_num_gpu,
        "decode_engine_num_gpu": planner.decode_engine_num_gpu,
        "max_gpu_budget": planner.max_gpu_budget,
        "min_endpoint": planner.min_endpoint,
        "live_dashboard_port": 0,
        "control_api_port": 0,
        "report_interval_hours": None,
        "metric_reporting_prometheus_port": metrics_port,
    }


def connector_env(spec: DeploymentSpec, planner: PlannerSpec) -> dict[str, str]:
    """The Virtual connector's two settings, which Dynamo reads only from its environment (``connectors/virtual.py``)."""
    scale = spec.time_scale if spec.time_scale > 0 else 1.0
    # NB: rounded up to whole seconds, never down: a shorter wait would let it decide again before the suite allows.
    wait_s = max(ACK_CHECK_INTERVAL_S, math.ceil(planner.scaling_ack_timeout_s / scale - 1e-9))
    return {"SCALING_MAX_WAIT_TIME": str(wait_s), "SCALING_CHECK_INTERVAL": str(ACK_CHECK_INTERVAL_S)}


class DynamoPlannerDeployment(DynamoDeployment):
    """The router adapter's deployment, plus etcd and Dynamo's planner; ``decisions`` is the planner's store."""

    def __init__(self, spec: DeploymentSpec, etcd: Path, workdir: Path, keep: bool) -> None:
        super().__init__(spec, workdir, keep)
        self.etcd = etcd
        if spec.planner is None:
            raise AdapterError("the dynamo-planner implementation deploys a planner: the DeploymentSpec has none")
        self.planner_spec = spec.planner
        self.python = planner_python()
        self.etcd_url = ""
        self.decisions: EtcdDecisionStore | None = None
        self.prometheus: PrometheusServer | None = None
        self._exiting: set[asyncio.Task[None]] = set()
        for key in TEST_SPEED_SHUTDOWN:
            # NB: a leaving worker serves what it was sent, as in production: with no grace period the fake engine's
            # stop cut the requests in flight on it (HTTP 500 to the client) at every scale-down.
            self.env.pop(key, None)

    async def start(self) -> None:
        await self._start_etcd()
        # NB: discovery on the etcd, as in production: the file store expires a stopped worker's keys only 10 s after
        # its last keep-alive, and the planner holds every decision while the counts it reads disagree.
        self.env.update({"DYN_DISCOVERY_BACKEND": "etcd", "ETCD_ENDPOINTS": self.etcd_url})
        await super().start()
        await self._start_prometheus()
        await self._start_planner()

    async def remove_worker(self, ref: WorkerRef) -> None:
        """As a Kubernetes scale-down: the worker gets SIGTERM and unregisters from discovery at once (its log says
        so), and this returns then; its grace period, drain and exit go on in the background, as a terminating pod's.
        """
        worker = self._by_engine.pop(ref.engine_id, None)
        if ref in self.workers:
            self.workers.remove(ref)
        if worker is None:
            return
        log, since = worker.proc.log_path, _size(worker.proc.log_path)
        task = asyncio.get_running_loop().create_task(self._stop(worker.proc, WORKER_EXIT_S), name=f"exit-{ref.name}")
        self._exiting.add(task)
        task.add_done_callback(self._exiting.discard)

        async def unregistered() -> bool:
            return UNREGISTERED in _read_from(log, since) or not worker.proc.running

        # NB: best effort: a worker that never logs it still leaves; the scale-down is not failed for a log line.
        with contextlib.suppress(ProcessStartError):
            await wait_for(unregistered, Deadline(LEAVE_DISCOVERY_S), f"{worker.proc.name} to unregister", [])

    async def close(self) -> None:
        await asyncio.gather(*list(self._exiting), return_exceptions=True)
        await super().close()

    async def _start_prometheus(self) -> None:
        frontend = self.frontend_url.removeprefix("http://")
        # NB: the label a PodMonitor adds in Kubernetes; Dynamo's queries group by it, the frontend does not emit it.
        target = ScrapeTarget(frontend, {"dynamo_namespace": self.spec.namespace})
        self.prometheus = await start_prometheus(self.workdir, [target])
        self._procs.append(self.prometheus.proc)

    async def _start_etcd(self) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        argv = [
            str(self.etcd), "--name=servecert", f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}", f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=servecert=http://127.0.0.1:{peer}", "--unsafe-no-fsync=true", "--log-level=warn",
        ]  # fmt: skip
        self.workdir.mkdir(parents=True, exist_ok=True)
        proc = Proc("etcd (Dynamo planner's store)", argv, dict(os.environ), self.workdir / "logs" / "etcd.log", self.workdir)
        self._procs.append(proc)
        await proc.start()
        session = self._http()
        self.decisions = EtcdDecisionStore(self.etcd_url, self.spec.namespace, session)

        async def healthy() -> bool:
            try:
                async with session.get(self.etcd_url + "/health") as resp:
                    return resp.status == 200 and '"health":"true"' in await resp.text()
            except (aiohttp.ClientError, TimeoutError):
                return False

        await wait_for(healthy, Deadline(ETCD_READY_S), f"etcd on {self.etcd_url}", [proc])

    async def _start_planner(self) -> None:
        assert self.prometheus is not None
        config = planner_config(self.spec, self.planner_spec, free_port(), self.prometheus.url)
        (self.workdir / "planner-config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        env = {
            **self.env,
            "DYN_NAMESPACE": self.spec.namespace,
            "ETCD_ENDPOINTS": self.etcd_url,
            "PYTHONPATH": str(STAND_IN),
            "PROMETHEUS_ENDPOINT": self.prometheus.url,
            **connector_env(self.spec, self.planner_spec),
        }
        argv = [str(self.python), "-m", "dynamo.planner", "--config", json.dumps(config)]
        proc = Proc("dynamo planner", argv, env, self.workdir / "logs" / "planner.log", self.workdir)
        self._procs.append(proc)
        await proc.start()

        async def ticking() -> bool:
            return FIRST_TICK.search(proc.tail()) is not None

        await wait_for(ticking, Deadline(PLANNER_READY_S), "Dynamo's planner to log its first decision", [proc], poll_s=0.5)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@dataclass
class DynamoPlannerImplementation(DynamoImplementation):
    supported_features: frozenset[str] = field(default=PLANNER_FEATURES)

    def new_deployment(self, spec: DeploymentSpec, env: Environment, workdir: Path, keep: bool) -> DynamoDeployment:
        return DynamoPlannerDeployment(spec, env.tool("etcd"), workdir, keep)
