"""Slow and vanishing clients against a fake engine and the reference frontend (``servecert.protocol.connection_guard``).

300 half-open connections (100 that stop inside their headers, 100 that stop inside their body,
100 that never send a byte) must not delay a normal request, and the server must close every one
of them within its timeouts: those inside their headers or silent by the header timeout, those
inside their body with a 408 by the body timeout. Ten clients that go away in the middle of a
stream must leave the engine serving and the log free of tracebacks. The timeouts here are
shortened (``SERVECERT_HTTP_*``) so the test takes seconds; the defaults are the suite's, in
``Limits``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
import pytest

from servecert.adapters.contract import DeploymentSpec, RouterSpec, WorkerSpec
from servecert.adapters.reference.adapter import ReferenceDeployment, ReferenceImplementation
from servecert.harness.observe import GroundTruth
from servecert.harness.process_env import ProcessEnvironment

HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.5
CLOSE_SLACK_S = 3.0  # NB: the suite's bound on a close after its timeout: the sweeper's period and a loaded machine
NORMAL_REQUEST_BOUND_S = 10.0  # NB: a generous bound on one short request; it takes milliseconds when nothing blocks it
BODY = json.dumps({"model": "m", "prompt": "a normal request", "max_tokens": 4}).encode()


@dataclass
class Server:
    name: str
    url: str


@pytest.fixture
async def deployment(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ReferenceDeployment]:
    """An aggregated engine and the reference frontend in front of it, both with short timeouts."""
    monkeypatch.setenv("SERVECERT_HTTP_HEADER_TIMEOUT_S", str(HEADER_TIMEOUT_S))
    monkeypatch.setenv("SERVECERT_HTTP_BODY_TIMEOUT_S", str(BODY_TIMEOUT_S))
    env = ProcessEnvironment()
    dep = await ReferenceImplementation().deploy(DeploymentSpec(model="m", router=RouterSpec(), workers=(WorkerSpec("agg"),)), env)
    try:
        yield dep
    finally:
        await dep.close()
        await env.close()


@pytest.fixture
def servers(deployment: ReferenceDeployment) -> list[Server]:
    return [Server("engine", deployment.workers[0].url), Server("frontend", deployment.frontend_url)]


def _half_open_requests(path: str) -> list[bytes]:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(BODY)}\r\n"
    inside_headers = head.encode()[: len(head) // 2]
    inside_body = (head + "\r\n").encode() + BODY[: len(BODY) // 2]
    return [inside_headers] * 100 + [inside_body] * 100 + [b""] * 100


async def _open(url: str, first_bytes: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    if first_bytes:
        writer.write(first_bytes)
        await writer.drain()
    return reader, writer


async def _until_closed(reader: asyncio.StreamReader, bound_s: float) -> bytes:
    """Everything the server sends before it closes the connection; fails when it is still open after ``bound_s``."""
    received = b""
    async with asyncio.timeout(bound_s):
        while chunk := await reader.read(65536):
            received += chunk
    return received


async def _normal_request(http: aiohttp.ClientSession, url: str) -> None:
    async with http.post(url + "/v1/completions", data=BODY, headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()


def no_tracebacks_must_be_logged(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not bad, "\n".join(f"{r.name}: {r.getMessage()}\n{caplog.text[:3000]}" for r in bad[:3])


async def test_half_open_connections_delay_no_request_and_are_closed_within_the_timeouts(
    servers: list[Server], http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    for server in servers:
        started = asyncio.get_running_loop().time()
        opened = await asyncio.gather(*(_open(server.url, b) for b in _half_open_requests("/v1/completions")))
        try:
            async with asyncio.timeout(NORMAL_REQUEST_BOUND_S):
                await _normal_request(http, server.url)
            bound = max(HEADER_TIMEOUT_S, BODY_TIMEOUT_S) + CLOSE_SLACK_S - (asyncio.get_running_loop().time() - started)
            answers = await asyncio.gather(*(_until_closed(reader, bound) for reader, _ in opened))
        finally:
            for _, writer in opened:
                writer.close()
        inside_headers, inside_body, silent = answers[:100], answers[100:200], answers[200:]
        assert set(inside_headers) == {b""} and set(silent) == {b""}, f"{server.name}: answered a request it never got"
        assert all(a.startswith(b"HTTP/1.1 408 ") and b'"body_timeout"' in a for a in inside_body), (server.name, inside_body[0])
        async with asyncio.timeout(NORMAL_REQUEST_BOUND_S):
            await _normal_request(http, server.url)
    no_tracebacks_must_be_logged(caplog)


async def test_clients_that_leave_mid_stream_are_one_log_line_not_a_traceback(
    deployment: ReferenceDeployment, servers: list[Server], http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="servecert.http")
    body = {"model": "m", "prompt": "a long story", "max_tokens": 400, "min_tokens": 400, "ignore_eos": True, "stream": True}
    for server in servers:
        for _ in range(10):
            async with aiohttp.ClientSession() as leaving, leaving.post(server.url + "/v1/completions", json=body) as resp:
                assert resp.status == 200
                await resp.content.readline()  # the first token is on its way: now leave
                resp.connection.transport.abort()  # type: ignore[union-attr]
        async with asyncio.timeout(NORMAL_REQUEST_BOUND_S):
            await _normal_request(http, server.url)
    truth = GroundTruth(http)
    await truth.refresh(deployment.workers)
    outcomes = [r["outcome"] for r in truth.records]
    assert outcomes.count("aborted") == 20 and outcomes.count("ok") == 2, outcomes
    no_tracebacks_must_be_logged(caplog)
