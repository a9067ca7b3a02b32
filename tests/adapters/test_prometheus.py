"""The contract's Prometheus: a planner's PromQL over what the deployment's frontend exports, with the labels added.

Seed 003, Step 1: "the engine adapter queries Prometheus for traffic metrics from either the
frontend or router". A frontend here stands in for Dynamo's, exporting a counter with only a
``model`` label; the server scrapes it with ``dynamo_namespace`` added (what a PodMonitor's
relabelling adds in Kubernetes) and answers the query Dynamo 1.6.1's planner sends
(``increase(dynamo_frontend_requests_started_total[W])`` grouped by both labels).
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiohttp import web

from servecert.adapters.contract import AdapterError
from servecert.adapters.contract import prometheus as prom

pytestmark = pytest.mark.slow
SCRAPES_S = 6.0


async def counting_frontend() -> tuple[web.AppRunner, str, list[int]]:
    served = [0]

    async def metrics(_: web.Request) -> web.Response:
        served[0] += 1
        text = (
            "# TYPE dynamo_frontend_requests_started_total counter\n"
            f'dynamo_frontend_requests_started_total{{model="m"}} {10 * served[0]}\n'
        )
        return web.Response(text=text)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"127.0.0.1:{runner.addresses[0][1]}", served


async def test_a_planners_query_groups_by_the_label_the_scrape_adds(tmp_path) -> None:
    runner, address, served = await counting_frontend()
    server = await prom.start_prometheus(tmp_path, [prom.ScrapeTarget(address, {"dynamo_namespace": "ns-7"})], scrape_s=0.5)
    try:
        query = 'sum by (model, dynamo_namespace) (increase(dynamo_frontend_requests_started_total[3s]))'
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            result: list[dict[str, object]] = []
            deadline = time.monotonic() + SCRAPES_S
            while time.monotonic() < deadline and not result:
                await asyncio.sleep(0.5)
                result = await server.query(session, query)
        assert served[0] >= 2, f"Prometheus scraped the frontend {served[0]} times in {SCRAPES_S:g} s at 0.5 s"
        assert len(result) == 1 and result[0]["metric"] == {"model": "m", "dynamo_namespace": "ns-7"}, result
        assert float(result[0]["value"][1]) > 0  # type: ignore[index]  # the counter rose 10 per scrape
    finally:
        await server.stop()
        await runner.cleanup()
    assert not server.proc.running


def test_a_missing_binary_names_the_command_that_installs_it(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv(prom.BINARY_ENV, str(tmp_path / "no-prometheus"))
    with pytest.raises(AdapterError, match="make prometheus"):
        prom.prometheus_binary()
