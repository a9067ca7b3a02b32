"""The planner's HTTP face (aiohttp): its Prometheus gauges, its recent ticks, its HTML report.

``GET /health`` — 200 while the planner's loop runs (a planner pod's readiness);
``GET /metrics`` — the diagnostics registry in Prometheus text format (``dynamo_planner_*``, seed 003's names);
``GET /diagnostics?last=N`` — the newest N tick records as JSON; ``GET /report`` — the HTML report
of every tick kept so far. Served by ``servecert planner demo``; the process environment reads
the same objects in memory.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from aiohttp import web
from prometheus_client import generate_latest

from servecert.reference_impl.planner import report
from servecert.reference_impl.planner.planner import Planner

PLANNER = web.AppKey("planner", Planner)
MAX_LAST = 10_000


def create_app(planner: Planner) -> web.Application:
    app = web.Application()
    app[PLANNER] = planner
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/diagnostics", diagnostics)
    app.router.add_get("/report", html_report)
    return app


async def health(request: web.Request) -> web.Response:
    if not request.app[PLANNER].running:
        return web.Response(status=503, text="the planner's loop is not running")
    return web.Response(text="ok")


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[PLANNER].diagnostics.registry)
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


async def diagnostics(request: web.Request) -> web.Response:
    try:
        last = max(1, min(MAX_LAST, int(request.query.get("last", "100"))))
    except ValueError:
        raise web.HTTPBadRequest(text="last must be an integer") from None
    records = list(request.app[PLANNER].diagnostics.records)[-last:]
    return web.json_response([r.to_dict() for r in records])


async def html_report(request: web.Request) -> web.Response:
    planner = request.app[PLANNER]
    with tempfile.TemporaryDirectory() as folder:
        path = report.write_html(list(planner.diagnostics.records), planner.config, Path(folder) / "planner.html")
        return web.Response(text=path.read_text(), content_type="text/html")
