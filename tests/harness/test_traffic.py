"""servecert.harness.traffic.complete records an HTTP error as that error, whatever its body.

A failing server's own page (aiohttp's plain-text 500, HAProxy's HTML 503) was once recorded as a
transport failure ("JSONDecodeError: Extra data"), hiding its status from the rollout verdict.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from servecert.harness import traffic

BODIES = {
    "/plain": (500, "500 Internal Server Error\n\nServer got itself in trouble", "text/plain"),
    "/html": (503, "<html><body><h1>503 Service Unavailable</h1></body></html>", "text/html"),
    "/json": (404, '{"error": {"message": "no such model", "code": "model_not_found"}}', "application/json"),
}


@pytest.fixture
async def server(unused_tcp_port: int) -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        status, text, ctype = BODIES[request.path.removesuffix("/v1/completions")]
        return web.Response(status=status, text=text, content_type=ctype)

    app = web.Application()
    app.router.add_post("/{kind}/v1/completions", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    yield f"http://127.0.0.1:{unused_tcp_port}"
    await runner.cleanup()


@pytest.mark.parametrize(
    ("path", "code", "text"),
    [
        ("/plain", "http_500", "HTTP 500: 500 Internal Server Error Server got itself in trouble"),
        ("/html", "http_503", "HTTP 503: <html><body><h1>503 Service Unavailable</h1></body></html>"),
        ("/json", "model_not_found", "no such model"),
    ],
)
async def test_an_error_response_is_recorded_with_its_status_and_text(server: str, path: str, code: str, text: str) -> None:
    async with aiohttp.ClientSession() as http:
        out = await traffic.complete(http, server + path, "m", traffic.unique_prompt())
    assert not out.ok
    assert out.status == BODIES[path][0]
    assert out.error is not None
    assert out.error["code"] == code
    assert out.error["message"] == text
