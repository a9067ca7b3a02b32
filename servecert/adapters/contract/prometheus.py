"""A Prometheus server of a deployment's own, for planners that read their traffic from one.

Seed 003, Step 1: "On throughput-cadence ticks, the engine adapter queries Prometheus for traffic
metrics from either the frontend or router, depending on throughput_metrics_source". A planner
built that way has no throughput loop without a Prometheus, so a deployment that runs one starts
this server beside it (part of the vendor contract: any adapter may use it):

    start_prometheus(workdir, [ScrapeTarget("127.0.0.1:8000", {"dynamo_namespace": "ns"})])
        writes workdir/prometheus.yml (every target scraped each ``scrape_s``, with its labels:
        what a Kubernetes PodMonitor's relabelling would add), starts Debian's ``prometheus`` on
        a free 127.0.0.1 port with its data in workdir/prometheus-data, waits for ``/-/ready``
        -> PrometheusServer(proc, url): the planner is given ``url``; ``stop()`` ends it by pid.

The binary is ``$SERVECERT_PROMETHEUS``, the host's, or Debian's unpacked into the cache by ``make
prometheus`` (the README's commands run that step; the package itself would install a service); when
none is found the error names the command. Nothing here changes the host: the server listens on
loopback only and keeps its data in the deployment's folder.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from servecert.adapters.contract import AdapterError, Deadline, Proc, cache_root, free_port, wait_for

BINARY_ENV = "SERVECERT_PROMETHEUS"
READY_S = 20.0
SCRAPE_S = 0.5
"""Seconds between scrapes: a planner's ``increase(...[W])`` over a few real seconds needs several samples in W."""
HTTP_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class ScrapeTarget:
    address: str  # host:port serving /metrics
    labels: Mapping[str, str] = field(default_factory=dict)
    path: str = "/metrics"


def prometheus_binary() -> Path:
    """``$SERVECERT_PROMETHEUS``, else ``prometheus`` on PATH, else the cache's (``make prometheus``); AdapterError
    naming the command that fetches it."""
    given = os.environ.get(BINARY_ENV)
    cached = cache_root() / "tools" / "prometheus"
    found = given or shutil.which("prometheus") or (str(cached) if cached.is_file() else None)
    if not found or not Path(found).is_file():
        raise AdapterError(
            "a Prometheus server is needed here (seed 003: the planner queries Prometheus for traffic metrics) and "
            f"none was found: run `make prometheus` (Debian's binary, into {cached}), or set {BINARY_ENV} to a "
            "prometheus binary"
        )
    return Path(found)


def scrape_config(targets: Sequence[ScrapeTarget], scrape_s: float = SCRAPE_S) -> dict[str, object]:
    """prometheus.yml as a dict (JSON is YAML): one job per metrics path, each target with its own labels."""
    interval = f"{round(scrape_s * 1000)}ms"
    jobs = []
    for i, target in enumerate(targets):
        jobs.append(
            {
                "job_name": f"target-{i}",
                "metrics_path": target.path,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "honor_labels": True,
                "static_configs": [{"targets": [target.address], "labels": dict(target.labels)}],
            }
        )
    return {"global": {"scrape_interval": interval, "evaluation_interval": interval}, "scrape_configs": jobs}


@dataclass
class PrometheusServer:
    proc: Proc
    url: str

    async def query(self, session: aiohttp.ClientSession, promql: str) -> list[dict[str, object]]:
        """An instant query's result vector (``[]`` when the server answers with an error)."""
        async with session.get(self.url + "/api/v1/query", params={"query": promql}) as resp:
            body = await resp.json(content_type=None)
        if not isinstance(body, dict) or body.get("status") != "success":
            return []
        result = body.get("data", {}).get("result", [])
        return result if isinstance(result, list) else []

    async def stop(self) -> None:
        await self.proc.stop()


async def start_prometheus(workdir: Path, targets: Sequence[ScrapeTarget], scrape_s: float = SCRAPE_S) -> PrometheusServer:
    """Start a Prometheus scraping ``targets``; it is ready (its API answers) when this returns."""
    binary = prometheus_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(json.dumps(scrape_config(targets, scrape_s), indent=2) + "\n")
    url = f"http://127.0.0.1:{free_port()}"
    argv = [
        str(binary), f"--config.file={config}", f"--storage.tsdb.path={workdir / 'prometheus-data'}",
        f"--web.listen-address={url.removeprefix('http://')}", "--storage.tsdb.retention.time=2h", "--log.level=warn",
    ]  # fmt: skip
    proc = Proc("prometheus", argv, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, workdir / "logs" / "prometheus.log", workdir)
    await proc.start()
    server = PrometheusServer(proc, url)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S)) as session:

        async def ready() -> bool:
            try:
                async with session.get(url + "/-/ready") as resp:
                    return resp.status == 200
            except (aiohttp.ClientError, TimeoutError):
                return False

        try:
            await wait_for(ready, Deadline(READY_S), f"Prometheus on {url}", [proc])
        except BaseException:
            await proc.stop()
            raise
    return server
