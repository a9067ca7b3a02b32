"""The reference frontend's HTTP face (aiohttp): OpenAI routes in, worker runtime API out.

Data flow of one request: parse and validate with the worker set's context length; tokenize with
the card's tokenizer; the router picks the aggregated or prefill worker; for disaggregated
serving, ``/engine/prefill`` returns a KV handle, the router picks a decode worker the topology
policy allows, and ``/engine/generate`` on it pulls the KV and streams tokens back as NDJSON,
which become OpenAI SSE chunks. Each request carries the checksum of the card of the set it is
sent to, the frontend's runtime-protocol version and the frontend's id, so the engines can refuse
or record it. ``GET /status`` shows routable and rejected workers and the topology policy.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest

from servecert.protocol import connection_guard, engine_api
from servecert.protocol import openai as openai_api
from servecert.protocol.engine_api import EngineRequest
from servecert.reference_impl.frontend import topology
from servecert.reference_impl.frontend.discovery import Discovery, KubeDiscoverySettings, WorkerInfo
from servecert.reference_impl.frontend.kv_index import KvEventFeed, KvIndex
from servecert.reference_impl.frontend.router import NoWorkers, Router
from servecert.reference_impl.frontend.routing import KvRouterConfig
from servecert.reference_impl.frontend.worker_sets import WorkerSets

log = logging.getLogger("servecert.frontend")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class FrontendConfig:
    frontend_id: str = "frontend"
    router_mode: str = "kv"
    topology: topology.TopologyPolicy = field(default_factory=topology.TopologyPolicy)
    kv: KvRouterConfig = field(default_factory=KvRouterConfig)
    namespace: str | None = None
    protocol_version: str = engine_api.RUNTIME_PROTOCOL_VERSION
    request_timeout_s: float = 600.0
    kube_discovery: KubeDiscoverySettings | None = None
    """Set when DYN_DISCOVERY_BACKEND=kubernetes: find workers through WorkerMetadata objects."""

    @classmethod
    def from_env(cls, env: dict[str, str], frontend_id: str = "frontend") -> FrontendConfig:
        """Read the seed's and Dynamo's router variables; raises ValueError naming a bad one."""
        level = env.get("DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL") or None
        policy = (env.get("DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY") or topology.FAIL).strip().lower()
        if policy not in (topology.FAIL, topology.FALLBACK):
            raise ValueError(f"DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY must be fail or fallback, got {policy!r}")
        mode = env.get("DYN_ROUTER_MODE", "kv")
        if mode not in ("kv", "round-robin", "random"):
            raise ValueError(f"DYN_ROUTER_MODE must be kv, round-robin or random, got {mode!r}")
        try:
            temperature = float(env.get("DYN_ROUTER_TEMPERATURE", "0"))
        except ValueError:
            raise ValueError("DYN_ROUTER_TEMPERATURE must be a number") from None
        return cls(
            frontend_id=frontend_id,
            router_mode=mode,
            topology=topology.TopologyPolicy(level, policy),
            kv=KvRouterConfig(temperature=temperature),
            namespace=env.get("DYN_NAMESPACE") or None,
            protocol_version=env.get("DYN_RUNTIME_PROTOCOL_VERSION", engine_api.RUNTIME_PROTOCOL_VERSION),
            kube_discovery=KubeDiscoverySettings.from_env(env),
        )


class UpstreamError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(str(body))
        self.status, self.body = status, body


class Frontend:
    def __init__(self, config: FrontendConfig, discovery: Discovery) -> None:
        self.config = config
        self.discovery = discovery
        self.registry = CollectorRegistry(auto_describe=False)
        self.sets = WorkerSets(config.namespace)
        self.index = KvIndex()
        self.log = logging.getLogger(f"servecert.frontend.{config.frontend_id}")
        self.router = Router(self.sets, self.index, config.router_mode, config.topology, config.kv, self.registry, self.log)
        self.session: aiohttp.ClientSession | None = None
        self.feed: KvEventFeed | None = None

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout(total=self.config.request_timeout_s)
        )
        self.feed = KvEventFeed(self.index, self.session)
        self.discovery.watch(self._on_change)
        await self.discovery.start()

    async def stop(self) -> None:
        await self.discovery.stop()
        if self.feed is not None:
            await self.feed.close()
        if self.session is not None:
            await self.session.close()

    def _on_change(self, kind: str, worker: WorkerInfo) -> None:
        self.sets.on_change(kind, worker)
        if self.feed is None:
            return
        if kind == "added" and worker.engine_id in self.sets.accepted and worker.role != "decode":
            self.feed.follow(worker.engine_id, worker.url)
        elif kind == "removed":
            asyncio.get_running_loop().create_task(self.feed.unfollow(worker.engine_id))

    def status(self) -> dict[str, Any]:
        return {
            "frontend_id": self.config.frontend_id,
            "router_mode": self.config.router_mode,
            "topology": {"level": self.config.topology.level, "mismatch_policy": self.config.topology.mismatch_policy},
            "workers": [
                {
                    "engine_id": w.engine_id,
                    "url": w.url,
                    "role": w.role,
                    "model": w.model,
                    "checksum": w.checksum,
                    "domains": dict(w.domains),
                }
                for w in self.sets.accepted.values()
            ],
            "rejected": [r.to_dict() for r in self.sets.rejected.values()],
            "topology_fallbacks": self.router.fallbacks,
        }

    # -- one request -------------------------------------------------------------------------------
    def engine_request(self, worker: WorkerInfo, req: openai_api.OpenAIRequest, request_id: str, stream: bool) -> EngineRequest:
        return EngineRequest(
            request_id=request_id,
            model=req.model,
            token_ids=tuple(req.token_ids),
            sampling=req.sampling,
            mdc_checksum=worker.checksum,
            protocol_version=self.config.protocol_version,
            stream=stream,
            frontend=self.config.frontend_id,
        )

    async def call(self, worker: WorkerInfo, path: str, body: dict[str, Any]) -> dict[str, Any]:
        assert self.session is not None
        try:
            async with self.session.post(worker.url + path, json=body) as resp:
                text = await resp.text()
                if resp.status != 200:
                    raise upstream_error(worker.engine_id, resp.status, text)
                return dict(json.loads(text))
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise _unreachable(worker, exc) from None

    async def prefill(self, worker: WorkerInfo, req: openai_api.OpenAIRequest, request_id: str) -> dict[str, Any]:
        body = self.engine_request(worker, req, request_id, stream=False).to_dict()
        return dict((await self.call(worker, "/engine/prefill", body))["kv_transfer"])

    def generate_body(
        self, worker: WorkerInfo, req: openai_api.OpenAIRequest, request_id: str, stream: bool, handle: dict[str, Any] | None
    ) -> dict[str, Any]:
        body = self.engine_request(worker, req, request_id, stream).to_dict()
        body["kv_transfer"] = handle
        return body


FRONTEND = web.AppKey("frontend", Frontend)


def _error(message: str, code: str, status: int) -> dict[str, Any]:
    return openai_api.ApiError(status, message, code=code).body()


def _unreachable(worker: WorkerInfo, exc: BaseException) -> UpstreamError:
    return UpstreamError(502, _error(f"worker {worker.engine_id} unreachable: {exc!r}", "worker_unreachable", 502))


def upstream_error(engine_id: str, status: int, text: str) -> UpstreamError:
    """An engine's error answer as the client gets it: its JSON error, else a 502 quoting what it sent.

    A dying engine's server can answer with its own plain-text page ("500 Internal Server
    Error"); reading that as JSON raised inside the handler and the client got aiohttp's bare 500.
    """
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return UpstreamError(status, data)
    return UpstreamError(502, _error(f"worker {engine_id} answered {status}: {' '.join(text.split())[:200]}", "upstream_error", 502))


def create_app(frontend: Frontend, limits: connection_guard.Limits | None = None) -> web.Application:
    app = connection_guard.guarded_app([_errors], limits)
    app[FRONTEND] = frontend
    app.cleanup_ctx.append(_lifecycle)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/status", status)
    app.router.add_get("/metrics", metrics)
    return app


async def _lifecycle(app: web.Application) -> AsyncIterator[None]:
    await app[FRONTEND].start()
    yield
    await app[FRONTEND].stop()


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except openai_api.ApiError as err:
        return web.json_response(err.body(), status=err.status)
    except UpstreamError as err:
        return web.json_response(err.body, status=err.status)
    except NoWorkers as err:
        return web.json_response(openai_api.ApiError(404, str(err), param="model").body(), status=404)
    except web.HTTPException as exc:  # unknown route, wrong method, body too large
        if exc.status < 400:
            raise
        return web.json_response(openai_api.http_error(exc.status, exc.reason, request.method, request.path).body(), status=exc.status)
    except topology.NoSameDomainDecode as err:
        body = _error(str(err), "no_same_domain_decode", 503)
        body["error"]["param"] = err.level
        return web.json_response(body, status=503)


async def health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok", "frontend_id": request.app[FRONTEND].config.frontend_id})


async def status(request: web.Request) -> web.Response:
    return web.json_response(request.app[FRONTEND].status())


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[FRONTEND].registry)
    return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})


async def models(request: web.Request) -> web.Response:
    names = request.app[FRONTEND].sets.models()
    return web.json_response({"object": "list", "data": [{"id": n, "object": "model", "owned_by": "servecert"} for n in names]})


async def completions(request: web.Request) -> web.StreamResponse:
    return await _serve(request, openai_api.parse_completion)


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _serve(request, openai_api.parse_chat)


async def _serve(request: web.Request, parse: openai_api.Parse) -> web.StreamResponse:
    fe = request.app[FRONTEND]
    body = openai_api.load_json(await request.read())
    model = body.get("model")
    if model is None or model == "":
        raise openai_api.ApiError(400, "you must provide a model parameter", param="model", code="missing_model")
    if not isinstance(model, str):
        raise openai_api.ApiError(422, f"model must be a string, got {type(model).__name__}", param="model")
    workers = fe.router.workers(model)
    req = parse(body, model, workers.context_length(), workers.tokenizer())
    request_id = ("chatcmpl-" if req.chat else "cmpl-") + uuid.uuid4().hex
    first = fe.router.first(workers, req.token_ids)
    isl = len(req.token_ids)
    if not workers.disaggregated:
        return await _generate(request, fe, req, request_id, first, None, isl)
    fe.router.load.start(first.engine_id, fe.router.blocks(first, isl))
    try:
        handle = await fe.prefill(first, req, request_id)
    finally:
        fe.router.load.end(first.engine_id, fe.router.blocks(first, isl))
    decode = fe.router.decode(workers, first, isl)
    return await _generate(request, fe, req, request_id, decode, handle, isl)


async def _generate(
    request: web.Request,
    fe: Frontend,
    req: openai_api.OpenAIRequest,
    request_id: str,
    worker: WorkerInfo,
    handle: dict[str, Any] | None,
    isl: int,
) -> web.StreamResponse:
    blocks = fe.router.blocks(worker, isl)
    fe.router.load.start(worker.engine_id, blocks)
    try:
        if not req.stream:
            data = await fe.call(worker, "/engine/generate", fe.generate_body(worker, req, request_id, False, handle))
            text = req.tokenizer.decode(data["token_ids"])
            reason = data.get("finish_reason") or "length"
            return web.json_response(openai_api.full_body(req, request_id, text, reason, data["usage"]))
        return await _relay(request, fe, req, request_id, worker, handle)
    finally:
        fe.router.load.end(worker.engine_id, blocks)


async def _relay(
    request: web.Request,
    fe: Frontend,
    req: openai_api.OpenAIRequest,
    request_id: str,
    worker: WorkerInfo,
    handle: dict[str, Any] | None,
) -> web.StreamResponse:
    """Stream the engine's NDJSON tokens to the client as SSE, converting in batches."""
    assert fe.session is not None
    body = fe.generate_body(worker, req, request_id, True, handle)
    writer = openai_api.ChunkWriter(request_id, req.model, req.chat, req.tokenizer)
    try:
        upstream = await fe.session.post(worker.url + "/engine/generate", json=body)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _unreachable(worker, exc) from None
    async with upstream:
        if upstream.status != 200:
            try:
                text = await upstream.text()
            except (aiohttp.ClientError, TimeoutError) as exc:
                raise _unreachable(worker, exc) from None
            raise upstream_error(worker.engine_id, upstream.status, text)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        final = await _pump(upstream, resp, writer)
        if final is None or "error" in final:
            err = (final or {}).get("error") or {"message": f"stream from worker {worker.engine_id} ended early", "code": "upstream_cut"}
            await resp.write(b"data: " + json.dumps({"error": err}).encode() + b"\n\ndata: [DONE]\n\n")
        else:
            usage = final.get("usage") if req.include_usage else None
            await resp.write(writer.final(final.get("finish_reason") or "length", usage))
        await resp.write_eof()
        return resp


async def _pump(upstream: aiohttp.ClientResponse, resp: web.StreamResponse, writer: openai_api.ChunkWriter) -> dict[str, Any] | None:
    """Copy tokens until the engine's final line; None when the engine's stream was cut."""
    pending = writer.first()
    rest = b""
    try:
        async for data in upstream.content.iter_any():
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            tokens: list[int] = []
            final: dict[str, Any] | None = None
            for line in lines:
                if line.startswith(b'{"token":'):
                    tokens.append(int(line[9:-1]))
                elif line:
                    final = json.loads(line)
            if tokens or pending:
                await resp.write(pending + writer.tokens(tokens))
                pending = b""
            if final is not None:
                return final
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, ValueError):
        return None
    return None
