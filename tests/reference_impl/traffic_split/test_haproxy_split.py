"""The real HAProxy behind ``servecert proxy serve``: slots filled and weights changed at run time, streams never cut.

Two aiohttp backends stand in for the old and the new frontend (each answers its name, and
streams 20 SSE events over 2 s). HAProxy is Debian's (``make test`` installs it).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import ClientSession, web

from servecert.protocol import waiting
from servecert.reference_impl.traffic_split import haproxy, weights
from servecert.reference_impl.traffic_split.runtime_api import RuntimeApi, RuntimeApiError

REPO = Path(__file__).resolve().parents[3]
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_ADDRESSES = itertools.count(1 + 60 * _WORKER, 3)
"""Each test its own three 127.0.41.x addresses, and each xdist worker its own range of them."""
PORT, ADMIN = 8000, 9999
FIXTURE_LEAVE_S = 0.1
LEAVE_S = 1.5
EVENTS = 20
MAINT_FLAG, DRAIN_FLAG = 0x01, 0x08
"""HAProxy's srv_admin_state bits: forced maintenance (SRV_ADMF_FMAINT), forced drain (SRV_ADMF_FDRAIN)."""


async def _backend(name: str, host: str) -> web.AppRunner:
    async def who(request: web.Request) -> web.Response:
        return web.Response(text=name)

    async def stream(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for i in range(EVENTS):
            await response.write(f"data: {name} {i}\n\n".encode())
            await asyncio.sleep(0.1)
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_get("/who", who)
    app.router.add_get("/stream", stream)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, host, PORT).start()
    return runner


def _wait_for_port(host: str, port: int, timeout_s: float = 20.0) -> None:
    def listening() -> bool:
        socket.create_connection((host, port), 0.2).close()
        return True

    waiting.until(listening, timeout_s=timeout_s, what=f"something listening on {host}:{port}", interval_s=0.1, tolerate=(OSError,))


@dataclass(frozen=True)
class Proxy:
    """HAProxy on ``host`` with its runtime API, in front of backends "old" and "new" (each test its own addresses)."""

    api: RuntimeApi
    host: str
    old: str
    new: str
    log: Path  # HAProxy's stderr: its log of abnormal requests

    @property
    def url(self) -> str:
        return f"http://{self.host}:{PORT}"


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[Proxy]:
    haproxy.binary()  # NB: fails with the install hint when Debian's haproxy is missing; make test installs it
    base = next(_ADDRESSES)
    host, old_host, new_host = (f"127.0.41.{base + i}" for i in range(3))
    old = await _backend("old", old_host)
    try:
        new = await _backend("new", new_host)
        try:
            argv = [sys.executable, "-m", "servecert", "proxy", "serve", "--host", host, "--port", str(PORT)]
            argv += ["--admin-port", str(ADMIN), "--config-dir", str(tmp_path), "--leave-seconds", str(FIXTURE_LEAVE_S)]
            log = tmp_path / "haproxy.stderr"
            with log.open("w") as stderr:
                process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)
            try:
                await asyncio.to_thread(_wait_for_port, host, ADMIN)
                yield Proxy(RuntimeApi(host, ADMIN), host, old_host, new_host, log)
            finally:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
        finally:
            await new.cleanup()
    finally:
        await old.cleanup()


async def _count(proxy: Proxy, session: ClientSession, n: int) -> collections.Counter[str]:
    seen: collections.Counter[str] = collections.Counter()
    for _ in range(n):
        async with session.get(f"{proxy.url}/who") as response:
            seen[await response.text()] += 1
    return seen


async def _stream(proxy: Proxy, session: ClientSession) -> list[str]:
    async with session.get(f"{proxy.url}/stream") as response:
        return [line.decode().strip() async for line in response.content if line.strip()]


async def test_weights_set_at_run_time_split_new_requests_exactly(proxy: Proxy) -> None:
    api = proxy.api
    old_w, new_w = weights.split(4, 0)
    await api.assign("fe1", proxy.old, PORT, old_w)
    await api.assign("fe2", proxy.new, PORT, new_w)
    async with ClientSession() as session:
        async with session.get(f"{proxy.url}{haproxy.HEALTH_PATH}") as response:
            assert response.status == 200
        assert await _count(proxy, session, 40) == {"old": 40}
        for old_ready, new_ready in ((3, 1), (2, 2), (1, 3)):
            old_w, new_w = weights.split(old_ready, new_ready)
            await api.set_weight("fe1", old_w)
            await api.set_weight("fe2", new_w)
            seen = await _count(proxy, session, 128)
            # NB: HAProxy's weighted round robin is deterministic: 128 requests split exactly by the weights.
            assert seen["new"] == round(128 * weights.share(old_w, new_w)), (old_ready, new_ready, seen)
    state = await api.servers()
    assert (state["fe1"].address, state["fe1"].weight) == (proxy.old, old_w)
    assert (state["fe2"].address, state["fe2"].port, state["fe2"].weight) == (proxy.new, PORT, new_w)


async def test_a_stream_in_flight_survives_weight_changes_and_drain(proxy: Proxy) -> None:
    api = proxy.api
    await api.assign("fe1", proxy.old, PORT, weights.MAX_WEIGHT)
    await api.assign("fe2", proxy.new, PORT, 0)
    async with ClientSession() as session:
        stream = asyncio.create_task(_stream(proxy, session))
        await asyncio.sleep(0.3)
        await api.set_weight("fe1", 0)
        await api.set_weight("fe2", weights.MAX_WEIGHT)
        await api.drain("fe1")
        assert await _count(proxy, session, 20) == {"new": 20}
        events = await stream
    assert events == [*(f"data: old {i}" for i in range(EVENTS)), "data: [DONE]"]
    assert (await api.servers())["fe1"].admin_state & DRAIN_FLAG
    await api.release("fe1")
    assert (await api.servers())["fe1"].admin_state & MAINT_FLAG


async def test_haproxys_own_503_is_logged_with_its_cause_and_a_served_request_is_not(proxy: Proxy) -> None:
    async with ClientSession() as session:
        async with session.get(f"{proxy.url}/who") as response:
            assert response.status == 503  # no slot has an address yet: HAProxy answers itself
        await proxy.api.assign("fe1", proxy.old, PORT, 1)
        assert await _count(proxy, session, 3) == {"old": 3}

    def logged() -> list[str]:
        return [line for line in proxy.log.read_text().splitlines() if '"GET /who' in line]

    lines = await asyncio.to_thread(waiting.until, logged, timeout_s=5.0, what="HAProxy's log line of the 503", interval_s=0.05)
    assert len(lines) == 1 and "frontends/<NOSRV>" in lines[0] and " 503 " in lines[0], lines  # the 200s are not logged


async def test_a_refused_command_names_itself(proxy: Proxy) -> None:
    with pytest.raises(RuntimeApiError, match="set weight frontends/fe9"):
        await proxy.api.set_weight("fe9", 10)


def test_a_missing_haproxy_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(haproxy.shutil, "which", lambda name, path=None: None)
    import argparse

    args = argparse.Namespace(host="127.0.41.250", port=PORT, admin_port=ADMIN, slots=2, config_dir=None, leave_seconds=0.0)
    assert haproxy.serve(args) == 2
    assert "apt-get install haproxy" in capsys.readouterr().err


async def test_the_operators_sync_fills_weights_drains_and_frees_slots(proxy: Proxy) -> None:
    """``servecert.reference_impl.operator.proxy_weights.sync``: what the rollout controller does to HAProxy each reconcile."""
    from servecert.reference_impl.operator import proxy_weights

    frontends = {
        "fe-old": proxy_weights.Frontend("fe-old", proxy.old, PORT),
        "fe-new": proxy_weights.Frontend("fe-new", proxy.new, PORT),
    }
    assert await proxy_weights.sync(proxy.api, frontends, {"fe-old": 192, "fe-new": 64}, set()) == {}
    servers = {(s.address, s.weight) for s in (await proxy.api.servers()).values() if s.operational}
    assert servers == {(proxy.old, 192), (proxy.new, 64)}
    async with ClientSession() as session:
        seen = await _count(proxy, session, 40)
        assert seen == {"old": 30, "new": 10}, seen
        # The old frontend retires: drained while a stream is on it, its open stream counted, then its slot freed.
        await proxy_weights.sync(proxy.api, frontends, {"fe-old": 256, "fe-new": 0}, set())
        streaming = asyncio.create_task(_stream(proxy, session))
        await asyncio.sleep(0.5)
        open_streams = await proxy_weights.sync(proxy.api, frontends, {"fe-new": 256}, {"fe-old"})
        assert open_streams == {"fe-old": 1}
        assert (await _count(proxy, session, 10)) == {"new": 10}
        lines = await streaming
        assert lines[-1] == "data: [DONE]" and len(lines) == EVENTS + 1, lines
        assert await proxy_weights.sync(proxy.api, frontends, {"fe-new": 256}, {"fe-old"}) == {"fe-old": 0}
    del frontends["fe-old"]  # the pod is gone
    await proxy_weights.sync(proxy.api, frontends, {"fe-new": 256}, set())
    in_service = [s for s in (await proxy.api.servers()).values() if not s.admin_state & MAINT_FLAG]
    assert [(s.address, s.weight) for s in in_service] == [(proxy.new, 256)]


async def _status(session: ClientSession, url: str) -> int:
    async with session.get(url) as answer:
        await answer.read()
        return answer.status


async def test_health_fails_until_a_slot_is_weighted(proxy: Proxy) -> None:
    """A replica its controller has not configured is not healthy, so its pod is not Ready and its Service skips it."""
    async with ClientSession() as session:
        assert await _status(session, f"{proxy.url}{haproxy.HEALTH_PATH}") == 503
        await proxy.api.assign(haproxy.slot_name(1), proxy.old, PORT, 10)
        assert await _status(session, f"{proxy.url}{haproxy.HEALTH_PATH}") == 200


async def test_on_sigterm_it_serves_on_for_the_leave_then_finishes_its_streams_and_exits(tmp_path: Path) -> None:
    """Its Service drops a terminating replica a moment after the deletion: until then new connections still arrive."""
    host, backend_host = "127.0.41.251", "127.0.41.252"
    backend = await _backend("old", backend_host)
    argv = [sys.executable, "-m", "servecert", "proxy", "serve", "--host", host, "--port", str(PORT), "--admin-port", str(ADMIN)]
    argv += ["--config-dir", str(tmp_path), "--leave-seconds", str(LEAVE_S)]
    process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        await asyncio.to_thread(_wait_for_port, host, ADMIN)
        await RuntimeApi(host, ADMIN).assign(haproxy.slot_name(1), backend_host, PORT, 10)
        async with ClientSession() as session:
            async with session.get(f"http://{host}:{PORT}/stream") as streaming:
                process.terminate()
                await asyncio.sleep(LEAVE_S / 2)
                assert await _status(session, f"http://{host}:{PORT}/who") == 200, "a new request during the leave is served"
                body = await streaming.text()
            assert body.count("data: ") == EVENTS + 1, "the stream in flight at SIGTERM finished whole"
        code = await asyncio.to_thread(process.wait, 10)
        assert code == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        await backend.cleanup()
