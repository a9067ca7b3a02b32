"""Fault injection on a fake engine: injected errors, crashes, stalls, slow start-up, cut streams.

Most tests run the engine in-process (``faults=Faults(...)`` in its config); the exit status of a
crashed ``servecert engine serve`` needs a subprocess. Every wait is bounded in count and time,
and durations are only ever checked from below.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from servecert.fakes.engine import Engine
from servecert.fakes.faults import Faults
from servecert.fakes.host import EngineHost
from servecert.protocol import waiting
from tests.conftest import config, serve_process

COMPLETION = {"model": "m", "prompt": "fault injection test prompt", "max_tokens": 4, "ignore_eos": True}
CHAT = {"model": "m", "messages": [{"role": "user", "content": "fault injection"}], "max_tokens": 4, "ignore_eos": True}
POLL_SECONDS = 5.0
POLL_INTERVAL = 0.02
CLOCK_SLACK = 0.005  # an event-loop timer may fire this much before its nominal time


@pytest.fixture
async def fresh() -> AsyncIterator[aiohttp.ClientSession]:
    """A session that opens a new connection for every request (no keep-alive to a dead server)."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session:
        yield session


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, Any]:
    async with http.post(url, json=body) as resp:
        return resp.status, await resp.json()


async def records(http: aiohttp.ClientSession, engine: Engine) -> list[dict[str, Any]]:
    async with http.get(engine.url + "/groundtruth") as resp:
        assert resp.status == 200
        return list((await resp.json())["records"])


async def refused(http: aiohttp.ClientSession, url: str) -> bool:
    try:
        async with http.get(url + "/health") as resp:
            await resp.read()
            return False
    except aiohttp.ClientConnectorError:
        return True


async def attempt(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> int | None:
    """The status of a POST, or None when the connection failed (refused, reset, closed mid-answer)."""
    try:
        async with http.post(url, json=body) as resp:
            await resp.read()
            return resp.status
    except aiohttp.ClientError:
        return None


async def read_sse(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, list[bytes], Exception | None]:
    """POST a streaming request with aiohttp; the status, the ``data:`` lines read, and how reading ended.

    NB: when the connection is cut, aiohttp's StreamReader raises the payload error on the next read
    even if complete lines are still buffered, so a cut stream may show fewer lines here than were
    sent; count what is on the wire with ``raw_sse``.
    """
    lines: list[bytes] = []
    async with http.post(url, json={**body, "stream": True}) as resp:
        status = resp.status
        try:
            for _ in range(10_000):
                line = await asyncio.wait_for(resp.content.readline(), timeout=POLL_SECONDS)
                if not line:
                    return status, lines, None
                if line.startswith(b"data: "):
                    lines.append(line.strip())
        except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError) as exc:
            return status, lines, exc
    raise AssertionError("stream did not end")


async def raw_sse(url: str, path: str, body: dict[str, Any]) -> tuple[int, list[bytes], bool]:
    """POST a streaming request over a bare socket and read to EOF: the status, the ``data:`` lines,
    and whether the chunked body was properly terminated (False: the connection was cut)."""
    hostport = url.removeprefix("http://")
    address, port = hostport.rsplit(":", 1)
    payload = json.dumps({**body, "stream": True}).encode()
    reader, writer = await asyncio.open_connection(address, int(port))
    try:
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload
        )
        await writer.drain()
        data = b""
        with contextlib.suppress(ConnectionResetError):
            for _ in range(100_000):
                piece = await asyncio.wait_for(reader.read(65536), timeout=POLL_SECONDS)
                if not piece:
                    break
                data += piece
            else:
                raise AssertionError("stream did not end")
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"transfer-encoding: chunked" in head.lower(), head
    content, complete = b"", False
    while rest:
        size_line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            complete = True
            break
        if len(rest) < size + 2:
            content += rest[:size]
            break
        content, rest = content + rest[:size], rest[size + 2 :]
    lines = [line.strip() for line in content.split(b"\n") if line.startswith(b"data: ")]
    return status, lines, complete


# -- injected errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(("route", "body"), [("/v1/completions", COMPLETION), ("/v1/chat/completions", CHAT)],
                         ids=["completions", "chat"])
async def test_an_error_rate_of_one_fails_every_request_with_an_injected_500_and_records_it(
    host: EngineHost, http: aiohttp.ClientSession, route: str, body: dict[str, Any]
) -> None:
    engine = await host.add(config(faults=Faults(error_rate=1.0)))
    for _ in range(3):
        status, answer = await post(http, engine.url + route, body)
        assert status == 500
        error = answer["error"]
        assert error["code"] == "injected_error"
        assert error["message"]
        assert set(error) == {"message", "type", "param", "code"}
    log = await records(http, engine)
    assert [r["outcome"] for r in log] == ["injected_error"] * 3
    assert all(r["error"] for r in log)
    assert len({r["request_id"] for r in log}) == 3


async def test_an_injected_error_is_answered_before_a_stream_starts(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(faults=Faults(error_rate=1.0)))
    status, answer = await post(http, engine.url + "/v1/completions", {**COMPLETION, "stream": True})
    assert status == 500
    assert answer["error"]["code"] == "injected_error"


async def test_a_partial_error_rate_is_the_same_on_every_run_for_the_same_seed(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    async def pattern() -> list[int]:
        engine = await host.add(config(faults=Faults(error_rate=0.5, seed=7)))
        return [(await post(http, engine.url + "/v1/completions", COMPLETION))[0] for _ in range(20)]

    first = await pattern()
    assert set(first) == {200, 500}
    assert await pattern() == first


# -- crashes -------------------------------------------------------------------------------------
async def test_crash_after_two_fails_the_second_request_and_the_engine_stops_answering(
    host: EngineHost, fresh: aiohttp.ClientSession
) -> None:
    engine = await host.add(config(faults=Faults(crash_after=2)))
    assert await attempt(fresh, engine.url + "/v1/completions", COMPLETION) == 200
    assert await attempt(fresh, engine.url + "/v1/completions", COMPLETION) in (503, None)  # None: cut with the engine
    assert engine.crashed
    await waiting.until_async(
        lambda: refused(fresh, engine.url), timeout_s=POLL_SECONDS, what="the crashed engine refusing connections", interval_s=POLL_INTERVAL
    )
    with pytest.raises(aiohttp.ClientConnectorError):
        await fresh.get(engine.url + "/health")
    with pytest.raises(aiohttp.ClientConnectorError):
        await fresh.post(engine.url + "/v1/completions", json=COMPLETION)
    assert [r.outcome for r in engine.log.since(0)] == ["ok", "engine_unavailable"]


async def test_a_crash_cuts_every_request_in_flight(host: EngineHost, fresh: aiohttp.ClientSession) -> None:
    engine = await host.add(config(faults=Faults(crash_after=2), time_scale=1.0))
    slow = {**COMPLETION, "max_tokens": 4000, "prompt": "a long running request"}
    first = asyncio.ensure_future(read_sse(fresh, engine.url + "/v1/completions", slow))
    await waiting.until_async(lambda: engine.running, timeout_s=POLL_SECONDS, what="the first request to start", interval_s=POLL_INTERVAL)
    assert await attempt(fresh, engine.url + "/v1/completions", COMPLETION) in (503, None)
    _, lines, ended = await asyncio.wait_for(first, POLL_SECONDS)
    assert b"data: [DONE]" not in lines
    assert ended is not None
    assert sorted(r.outcome for r in engine.log.since(0)) == ["engine_unavailable", "engine_unavailable"]


def test_a_served_engine_that_crashes_exits_with_status_3() -> None:
    with serve_process("--model", "m", "--port", "0", "--time-scale", "0", "--crash-after", "1") as served:
        url = served.urls[0]
        request = urllib.request.Request(
            url + "/v1/completions", data=json.dumps(COMPLETION).encode(), headers={"Content-Type": "application/json"}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with pytest.raises((urllib.error.HTTPError, urllib.error.URLError, ConnectionError)) as caught:
            opener.open(request, timeout=10).read()
        if isinstance(caught.value, urllib.error.HTTPError):
            assert caught.value.code == 503
            caught.value.close()
        assert served.proc.wait(timeout=15) == 3
        assert served.proc.stderr is not None
        assert "crashed" in served.proc.stderr.read()


# -- stalls --------------------------------------------------------------------------------------
async def test_a_stall_delays_a_request_but_it_still_completes(host: EngineHost, http: aiohttp.ClientSession) -> None:
    stall = 0.3
    engine = await host.add(config(faults=Faults(stall_after=1, stall_seconds=stall)))
    started = time.monotonic()
    status, answer = await post(http, engine.url + "/v1/completions", COMPLETION)
    elapsed = time.monotonic() - started
    assert status == 200, answer
    assert answer["usage"]["completion_tokens"] == 4
    assert elapsed >= stall - CLOCK_SLACK
    assert [r["outcome"] for r in await records(http, engine)] == ["ok"]


async def test_a_stall_starts_with_the_request_that_reaches_stall_after_and_is_not_repeated(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    stall = 0.2
    engine = await host.add(config(faults=Faults(stall_after=2, stall_seconds=stall)))
    assert (await post(http, engine.url + "/v1/completions", COMPLETION))[0] == 200
    assert not engine.faults.stalled
    started = time.monotonic()
    assert (await post(http, engine.url + "/v1/completions", COMPLETION))[0] == 200
    assert time.monotonic() - started >= stall - CLOCK_SLACK
    assert engine.faults.stalled
    for _ in range(2):
        assert (await post(http, engine.url + "/v1/completions", COMPLETION))[0] == 200
        assert not engine._stall_pending  # no second stall was queued
    assert engine.faults.accepted == 4


# -- slow start-up -------------------------------------------------------------------------------
async def test_a_loading_engine_answers_503_until_it_is_ready(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(faults=Faults(startup_seconds=0.5)))
    async with http.get(engine.url + "/health") as resp:
        assert resp.status == 503
        assert (await resp.json())["status"] == "loading"
    status, answer = await post(http, engine.url + "/v1/completions", COMPLETION)
    assert status == 503
    assert answer["error"]["code"] == "engine_unavailable"
    assert answer["error"]["message"]

    async def healthy() -> bool:
        async with http.get(engine.url + "/health") as resp:
            return resp.status == 200

    await waiting.until_async(healthy, timeout_s=POLL_SECONDS, what="the engine ready (GET /health 200)", interval_s=POLL_INTERVAL)
    status, answer = await post(http, engine.url + "/v1/completions", COMPLETION)
    assert status == 200, answer
    assert [r["outcome"] for r in await records(http, engine)] == ["engine_unavailable", "ok"]


# -- streams cut short ---------------------------------------------------------------------------
KILL_CASES = [("/v1/completions", COMPLETION, 0), ("/v1/chat/completions", CHAT, 1)]  # chat opens with a role chunk


@pytest.mark.parametrize(("route", "body", "head"), KILL_CASES, ids=["completions", "chat"])
async def test_kill_stream_after_three_sends_exactly_three_tokens_and_no_done(
    host: EngineHost, http: aiohttp.ClientSession, route: str, body: dict[str, Any], head: int
) -> None:
    engine = await host.add(config(faults=Faults(kill_stream_after=3)))
    status, lines, complete = await raw_sse(engine.url, route, {**body, "max_tokens": 10})
    assert status == 200
    assert not complete, "the chunked body was terminated: the stream was not cut"
    assert b"data: [DONE]" not in lines
    assert len(lines) == head + 3, lines
    for line in lines[head:]:
        choice = json.loads(line[len(b"data: ") :])["choices"][0]
        assert (choice["delta"]["content"] if head else choice["text"]).strip()
        assert choice["finish_reason"] is None
    log = await records(http, engine)
    assert [r["outcome"] for r in log] == ["aborted"]
    assert log[0]["completion_tokens"] >= 3
    async with http.get(engine.url + "/health") as resp:
        assert resp.status == 200


@pytest.mark.parametrize(("route", "body", "head"), KILL_CASES, ids=["completions", "chat"])
async def test_an_aiohttp_client_sees_a_killed_stream_as_a_payload_error(
    host: EngineHost, http: aiohttp.ClientSession, route: str, body: dict[str, Any], head: int
) -> None:
    engine = await host.add(config(faults=Faults(kill_stream_after=3)))
    status, lines, ended = await read_sse(http, engine.url + route, {**body, "max_tokens": 10})
    assert status == 200
    assert isinstance(ended, aiohttp.ClientPayloadError | aiohttp.ClientConnectionError), ended
    assert b"data: [DONE]" not in lines
    assert len(lines) <= head + 3  # aiohttp may drop lines still buffered when the cut arrives
    assert [r["outcome"] for r in await records(http, engine)] == ["aborted"]


async def test_a_stream_cut_before_its_last_token_is_recorded_as_aborted(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(faults=Faults(kill_stream_after=3)))
    _, lines, complete = await raw_sse(engine.url, "/v1/completions", {**COMPLETION, "max_tokens": 4})
    assert len(lines) == 3 and not complete
    assert [r["outcome"] for r in await records(http, engine)] == ["aborted"]


async def test_kill_stream_after_leaves_non_streamed_requests_whole(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(faults=Faults(kill_stream_after=3)))
    status, answer = await post(http, engine.url + "/v1/completions", {**COMPLETION, "max_tokens": 10})
    assert status == 200
    assert answer["usage"]["completion_tokens"] == 10


# -- faults changed at run time ------------------------------------------------------------------
async def test_admin_faults_turns_errors_on_and_off_at_run_time(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config())
    assert (await post(http, engine.url + "/v1/completions", COMPLETION))[0] == 200
    status, settings = await post(http, engine.url + "/admin/faults", {"error_rate": 1})
    assert status == 200
    assert settings["error_rate"] == 1.0
    assert settings["crash_after"] == 0
    status, answer = await post(http, engine.url + "/v1/completions", COMPLETION)
    assert status == 500 and answer["error"]["code"] == "injected_error"
    status, settings = await post(http, engine.url + "/admin/faults", {"error_rate": 0})
    assert status == 200 and settings["error_rate"] == 0.0
    assert (await post(http, engine.url + "/v1/completions", COMPLETION))[0] == 200
    assert [r["outcome"] for r in await records(http, engine)] == ["ok", "injected_error", "ok"]


async def test_admin_faults_can_cut_streams_at_run_time(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config())
    status, _ = await post(http, engine.url + "/admin/faults", {"kill_stream_after": 2})
    assert status == 200
    _, lines, complete = await raw_sse(engine.url, "/v1/completions", {**COMPLETION, "max_tokens": 8})
    assert len(lines) == 2 and not complete
    assert [r["outcome"] for r in await records(http, engine)] == ["aborted"]


@pytest.mark.parametrize(
    "changes",
    [
        {"no_such_fault": 1},
        {"error_rate": 2},
        {"error_rate": -0.5},
        {"error_rate": "often"},
        {"error_rate": None},
        {"crash_after": -1},
        {"crash_after": [1]},
        {"stall_seconds": "nan"},
    ],
    ids=["unknown-field", "rate-over-one", "negative-rate", "rate-as-word", "rate-null", "negative-crash-after",
         "crash-after-as-list", "nan-stall"],
)
async def test_admin_faults_refuses_bad_settings_with_400_and_keeps_the_old_ones(
    host: EngineHost, http: aiohttp.ClientSession, changes: dict[str, Any]
) -> None:
    engine = await host.add(config(faults=Faults(error_rate=0.0, kill_stream_after=5)))
    status, answer = await post(http, engine.url + "/admin/faults", changes)
    assert status == 400, answer
    assert answer["error"]["message"]
    assert engine.faults.faults == Faults(error_rate=0.0, kill_stream_after=5)
    assert (await post(http, engine.url + "/v1/completions", COMPLETION))[0] == 200


async def test_admin_faults_refuses_a_body_that_is_not_an_object(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config())
    async with http.post(engine.url + "/admin/faults", data=b"[1, 2]") as resp:
        assert resp.status == 422
        assert (await resp.json())["error"]["message"]
    async with http.post(engine.url + "/admin/faults", data=b"{not json") as resp:
        assert resp.status == 400
