"""Connection hygiene of the suite's HTTP servers: the fake engines and the reference frontend.

A client that never finishes its request must not hold a connection for ever, a body must not be
read (let alone tokenized) past a size limit, and a client that goes away is the client's business,
not an error with a traceback. aiohttp has the pieces but not a public server's defaults: a
connection that never sends a complete request waits for the keep-alive timeout (an hour in
3.14), a body is read for as long as it trickles in, and a write to a closed transport raises in
the handler, which aiohttp logs with its traceback.

Data flow: ``start_runner`` makes the ``AppRunner`` (keep-alive timeout from ``Limits``) and a
sweeper task that closes each connection which has not delivered a complete request header
within ``header_timeout_s`` of its opening (the ``guard`` middleware marks a connection once a
request reaches it). ``guard``, inside the app's error middleware, refuses a body larger than
``max_body_bytes`` from its Content-Length before reading it (413), reads the body within
``body_timeout_s`` (408, connection closed), refuses a Content-Type that is not JSON on the
OpenAI routes (415; an absent one is read as JSON, as vLLM's server does), and turns a disconnect
of the client into one info line.

The numbers are the suite's, not any seed's: a header timeout of 10 s (Go's common
``ReadHeaderTimeout``), a body timeout of 30 s, a keep-alive of 75 s (longer than the 15 s an
aiohttp client keeps an idle connection, so a reused connection is never closed under its
client), 8 MiB of body (a full 128k-token prompt as token ids is about 1 MiB).
Every one is a ``SERVECERT_HTTP_*`` variable, so a slow network can be given more.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from servecert.protocol.openai import ApiError

log = logging.getLogger("servecert.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
JSON_ROUTES = ("/v1/completions", "/v1/chat/completions")


@dataclass(frozen=True)
class Limits:
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    keepalive_s: float = 75.0
    max_body_bytes: int = 8 * 1024 * 1024

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        """Read ``SERVECERT_HTTP_HEADER_TIMEOUT_S`` and friends; raises ValueError naming a bad one."""
        values = os.environ if env is None else env
        defaults = cls()
        settings: dict[str, Any] = {}
        for name, kind in (("header_timeout_s", float), ("body_timeout_s", float), ("keepalive_s", float), ("max_body_bytes", int)):
            key = "SERVECERT_HTTP_" + name.upper()
            raw = values.get(key)
            if not raw:
                continue
            try:
                value = kind(raw)
            except ValueError:
                raise ValueError(f"{key} must be a positive {kind.__name__}, got {raw!r}") from None
            if not value > 0:
                raise ValueError(f"{key} must be a positive {kind.__name__}, got {raw!r}")
            settings[name] = value
        return cls(**{**defaults.__dict__, **settings})


LIMITS = web.AppKey("connection_limits", Limits)
_STARTED = web.AppKey("connections_with_a_request", set)


def guarded_app(middlewares: list[Any], limits: Limits | None = None) -> web.Application:
    """A ``web.Application`` with ``guard`` innermost of ``middlewares`` and its limits (from the environment unless given)."""
    limits = limits or Limits.from_env()
    app = web.Application(middlewares=[*middlewares, guard], client_max_size=limits.max_body_bytes)
    app[LIMITS] = limits
    app[_STARTED] = set()
    return app


def _client_gone(request: web.Request) -> bool:
    transport = request.transport
    return transport is None or transport.is_closing()


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    limits = request.app[LIMITS]
    request.app[_STARTED].add(request.protocol)
    if request.method == "POST":
        try:
            _check_content_type(request)
            await _read_body(request, limits)
        except ApiError as err:
            return await _refuse(request, err)
    try:
        return await handler(request)
    except ConnectionResetError as exc:  # NB: aiohttp's ClientConnectionResetError is one
        if not _client_gone(request):
            raise
        log.info("client %s went away during %s %s: %s", request.remote, request.method, request.path, exc)
        return web.Response(status=499)


async def _refuse(request: web.Request, err: ApiError) -> web.StreamResponse:
    resp = web.json_response(err.body(), status=err.status)
    if err.status == 413:
        resp.force_close()  # NB: aiohttp still reads (and drops) the rest for a while, so the client sees the answer
    elif err.status in (408, 499):  # the rest of the body is not worth waiting for: answer, then close
        await resp.prepare(request)
        await resp.write_eof()
        request.protocol.force_close()
    return resp


def _check_content_type(request: web.Request) -> None:
    if request.path not in JSON_ROUTES or "Content-Type" not in request.headers:
        return
    kind = request.content_type
    if kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json")):
        return
    raise ApiError(415, f"Content-Type must be application/json, got {kind!r}", code="unsupported_media_type")


async def _read_body(request: web.Request, limits: Limits) -> None:
    length = request.content_length
    if length is not None and length > limits.max_body_bytes:
        raise ApiError(413, f"request body of {length} bytes is over the limit of {limits.max_body_bytes}", code="body_too_large")
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            await request.read()
    except TimeoutError:
        log.info("client %s sent no whole body in %g s: %s %s", request.remote, limits.body_timeout_s, request.method, request.path)
        raise ApiError(408, f"request body not received within {limits.body_timeout_s:g} s", code="body_timeout") from None
    except web.HTTPRequestEntityTooLarge:
        raise ApiError(413, f"request body is over the limit of {limits.max_body_bytes} bytes", code="body_too_large") from None
    except ConnectionResetError as exc:
        log.info("client %s went away while sending %s %s: %s", request.remote, request.method, request.path, exc)
        raise ApiError(499, "client went away", code="client_closed") from None


async def start_runner(app: web.Application, **runner_args: Any) -> web.AppRunner:
    """Set up an ``AppRunner`` for ``app`` (made by ``guarded_app``) with its keep-alive and header timeouts.

    The caller adds its sites; ``runner.cleanup()`` ends the sweeper with the app.
    """
    limits = app[LIMITS]
    sweeper: list[asyncio.Task[None]] = []

    async def _stop_sweeper(_: web.Application) -> None:
        for task in sweeper:
            task.cancel()

    app.on_cleanup.append(_stop_sweeper)
    runner = web.AppRunner(app, keepalive_timeout=limits.keepalive_s, **runner_args)
    await runner.setup()
    assert runner.server is not None
    sweeper.append(asyncio.get_running_loop().create_task(_sweep(runner.server, app[_STARTED], limits.header_timeout_s)))
    return runner


async def _sweep(server: web.Server, started: set[RequestHandler], timeout_s: float) -> None:
    """Close connections that delivered no complete request header within ``timeout_s`` of opening."""
    loop = asyncio.get_running_loop()
    opened: dict[RequestHandler, float] = {}
    period = min(1.0, timeout_s / 4)
    while True:
        await asyncio.sleep(period)
        now = loop.time()
        connections = set(server.connections)
        started &= connections
        opened = {c: opened.get(c, now) for c in connections if c not in started}
        for connection, since in opened.items():
            if now - since >= timeout_s:
                log.info("closed a connection that sent no complete request header in %g s", timeout_s)
                connection.force_close()
