"""The reference adapter's planner part: the reference planner wired to a reference deployment.

``planner_config`` maps the suite's ``PlannerSpec`` (simulated time) and the deployment's time
scale onto ``PlannerConfig``. ``DiscoveryWorkers`` shows the planner the workers registered in the
deployment's in-memory discovery — the reference adapter registers a worker only once its engine
reports ready, as a real worker announces itself after loading its model. ``start`` builds the
planner with a Virtual connector on a ``MemoryDecisionStore`` that the deployment exposes as
``decisions``: the suite's harness is the external system that reads and acknowledges it.
On a cluster ``component`` describes the DGD component that runs the same planner as a pod
(``servecert planner serve``, the Kubernetes connector) with the same settings as flags.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from servecert.adapters.contract import DeploymentSpec, PlannerSpec, features
from servecert.protocol import waiting
from servecert.protocol.planner_decisions import MemoryDecisionStore
from servecert.reference_impl.frontend.discovery import MemoryDiscovery
from servecert.reference_impl.planner import serve as planner_serve
from servecert.reference_impl.planner.config import PlannerConfig
from servecert.reference_impl.planner.connectors.virtual import VirtualConnector
from servecert.reference_impl.planner.planner import Planner, Worker

ConfigHook = Callable[[PlannerConfig], PlannerConfig]
PlannerHook = Callable[[Planner], None]
READY_POLL_S = 0.02
READY_GRACE_S = 30.0
REPORT_DIR_ENV = "SERVECERT_PLANNER_REPORT_DIR"  # set it to keep every reference planner's HTML report and ticks


def planner_config(spec: PlannerSpec, deployment: DeploymentSpec) -> PlannerConfig:
    return PlannerConfig(
        namespace=deployment.namespace,
        ttft_ms=spec.ttft_ms,
        itl_ms=spec.itl_ms,
        isl=spec.isl,
        osl=spec.osl,
        load_interval_s=spec.load_interval_s,
        throughput_interval_s=spec.throughput_interval_s,
        enable_load_scaling=spec.enable_load_scaling,
        enable_throughput_scaling=spec.enable_throughput_scaling,
        scale_down_sensitivity=spec.scale_down_sensitivity,
        min_endpoint=spec.min_endpoint,
        max_gpu_budget=spec.max_gpu_budget,
        prefill_engine_num_gpu=spec.prefill_engine_num_gpu,
        decode_engine_num_gpu=spec.decode_engine_num_gpu,
        predictor=spec.predictor,
        time_scale=deployment.time_scale,
        scaling_ack_timeout_s=spec.scaling_ack_timeout_s,
        perf_profile=spec.profile,
        warmup_trace=spec.warmup_trace,
        mode=spec.mode,
        max_num_batched_tokens=min(
            (w.max_num_batched_tokens for w in deployment.workers if w.role in ("prefill", "agg")), default=8192
        ),
    )


class DiscoveryWorkers:
    def __init__(self, discovery: MemoryDiscovery) -> None:
        self.discovery = discovery

    def workers(self) -> list[Worker]:
        return [Worker(w.engine_id, w.url, w.role) for w in self.discovery.workers()]


async def wait_ready(session: aiohttp.ClientSession, url: str, limit_s: float) -> None:
    """Poll the engine's /health until 200 (model loaded); TimeoutError naming it after ``limit_s``."""

    async def healthy() -> bool:
        async with session.get(url + "/health") as resp:
            return resp.status == 200

    await waiting.until_async(
        healthy,
        timeout_s=limit_s,
        what=f"engine at {url} to report ready (GET /health 200)",
        interval_s=READY_POLL_S,
        tolerate=(aiohttp.ClientError,),
        error=TimeoutError,
    )


def start(
    spec: DeploymentSpec,
    discovery: MemoryDiscovery,
    session: aiohttp.ClientSession,
    config_hook: ConfigHook | None = None,
    planner_hook: PlannerHook | None = None,
) -> tuple[Planner, MemoryDecisionStore]:
    assert spec.planner is not None
    if spec.planner.connector != "virtual":
        raise ValueError(f"the reference planner in the process environment supports the virtual connector, not {spec.planner.connector!r}")
    config = planner_config(spec.planner, spec)
    if config_hook is not None:
        config = config_hook(config)
    store = MemoryDecisionStore(spec.namespace)
    connector = VirtualConnector(store, config.real_seconds(config.scaling_ack_timeout_s))
    planner = Planner(config, DiscoveryWorkers(discovery), connector, session)
    if planner_hook is not None:
        planner_hook(planner)
    planner.start()
    return planner, store


def write_report(planner: Planner) -> Path | None:
    """With ``SERVECERT_PLANNER_REPORT_DIR`` set, write the planner's HTML report and its ticks as JSON there."""
    folder = os.environ.get(REPORT_DIR_ENV)
    if not folder:
        return None
    from servecert.reference_impl.planner import report

    stem = Path(folder) / f"planner-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
    records = list(planner.diagnostics.records)
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps([r.to_dict() for r in records]))
    return report.write_html(records, planner.config, stem.with_suffix(".html"))


FEATURES = frozenset(
    {
        features.PLANNER_VIRTUAL_CONNECTOR,
        features.PLANNER_KUBERNETES_CONNECTOR,
        features.PLANNER_LOAD_BASED_SCALING,
        features.PLANNER_SCALING_BOUNDS,
        features.PLANNER_STABILITY,
        features.PLANNER_SLA_ATTAINMENT,
    }
)


PLANNER_IMAGE = "servecert/planner"
NOT_FLAGS = ("perf_profile", "namespace")
"""PlannerConfig fields ``servecert planner serve`` takes otherwise: the sweep as ``--perf-profile`` JSON; DYN_NAMESPACE."""


def component(spec: DeploymentSpec, hooks: str | None = None) -> dict[str, Any]:
    """The DGD component that runs the reference planner for ``spec`` on a cluster (``servecert planner serve``): every
    setting that differs from PlannerConfig's default as a flag; ``hooks`` (``module:ATTRIBUTE``) makes a broken one."""
    assert spec.planner is not None
    config = planner_config(spec.planner, spec)
    default = PlannerConfig()
    args: list[str] = []
    for f in dataclasses.fields(PlannerConfig):
        value = getattr(config, f.name)
        if f.name in NOT_FLAGS or value is None or value == getattr(default, f.name):
            continue
        args += [f"--{f.name.replace('_', '-')}", str(value).lower() if isinstance(value, bool) else str(value)]
    if config.perf_profile is not None:
        args += ["--perf-profile", planner_serve.perf_profile_json(config.perf_profile)]
    return {"image": PLANNER_IMAGE, "args": [*args, *(["--hooks", hooks] if hooks else [])]}
