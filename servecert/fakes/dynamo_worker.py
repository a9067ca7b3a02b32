"""The suite's fake engine served as a Dynamo worker (``python -m servecert.fakes.dynamo_worker``).

Dynamo's own Python backends are ``dynamo.common.backend.LLMEngine`` subclasses driven by the
runtime's ``Worker``: it registers the model card (from a local model folder), serves the
``generate`` endpoint over the request plane, publishes KV events pushed to it and reads the
worker's topology (``DYN_TOPOLOGY_*``, ``DYN_KV_TRANSFER_*``) into the card's runtime config.
``FakeEngineBackend`` is such an engine whose core is ``servecert.fakes.engine.Engine``, so every prefill,
decode and KV transfer lands in the suite's own ground-truth log:

- a **prefill** worker prefills the prompt, pins its KV under a ``KvHandle`` and ends the
  request with ``disaggregated_params`` carrying that handle; Dynamo's PrefillRouter forwards
  them to the decode worker it picks;
- a **decode** worker pulls the KV from the prefill engine named in the handle (the fake
  engine's HTTP pull, priced by the fake network between their domains) before decoding, so the
  transfer's both ends are recorded by the engines themselves, not inferred from Dynamo;
- an **agg** worker does both locally.

Every iteration's forward-pass metrics (``streams.ForwardPassMetrics``) also go to Dynamo's event
plane through ``FpmDirectPublisher``, as its vLLM backend's do, with ``wall_time`` in real seconds:
Dynamo's planner sizes the deployment from them.

Beside the Dynamo endpoint the process serves the fake engine's HTTP app on its own loopback
address (``GET /groundtruth``, ``/engine/kv/pull``, ``/engine/metadata``, ...). Once both are up
it writes ``--ready-file`` (JSON: engine id, URL, pid) atomically; the adapter waits for it.

It lives with the fakes, beside ``pd_wire`` (the P/D handshakes of SGLang and vLLM): a program that
changes how a fake engine is reached is part of the ground truth, reviewed with it. The Dynamo
adapter (``servecert.adapters.dynamo``) starts it by module name with ``--engine`` from the vendor
contract's ``engine_settings``; nothing imports it but its own tests (it needs ``ai-dynamo``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from dynamo.common.backend import EngineConfig, LLMEngine, LlmRegistration, WorkerConfig
from dynamo.common.backend.publisher import ComponentSnapshot, KvEventSource, PushSource
from dynamo.common.backend.run import run
from dynamo.common.constants import DisaggregationMode
from dynamo.llm import FpmDirectPublisher

from servecert.fakes import engine_settings, groundtruth, kv_pull, server
from servecert.fakes.engine import Engine, EngineError, Seq
from servecert.fakes.engine import EngineConfig as FakeEngineConfig
from servecert.protocol import connection_guard, streams, tokenizer
from servecert.protocol.engine_api import EngineRequest, KvHandle, Sampling

log = logging.getLogger("servecert.dynamo.worker")

HANDLE_KEY = "servecert_kv_handle"
MAX_BLOCK_MEMO = 200_000  # block hash -> tokens remembered for KV events
_MODES = {"agg": DisaggregationMode.AGGREGATED, "prefill": DisaggregationMode.PREFILL, "decode": DisaggregationMode.DECODE}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m servecert.fakes.dynamo_worker", description=__doc__.splitlines()[0])
    p.add_argument("--model-path", required=True, help="local model folder (config.json, tokenizer.json)")
    p.add_argument("--engine", required=True, help="the fake engine's settings as JSON (servecert.fakes.engine_settings)")
    p.add_argument("--ready-file", type=Path, required=True, help="written once the worker serves")
    p.add_argument("--http-host", default="127.0.0.1", help="address of the fake engine's HTTP app")
    return p


class FakeEngineBackend(LLMEngine):  # type: ignore[misc]  # NB: dynamo is untyped for mypy (follow_imports=skip)
    def __init__(self, model_path: str, config: FakeEngineConfig, ready_file: Path, http_host: str) -> None:
        self.model_path = model_path
        self.config = config
        self.ready_file = ready_file
        self.http_host = http_host
        self.mode = _MODES[config.role]
        self.engine: Engine | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._publisher: Any = None
        self._snapshots: Any = None
        self._fpm: Any = None
        self._block_tokens: OrderedDict[int, tuple[int, ...]] = OrderedDict()
        self._published: set[int] = set()
        self._inflight: dict[str, Seq] = {}

    # -- lifecycle ------------------------------------------------------------------------------
    @classmethod
    async def from_args(cls, argv: list[str] | None = None) -> tuple[FakeEngineBackend, WorkerConfig]:
        args = build_parser().parse_args(argv)
        config = engine_settings.from_settings(json.loads(args.engine))
        engine = cls(str(args.model_path), config, args.ready_file, args.http_host)
        worker_config = WorkerConfig(
            namespace=config.namespace,
            component="prefill" if config.role == "prefill" else "backend",
            endpoint="generate",
            model_name=str(args.model_path),
            served_model_name=config.model,
            endpoint_types="chat,completions",
            discovery_backend=os.environ.get("DYN_DISCOVERY_BACKEND", "file"),
            request_plane=os.environ.get("DYN_REQUEST_PLANE", "tcp"),
            event_plane=os.environ.get("DYN_EVENT_PLANE", "zmq"),
            enable_local_indexer=config.role != "decode",
            disaggregation_mode=engine.mode,
        )
        return engine, worker_config

    async def start(self, worker_id: int) -> EngineConfig:
        engine = Engine(self.config)
        self.engine = engine
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        runner = await connection_guard.start_runner(server.create_app(engine), access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await web.TCPSite(runner, self.http_host, 0).start()
        self._runner = runner
        engine.url = f"http://{self.http_host}:{runner.addresses[0][1]}"
        engine.kv_listeners.append(self._on_kv_event)
        engine.fpm_listeners.append(self._on_fpm)
        # NB: registered only once its model is loaded, as vLLM's worker is: registered while the fake engine loaded
        # (startup_seconds), Dynamo's router sent it requests it refused ("engine ... is not ready", HTTP 500).
        await asyncio.sleep(max(0.0, engine.model_load.remaining()))
        ready = {"engine_id": engine.engine_id, "url": engine.url, "pid": os.getpid(), "dynamo_worker_id": worker_id}
        tmp = self.ready_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(ready))
        tmp.rename(self.ready_file)
        log.info("fake engine %s (%s) serves %s", engine.engine_id, self.config.role, engine.url)
        cfg = self.config
        return EngineConfig(
            model=self.model_path,
            served_model_name=cfg.model,
            llm=LlmRegistration(
                context_length=cfg.context_length,
                kv_cache_block_size=cfg.block_size,
                total_kv_blocks=cfg.num_gpu_blocks,
                max_num_seqs=cfg.max_num_seqs,
                max_num_batched_tokens=cfg.max_num_batched_tokens,
            ),
        )

    async def cleanup(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._publisher is not None:
            with contextlib.suppress(Exception):
                self._publisher.shutdown()
            self._publisher = None
        # NB: a stopping vLLM worker's forward-pass metrics end with its EngineCore (TRT-LLM's publisher is shut down
        # at cleanup too); left running, the Rust side kept sending 1 s idle heartbeats until the process died.
        fpm, self._fpm = self._fpm, None
        if fpm is not None:
            with contextlib.suppress(Exception):
                fpm.shutdown()

    async def is_quiescent(self) -> bool:
        """Dynamo's Worker polls it on a leaving prefill worker after its grace period, before ``cleanup``: quiescent
        once nothing is being prefilled and every KV handle made is pulled or past its pull's due time (what vLLM's
        transfers finishing means). Not answering made each scale-down of prefill wait out the 25 s drain budget."""
        engine, runner = self.engine, self._runner
        if engine is None or runner is None:
            return True
        return not engine.running and not engine.waiting and server.in_flight(runner.app) == 0

    # -- KV events and load, pushed to Dynamo ---------------------------------------------------------
    async def kv_event_sources(self) -> list[KvEventSource]:
        if self.config.role == "decode":
            return []  # decode workers publish no KV events (the fake engine's rule, and Dynamo's)
        return [PushSource(on_ready=self._attach_publisher, dp_rank=0)]

    def _attach_publisher(self, publisher: Any) -> None:
        self._publisher = publisher

    def component_metrics_dp_ranks(self) -> list[int]:
        return [0]

    def attach_snapshot_publisher(self, publisher: Any) -> None:
        self._snapshots = publisher

    def _remember_blocks(self, token_ids: tuple[int, ...]) -> None:
        """Remember each full block's tokens under the fake engine's chained hash for KV events."""
        bs = self.config.block_size
        for i, block_hash in enumerate(tokenizer.block_hashes(token_ids, bs)):
            self._block_tokens[block_hash] = token_ids[i * bs : (i + 1) * bs]
            self._block_tokens.move_to_end(block_hash)
        while len(self._block_tokens) > MAX_BLOCK_MEMO:
            self._block_tokens.popitem(last=False)

    def _on_kv_event(self, event: streams.KvEvent) -> None:
        publisher = self._publisher
        if publisher is None:
            return
        try:
            if event.kind == streams.BLOCK_STORED:
                blocks = [self._block_tokens.get(h) for h in event.block_hashes]
                if any(b is None for b in blocks):
                    return  # a block of generated tokens: the router never matches prompts against it
                flat = [t for b in blocks if b is not None for t in b]
                publisher.publish_stored(
                    token_ids=flat,
                    num_block_tokens=[self.config.block_size] * len(blocks),
                    block_hashes=list(event.block_hashes),
                    parent_hash=event.parent_hash,
                )
                self._published.update(event.block_hashes)
            elif event.kind == streams.BLOCK_REMOVED:
                known = [h for h in event.block_hashes if h in self._published]
                if known:
                    publisher.publish_removed(block_hashes=known)
                    self._published.difference_update(known)
        except Exception:  # a dropped event costs routing quality, never the request
            log.exception("KV event %s dropped", event.kind)

    async def on_endpoint_ready(self, endpoint: Any) -> None:
        """Publish forward-pass metrics on Dynamo's event plane, as its vLLM and SGLang backends do (for its planner)."""
        self._fpm = FpmDirectPublisher(endpoint, str(endpoint.connection_id()), 1)

    def _on_fpm(self, record: streams.ForwardPassMetrics) -> None:
        self._publish_fpm(record)
        if self._snapshots is None:
            return
        with contextlib.suppress(Exception):
            self._snapshots.publish(
                0,
                ComponentSnapshot(
                    kv_used_blocks=record.kv_active_blocks,
                    kv_total_blocks=record.kv_total_blocks,
                    gpu_cache_usage=record.kv_active_blocks / max(1, record.kv_total_blocks),
                    dp_rank=0,
                ),
            )

    def _publish_fpm(self, record: streams.ForwardPassMetrics) -> None:
        if self._fpm is None:
            return
        scheduled, queued = record.scheduled_requests, record.queued_requests
        scale = self.config.time_scale
        with contextlib.suppress(Exception):  # a dropped sample costs the planner one observation, never a request
            self._fpm.publish(
                dp_rank=record.dp_rank,
                scheduled_num_prefill_requests=scheduled.num_prefill_requests,
                scheduled_sum_prefill_tokens=scheduled.sum_prefill_tokens,
                scheduled_sum_prefill_kv_tokens=scheduled.sum_prefill_kv_tokens,
                scheduled_num_decode_requests=scheduled.num_decode_requests,
                scheduled_sum_decode_kv_tokens=scheduled.sum_decode_kv_tokens,
                queued_num_prefill_requests=queued.num_prefill_requests,
                queued_sum_prefill_tokens=queued.sum_prefill_tokens,
                queued_num_decode_requests=queued.num_decode_requests,
                queued_sum_decode_kv_tokens=queued.sum_decode_kv_tokens,
                # NB: the fake's wall_time is simulated seconds; Dynamo's planner reads real ones
                wall_time_secs=record.wall_time / scale if scale > 0 else record.wall_time,
            )

    # -- requests ---------------------------------------------------------------------------------------
    def _request(self, request: dict[str, Any], context: Any) -> EngineRequest:
        stop = dict(request.get("stop_conditions") or {})
        sampling_options = dict(request.get("sampling_options") or {})
        max_tokens = stop.get("max_tokens")
        seed = sampling_options.get("seed")
        request_id = ""
        with contextlib.suppress(Exception):
            request_id = str(context.id() or "")
        return EngineRequest(
            request_id=request_id or uuid.uuid4().hex,
            model=self.config.model,
            token_ids=tuple(int(t) for t in request.get("token_ids") or ()),
            sampling=Sampling(
                max_tokens=int(max_tokens) if max_tokens else 16,
                min_tokens=int(stop.get("min_tokens") or 0),
                ignore_eos=bool(stop.get("ignore_eos")),
                seed=None if seed is None else int(seed),
            ),
            mdc_checksum=None,
            protocol_version=self.config.protocol_version,
            stream=True,
            frontend="dynamo",
        )

    def _admit(
        self, req: EngineRequest, prefill: bool, handle: KvHandle | None = None, transfer: groundtruth.TransferRecord | None = None
    ) -> Seq:
        """Admit a request as the fake engine's HTTP routes do: every refusal is recorded too."""
        engine = self.engine
        assert engine is not None, "generate() before start()"
        record = engine.new_record(req)
        record.transfer = transfer
        try:
            engine.check(req, prefill)
            return engine.admit(req, record, handle)
        except EngineError as err:
            if record.seq == 0:
                record.outcome, record.error, record.finished_at = err.code, str(err), time.time()
                engine.log.append(record)
            raise

    async def generate(self, request: dict[str, Any], context: Any) -> AsyncGenerator[dict[str, Any], None]:
        engine = self.engine
        assert engine is not None and self._session is not None, "generate() before start()"
        req = self._request(request, context)
        if self.config.role != "decode":
            self._remember_blocks(req.token_ids)
        if self.config.role == "prefill":
            seq = self._admit(req, prefill=True)
            await self._drain(seq)
            handle = seq.stream.handle
            if handle is None:
                raise RuntimeError(f"prefill on {engine.engine_id} ended without a KV handle")
            yield {
                "token_ids": [handle.first_token],
                "index": 0,
                "finish_reason": "length",
                "completion_usage": _usage(seq, 1),
                "disaggregated_params": {HANDLE_KEY: handle.to_dict()},
            }
            return
        handle = None
        transfer = None
        params = dict((request.get("prefill_result") or {}).get("disaggregated_params") or {})
        if self.config.role == "decode" and HANDLE_KEY in params:
            handle = KvHandle.from_dict(dict(params[HANDLE_KEY]))
            try:
                engine.check(req, prefill=False)
                transfer = await kv_pull.pull(engine, self._session, handle)
            except EngineError as err:
                record = engine.new_record(req)
                record.outcome, record.error, record.finished_at = err.code, str(err), time.time()
                engine.log.append(record)
                raise
        seq = self._admit(req, prefill=False, handle=handle, transfer=transfer)
        self._inflight[req.request_id] = seq
        try:
            while True:
                tokens = await seq.stream.next_tokens()
                if seq.stream.error is not None:
                    raise seq.stream.error
                if seq.stream.done and not seq.stream.tokens:
                    out: dict[str, Any] = {"token_ids": tokens, "index": 0}
                    out["finish_reason"] = seq.stream.finish_reason or "length"
                    out["completion_usage"] = _usage(seq, seq.generated)
                    yield out
                    return
                if tokens:
                    yield {"token_ids": tokens, "index": 0}
        finally:
            self._inflight.pop(req.request_id, None)
            if not seq.stream.done:
                engine.abort(seq)

    async def _drain(self, seq: Seq) -> None:
        while not seq.stream.done or seq.stream.tokens:
            await seq.stream.next_tokens()
        if seq.stream.error is not None:
            raise seq.stream.error

    async def abort(self, context: Any) -> None:
        request_id = ""
        with contextlib.suppress(Exception):
            request_id = str(context.id() or "")
        seq = self._inflight.pop(request_id, None)
        if seq is not None and self.engine is not None:
            self.engine.abort(seq)


def _usage(seq: Seq, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": seq.prompt_len,
        "completion_tokens": completion,
        "total_tokens": seq.prompt_len + completion,
        "prompt_tokens_details": {"cached_tokens": seq.record.cached_tokens},
    }


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(FakeEngineBackend, argv)


if __name__ == "__main__":
    main()
