"""HTTP face of one fake engine (aiohttp): OpenAI routes, the runtime API, ground truth, streams.

``create_app(engine)`` returns the application; the engine's scheduler loop starts and stops with
it (a ``cleanup_ctx``). Routes:

- OpenAI: ``POST /v1/completions``, ``POST /v1/chat/completions`` (SSE, one token per
  ``data:`` chunk, ending ``data: [DONE]``), ``GET /v1/models``, ``GET /health``,
  ``GET /metrics`` (Prometheus, vLLM names).
- Runtime API for frontends (see ``servecert.protocol.engine_api``): ``POST /engine/generate``,
  ``POST /engine/prefill``, ``POST /engine/kv/pull``, ``GET /engine/metadata``; and
  ``GET /engine/kv/handle?key=`` for a decode engine behind a vLLM or SGLang router, whose
  handshake (``servecert.fakes.pd_wire``, ``EngineConfig.pd_protocol``) the OpenAI routes then speak.
- Ground truth and streams: ``GET /groundtruth?since=N``, ``GET /events/kv?since=N`` and
  ``GET /events/fpm`` (SSE of JSON records), ``POST /admin/faults``.

A decode request's KV is pulled from the prefill engine named in its handle (``servecert.fakes.kv_pull``)
before it is queued; the transfer, priced by the fake network, lands in the ground-truth record.
Every request the engine refuses is recorded too, with the refusal's error code as its outcome.

In flight: a middleware counts the requests of the work routes (``COUNTED_PATHS``) from arrival
to their last byte, and ``in_flight(app)`` adds the KV handles a prefill engine pinned in the last
``PULL_DUE_S`` for a pull still to come. ``servecert engine serve`` drains on SIGTERM until that
is 0 (``servecert.fakes.host``). Event streams and ground-truth polls never count: a subscriber stays for
hours, and a drained engine must still close.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
from aiohttp import web

from servecert.fakes import groundtruth, kv_pull, pd_wire
from servecert.fakes.engine import Engine, EngineError, Seq
from servecert.protocol import connection_guard, engine_api, waiting
from servecert.protocol import openai as openai_api
from servecert.protocol.engine_api import EngineRequest

ENGINE = web.AppKey("engine", Engine)
SESSION = web.AppKey("session", aiohttp.ClientSession)
SUBSCRIBERS = web.AppKey("subscribers", set["asyncio.Queue[dict[str, Any] | None]"])
RENDEZVOUS = web.AppKey("rendezvous", pd_wire.Rendezvous)
ENGINE_HEADER = "x-servecert-engine"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
MAX_SUBSCRIPTION_SECONDS = 6 * 3600.0
COUNTED_PATHS = frozenset({"/v1/completions", "/v1/chat/completions", "/engine/generate", "/engine/prefill", "/engine/kv/pull"})
"""Routes whose requests are work in flight; a draining engine waits for them."""
PULL_DUE_S = 10.0
"""A prefilled KV handle younger than this counts as in flight: its decode engine's pull may still come."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class InFlight:
    """Requests on ``COUNTED_PATHS`` being handled now: a stream counts until its last byte is written."""

    def __init__(self) -> None:
        self.requests = 0


IN_FLIGHT = web.AppKey("in_flight", InFlight)


def create_app(engine: Engine, limits: connection_guard.Limits | None = None) -> web.Application:
    app = connection_guard.guarded_app([_count, _errors], limits)
    app[ENGINE] = engine
    app[IN_FLIGHT] = InFlight()
    app[SUBSCRIBERS] = set()
    app[RENDEZVOUS] = pd_wire.Rendezvous()
    app.cleanup_ctx.append(_lifecycle)
    app.on_shutdown.append(_end_subscriptions)
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/metrics", prometheus)
    app.router.add_post("/engine/generate", engine_generate)
    app.router.add_post("/engine/prefill", engine_prefill)
    app.router.add_post("/engine/kv/pull", engine_kv_pull)
    app.router.add_get("/engine/metadata", engine_metadata)
    app.router.add_get("/engine/kv/handle", engine_kv_handle)
    app.router.add_get("/groundtruth", ground_truth)
    app.router.add_get("/events/kv", kv_events)
    app.router.add_get("/events/fpm", fpm_events)
    app.router.add_post("/admin/faults", admin_faults)
    return app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    engine = app[ENGINE]
    app[SESSION] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
    await engine.start()
    yield
    await engine.stop()
    await app[SESSION].close()


async def _end_subscriptions(app: web.Application) -> None:
    """Shutting down: end every event stream now instead of holding shutdown for its grace period."""
    for queue in app[SUBSCRIBERS]:
        with contextlib.suppress(asyncio.QueueFull):
            queue.put_nowait(None)


def in_flight(app: web.Application) -> int:
    """Work the engine of ``app`` still owes: counted requests, plus fresh KV handles awaiting their pull."""
    # NB: a prefilled request is done on the prefill engine before its decode engine pulls the KV;
    # closing in between would fail that pull, so a handle counts while its pull is still due. One
    # never pulled (the frontend found no decode worker) would otherwise hold a drain for its whole TTL.
    return app[IN_FLIGHT].requests + app[ENGINE].handles_pinned_within(PULL_DUE_S)


@web.middleware
async def _count(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path not in COUNTED_PATHS:
        return await handler(request)
    counter = request.app[IN_FLIGHT]
    counter.requests += 1
    try:
        return await handler(request)
    finally:
        counter.requests -= 1


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except openai_api.ApiError as err:
        return web.json_response(err.body(), status=err.status)
    except EngineError as err:
        return web.json_response(_engine_error_body(err), status=err.status)
    except web.HTTPException as exc:  # unknown route, wrong method, body too large
        if exc.status < 400:
            raise
        return web.json_response(openai_api.http_error(exc.status, exc.reason, request.method, request.path).body(), status=exc.status)


def _engine_error_body(err: EngineError) -> dict[str, Any]:
    return openai_api.ApiError(err.status, str(err), code=err.code).body()


# -- OpenAI routes ------------------------------------------------------------------------------
async def health(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    if engine.ready:
        return web.json_response({"status": "ok", "engine_id": engine.engine_id})
    return web.json_response({"status": "loading" if not engine.crashed else "crashed"}, status=503)


async def models(request: web.Request) -> web.Response:
    cfg = request.app[ENGINE].config
    model = {"id": cfg.model, "object": "model", "created": 0, "owned_by": "servecert", "max_model_len": cfg.context_length}
    return web.json_response({"object": "list", "data": [model]})


async def completions(request: web.Request) -> web.StreamResponse:
    return await _openai(request, openai_api.parse_completion)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _openai(request, openai_api.parse_chat)


async def _openai(request: web.Request, parse: openai_api.Parse) -> web.StreamResponse:
    engine = request.app[ENGINE]
    body = openai_api.load_json(await request.read())
    req = parse(body, engine.config.model, engine.config.context_length, engine.tokenizer)
    leg = pd_wire.leg_of(body, engine.config.pd_protocol, engine.config.role)
    prefix = "chatcmpl-" if req.chat else "cmpl-"
    ereq = EngineRequest(
        request_id=prefix + uuid.uuid4().hex,
        model=req.model,
        token_ids=tuple(req.token_ids),
        sampling=req.sampling,
        mdc_checksum=None,
        protocol_version=engine.config.protocol_version,
        stream=req.stream,
    )
    if leg is not None and leg.kind == pd_wire.PREFILL:
        return await _prefill_leg(request, req, ereq, leg)
    handle, transfer = None, None
    if leg is not None:
        handle, transfer = await _pull(request, ereq, leg)
    seq = _admit(engine, ereq, prefill=False, preloaded=handle, transfer=transfer)
    if not req.stream:
        tokens = await _collect(engine, seq)
        use = openai_api.usage(seq.prompt_len, seq.generated, seq.record.cached_tokens)
        reason = seq.stream.finish_reason or "length"
        body_out = openai_api.full_body(req, ereq.request_id, engine.tokenizer.decode(tokens), reason, use)
        return web.json_response(body_out, headers={ENGINE_HEADER: engine.engine_id})
    writer = openai_api.ChunkWriter(ereq.request_id, req.model, req.chat, engine.tokenizer)
    resp = web.StreamResponse(headers={**SSE_HEADERS, ENGINE_HEADER: engine.engine_id})
    await resp.prepare(request)
    pending = writer.first()
    done = await _pump(request, resp, engine, seq, writer.tokens, pending)
    if not done:
        return resp
    if seq.stream.error is not None:
        err = openai_api.ApiError(seq.stream.error.status, str(seq.stream.error), code=seq.stream.error.code)
        await resp.write(openai_api.ChunkWriter.error(err))
    else:
        final_usage = openai_api.usage(seq.prompt_len, seq.generated, seq.record.cached_tokens) if req.include_usage else None
        await resp.write(writer.final(seq.stream.finish_reason or "length", final_usage))
    await resp.write_eof()
    return resp


async def _prefill_leg(request: web.Request, req: openai_api.OpenAIRequest, ereq: EngineRequest, leg: pd_wire.Leg) -> web.Response:
    """A P/D router's prefill leg: compute and pin the prompt's KV, answer with its first token (never streamed)."""
    engine = request.app[ENGINE]
    seq = _admit(engine, ereq, prefill=True)
    await _collect(engine, seq)
    handle = seq.stream.handle
    if handle is None:
        raise EngineError(engine_api.ENGINE_UNAVAILABLE, "prefill ended without a KV handle")
    request.app[RENDEZVOUS].pin(pd_wire.pin_key(leg, handle), handle)
    use = openai_api.usage(seq.prompt_len, 1, seq.record.cached_tokens)
    body = openai_api.full_body(req, ereq.request_id, req.tokenizer.decode([handle.first_token]), "length", use)
    params = pd_wire.prefill_params(engine.config.pd_protocol, handle, engine.config.block_size, engine.config.tensor_parallel_size)
    if params is not None:
        body["kv_transfer_params"] = params
    return web.json_response(body, headers={ENGINE_HEADER: engine.engine_id})


async def _pull(
    request: web.Request, req: EngineRequest, leg: pd_wire.Leg | None, handle: engine_api.KvHandle | None = None
) -> tuple[engine_api.KvHandle, groundtruth.TransferRecord]:
    """A decode request's KV: from ``handle``, or the one a P/D router's ``leg`` names; refusals are recorded."""
    engine = request.app[ENGINE]
    try:
        engine.check(req, prefill=False)
        if handle is None:
            assert leg is not None
            handle = await pd_wire.fetch_handle(request.app[SESSION], leg)
        return handle, await kv_pull.pull(engine, request.app[SESSION], handle)
    except EngineError as err:
        _refuse(engine, req, err)
        raise


async def _collect(engine: Engine, seq: Seq) -> list[int]:
    tokens: list[int] = []
    try:
        while not seq.stream.done or seq.stream.tokens:
            tokens.extend(await seq.stream.next_tokens())
    except asyncio.CancelledError:
        engine.abort(seq)
        raise
    if seq.stream.error is not None:
        raise seq.stream.error
    return tokens


async def _pump(
    request: web.Request,
    resp: web.StreamResponse,
    engine: Engine,
    seq: Seq,
    encode: Callable[[list[int]], bytes],
    pending: bytes,
) -> bool:
    """Write tokens as they come; False when the stream was cut (client gone, crash, injected kill)."""
    kill_after = engine.faults.faults.kill_stream_after
    sent = 0
    try:
        while True:
            tokens = await seq.stream.next_tokens()
            if kill_after and sent + len(tokens) >= kill_after:
                await resp.write(pending + encode(tokens[: kill_after - sent]))
                engine.cut(seq, delivered=kill_after, reason="stream killed by fault injection")
                await _cut(request)
                return False
            if tokens or pending:
                await resp.write(pending + encode(tokens))
                pending = b""
                sent += len(tokens)
            if seq.stream.done and not seq.stream.tokens:
                break
    except ConnectionResetError:  # the client went away
        engine.abort(seq)
        return False
    except asyncio.CancelledError:
        engine.abort(seq)
        raise
    if engine.crashed:
        await _cut(request)
        return False
    return True


async def _cut(request: web.Request) -> None:
    """Drop the connection without a proper end, as a dying process or a killed stream does.

    What was written before the cut is flushed first (bounded wait): a killed stream delivers
    the tokens it produced, then stops without ``[DONE]``.
    """
    transport = request.transport
    if transport is None:
        return
    for _ in range(200):
        if transport.is_closing() or transport.get_write_buffer_size() == 0:
            break
        await asyncio.sleep(0.005)
    transport.abort()


def _admit(
    engine: Engine,
    req: EngineRequest,
    prefill: bool,
    preloaded: engine_api.KvHandle | None = None,
    transfer: groundtruth.TransferRecord | None = None,
) -> Seq:
    record = engine.new_record(req)
    record.transfer = transfer
    try:
        engine.check(req, prefill)
        return engine.admit(req, record, preloaded)
    except EngineError as err:
        if record.seq == 0:  # not yet logged by admit
            record.outcome, record.error, record.finished_at = err.code, str(err), time.time()
            engine.log.append(record)
        raise


# -- runtime API for frontends ------------------------------------------------------------------------
def _engine_request(body: dict[str, Any]) -> EngineRequest:
    try:
        return EngineRequest.from_dict(body)
    except (KeyError, TypeError, ValueError) as exc:
        raise openai_api.ApiError(422, f"malformed engine request: {exc!r}") from None


async def engine_generate(request: web.Request) -> web.StreamResponse:
    engine = request.app[ENGINE]
    req = _engine_request(openai_api.load_json(await request.read()))
    handle, transfer = req.kv_transfer, None
    if handle is not None:
        handle, transfer = await _pull(request, req, None, handle)
    seq = _admit(engine, req, prefill=False, preloaded=handle, transfer=transfer)
    if not req.stream:
        tokens = await _collect(engine, seq)
        return web.json_response(_final_line(seq, tokens), headers={ENGINE_HEADER: engine.engine_id})
    resp = web.StreamResponse(headers={"Content-Type": "application/x-ndjson", ENGINE_HEADER: engine.engine_id})
    await resp.prepare(request)
    if not await _pump(request, resp, engine, seq, _ndjson_tokens, b""):
        return resp
    line: dict[str, Any] = (
        {"error": _engine_error_body(seq.stream.error)["error"]} if seq.stream.error is not None else _final_line(seq, None)
    )
    await resp.write(json.dumps(line).encode() + b"\n")
    await resp.write_eof()
    return resp


def _refuse(engine: Engine, req: EngineRequest, err: EngineError) -> None:
    record = engine.new_record(req)
    record.outcome, record.error, record.finished_at = err.code, str(err), time.time()
    engine.log.append(record)


def _ndjson_tokens(tokens: list[int]) -> bytes:
    return b"".join(b'{"token":%d}\n' % t for t in tokens)


def _final_line(seq: Seq, tokens: list[int] | None) -> dict[str, Any]:
    line: dict[str, Any] = {
        "finish_reason": seq.stream.finish_reason,
        "usage": openai_api.usage(seq.prompt_len, seq.generated, seq.record.cached_tokens),
    }
    if tokens is not None:
        line["token_ids"] = tokens
    return line


async def engine_prefill(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    req = _engine_request(openai_api.load_json(await request.read()))
    seq = _admit(engine, req, prefill=True)
    await _collect(engine, seq)
    if seq.stream.handle is None:
        raise EngineError(engine_api.ENGINE_UNAVAILABLE, "prefill ended without a KV handle")
    return web.json_response(
        {"kv_transfer": seq.stream.handle.to_dict(), "usage": openai_api.usage(seq.prompt_len, 0, seq.record.cached_tokens)},
        headers={ENGINE_HEADER: engine.engine_id},
    )


async def engine_kv_pull(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    body = openai_api.load_json(await request.read())
    try:
        handle_id = str(body["handle_id"])
        dest_layout = kv_pull.layout_of(body["dest_layout"])
    except (KeyError, TypeError, ValueError) as exc:
        raise openai_api.ApiError(422, f"malformed pull request: {exc!r}") from None
    seq = engine.release_handle(handle_id, dest_layout)
    return web.json_response({"handle_id": handle_id, "num_tokens": seq.prompt_len, "released": True})


async def engine_kv_handle(request: web.Request) -> web.Response:
    """A prefilled KV handle by its handshake key, waiting up to ``wait_s`` for the prefill to pin it (SGLang's bootstrap)."""
    key = request.query.get("key")
    if not key:
        raise openai_api.ApiError(400, "query parameter key is required", param="key")
    try:
        wait_s = min(max(float(request.query.get("wait_s", "0")), 0.0), pd_wire.CLAIM_TIMEOUT_S)
    except ValueError:
        raise openai_api.ApiError(400, "query parameter wait_s must be a number", param="wait_s") from None
    handle = await request.app[RENDEZVOUS].claim(key, wait_s)
    return web.json_response(handle.to_dict())


async def engine_metadata(request: web.Request) -> web.Response:
    return web.json_response(request.app[ENGINE].metadata())


# -- observation --------------------------------------------------------------------------------------
async def prometheus(request: web.Request) -> web.Response:
    body = request.app[ENGINE].metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


def _int_query(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        return default
    try:
        return int(raw)
    except ValueError:
        raise openai_api.ApiError(400, f"query parameter {name} must be an integer", param=name) from None


async def ground_truth(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    since = _int_query(request, "since", 0)
    records = [r.to_dict() for r in engine.log.since(since)]
    return web.json_response({"engine_id": engine.engine_id, "dropped": engine.log.dropped, "records": records})


async def _subscribe(
    request: web.Request,
    attach: Callable[[Callable[[Any], None]], None],
    detach: Callable[[Callable[[Any], None]], None],
    backlog: list[dict[str, Any]],
) -> web.StreamResponse:
    """Stream records as SSE until the client leaves or ``max_seconds`` pass (bounded)."""
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=100_000)

    def listener(item: Any) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            queue.put_nowait(item.to_dict())

    resp = web.StreamResponse(headers=SSE_HEADERS)
    await resp.prepare(request)
    attach(listener)
    request.app[SUBSCRIBERS].add(queue)
    deadline = waiting.Deadline(min(float(request.query.get("max_seconds", MAX_SUBSCRIPTION_SECONDS)), MAX_SUBSCRIPTION_SECONDS))
    try:
        for old in backlog:
            await resp.write(b"data: " + json.dumps(old).encode() + b"\n\n")
        while (left := deadline.remaining()) > 0:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=min(left, 15.0))
            except TimeoutError:
                await resp.write(b": keep-alive\n\n")
                continue
            if item is None:  # the engine is shutting down
                break
            await resp.write(b"data: " + json.dumps(item).encode() + b"\n\n")
    except ConnectionResetError:  # the subscriber went away
        pass
    finally:
        detach(listener)
        request.app[SUBSCRIBERS].discard(queue)
    return resp


async def kv_events(request: web.Request) -> web.StreamResponse:
    engine = request.app[ENGINE]
    since = _int_query(request, "since", -1)
    backlog = [e.to_dict() for e in engine.kv_events if e.event_id > since] if since >= 0 else []
    return await _subscribe(request, engine.kv_listeners.append, engine.kv_listeners.remove, backlog)


async def fpm_events(request: web.Request) -> web.StreamResponse:
    engine = request.app[ENGINE]
    return await _subscribe(request, engine.fpm_listeners.append, engine.fpm_listeners.remove, [])


async def admin_faults(request: web.Request) -> web.Response:
    engine = request.app[ENGINE]
    changes = openai_api.load_json(await request.read())
    try:
        engine.faults.set(engine.faults.faults.updated(changes))
    except (ValueError, TypeError) as exc:
        raise openai_api.ApiError(400, f"bad fault settings: {exc}") from None
    if "startup_seconds" in changes:  # a new model load starts now
        engine.model_load = waiting.Deadline(engine.faults.faults.startup_seconds)
    return web.json_response(engine.faults.faults.to_dict())
