"""vLLM's and SGLang's prefill/decode handshakes, spoken on the fake engine's OpenAI routes.

Real P/D routers (vllm-router, sglang-router) drive engines through the engines' OpenAI API,
not through the suite's runtime API (``servecert.protocol.engine_api``). An engine started with
``pd_protocol`` ``vllm`` or ``sglang`` (``EngineConfig``, ``servecert engine serve
--pd-protocol``) reads the handshake from the request body:

- **vllm** (the NIXL connector's ``kv_transfer_params``): the router sends the prefill leg with
  ``{"do_remote_decode": true}`` (``max_tokens`` 1, not streamed); the prefill engine answers with
  ``{"do_remote_prefill": true, "remote_engine_id", "remote_request_id", "remote_block_ids",
  "remote_host", "remote_port", "tp_size"}``; the router copies them into the decode leg, and the
  decode engine loads the prompt's KV from ``remote_host:remote_port``. A request without
  ``kv_transfer_params`` is served whole, as vLLM serves it.
- **sglang** (bootstrap pairing): the router sends the same body to a prefill and a decode
  engine at once, with ``bootstrap_host``, ``bootstrap_port`` and ``bootstrap_room``. Which leg
  a request is depends on the engine's role, as SGLang's ``--disaggregation-mode`` decides it: the
  prefill engine pins its KV under the room, the decode engine asks
  ``bootstrap_host:bootstrap_port`` for the room's KV and waits for the prefill to finish.

In both the KV side channel is the prefill engine's own HTTP port: ``remote_port`` is that port,
and for SGLang the router's ``BOOTSTRAP_PORT`` of each prefill must be it (the adapters pass it).
The decode engine reads the handle (``GET /engine/kv/handle?key=``) and then pulls it as the
suite's runtime API does (``servecert.fakes.kv_pull``): layouts checked, priced by the fake network, the
transfer recorded in the decode engine's ground truth with both engines' domains. Protocols read
from vLLM's ``nixl_connector.py`` and the routers' own sources; the observed wire bytes are in
``docs/pd-routers.md``.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from servecert.fakes.engine import EngineError
from servecert.protocol import engine_api, waiting
from servecert.protocol.engine_api import KvHandle
from servecert.protocol.openai import ApiError

VLLM = engine_api.PD_VLLM
SGLANG = engine_api.PD_SGLANG

PREFILL = "prefill"
DECODE = "decode"
CLAIM_TIMEOUT_S = 30.0
"""Longest a decode engine waits for its prefill engine's KV (SGLang sends both legs at once)."""
PIN_TTL_S = 60.0
"""A pinned handle nobody claimed is forgotten after this (the engine's own handle TTL)."""


@dataclass(frozen=True)
class Leg:
    """Which half of a disaggregated request this engine is asked to serve.

    ``key`` names the KV between the two legs (vLLM: the prefill engine's handle id, known only
    after the prefill; SGLang: the room); ``source_url`` is where a decode leg finds it.
    """

    kind: str
    key: str | None = None
    source_url: str | None = None


def leg_of(body: dict[str, Any], protocol: str, role: str) -> Leg | None:
    """The leg a request body asks this engine (of ``role``) for; None for a whole request."""
    if protocol == VLLM:
        return _vllm_leg(body)
    if protocol == SGLANG:
        return _sglang_leg(body, role)
    return None


def _vllm_leg(body: dict[str, Any]) -> Leg | None:
    params = body.get("kv_transfer_params")
    if not isinstance(params, dict):
        return None
    if params.get("do_remote_decode"):
        return Leg(PREFILL)
    if not params.get("do_remote_prefill"):
        return None
    missing = [name for name in ("remote_host", "remote_port", "remote_request_id") if params.get(name) in (None, "")]
    if missing:
        raise ApiError(
            400,
            f"kv_transfer_params asks for a remote prefill but lacks {', '.join(missing)}: pass the prefill "
            "engine's kv_transfer_params on unchanged",
            param="kv_transfer_params",
        )
    return Leg(DECODE, str(params["remote_request_id"]), _url(str(params["remote_host"]), params["remote_port"]))


def _sglang_leg(body: dict[str, Any], role: str) -> Leg | None:
    room = body.get("bootstrap_room")
    if room is None:
        return None
    if isinstance(room, list):
        raise ApiError(
            400,
            "batched requests (bootstrap_room as a list) are not served by the fake engine: send one prompt per request",
            param="bootstrap_room",
        )
    if role == PREFILL:
        return Leg(PREFILL, f"room-{room}")
    host, port = body.get("bootstrap_host"), body.get("bootstrap_port")
    if not host or port is None:
        raise ApiError(
            400,
            f"bootstrap_host {host!r} / bootstrap_port {port!r}: the decode engine cannot find its prefill engine; give the router "
            "each prefill engine's HTTP port as its BOOTSTRAP_PORT (--prefill URL PORT)",
            param="bootstrap_port",
        )
    return Leg(DECODE, f"room-{room}", _url(str(host), port))


def _url(host: str, port: Any) -> str:
    try:
        number = int(port)
    except (TypeError, ValueError):
        raise ApiError(422, f"port must be an integer, got {port!r}", param="kv_transfer_params") from None
    return f"http://{host}:{number}"


def prefill_params(protocol: str, handle: KvHandle, block_size: int, tensor_parallel_size: int) -> dict[str, Any] | None:
    """What the prefill engine's answer carries for the decode leg (vLLM's ``kv_transfer_params``)."""
    if protocol != VLLM:
        return None
    where = urlsplit(handle.url)
    return {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_engine_id": handle.engine_id,
        "remote_request_id": handle.handle_id,
        "remote_block_ids": list(range(math.ceil(handle.num_tokens / block_size))),
        "remote_host": where.hostname,
        "remote_port": where.port,
        "tp_size": tensor_parallel_size,
    }


def pin_key(leg: Leg, handle: KvHandle) -> str:
    """The key a prefill leg's KV is found under: the room, or (vLLM) the handle's own id."""
    return leg.key or handle.handle_id


class Rendezvous:
    """Prefilled KV handles under the keys a handshake names them by, until a decode engine claims them."""

    def __init__(self, ttl_s: float = PIN_TTL_S) -> None:
        self._ttl_s = ttl_s
        self._slots: dict[str, tuple[asyncio.Future[KvHandle], waiting.Deadline]] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def _slot(self, key: str) -> asyncio.Future[KvHandle]:
        for old in [k for k, (_, ttl) in self._slots.items() if ttl.expired]:
            del self._slots[old]
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = (asyncio.get_running_loop().create_future(), waiting.Deadline(self._ttl_s))
        return slot[0]

    def pin(self, key: str, handle: KvHandle) -> None:
        future = self._slot(key)
        if not future.done():
            future.set_result(handle)

    async def claim(self, key: str, timeout_s: float) -> KvHandle:
        future = self._slot(key)
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=timeout_s)
        except TimeoutError:
            raise EngineError(engine_api.KV_HANDLE_NOT_FOUND, f"no prefilled KV under {key} within {timeout_s:g} s") from None
        finally:
            if future.done():
                self._slots.pop(key, None)


async def fetch_handle(session: aiohttp.ClientSession, leg: Leg) -> KvHandle:
    """Ask the prefill engine of a decode leg for its handle, waiting for its prefill (bounded)."""
    assert leg.source_url is not None and leg.key is not None
    url = leg.source_url + "/engine/kv/handle"
    try:
        async with session.get(
            url, params={"key": leg.key, "wait_s": str(CLAIM_TIMEOUT_S)}, timeout=aiohttp.ClientTimeout(total=CLAIM_TIMEOUT_S + 5)
        ) as resp:
            data = await resp.json(content_type=None)
            if resp.status != 200:
                error = data.get("error", {}) if isinstance(data, dict) else {}
                raise EngineError(
                    str(error.get("code") or engine_api.KV_TRANSFER_FAILED),
                    f"prefill engine at {leg.source_url} has no KV for {leg.key}: {error.get('message', resp.status)}",
                    resp.status if resp.status == 404 else 502,
                )
            return KvHandle.from_dict(data)
    except (aiohttp.ClientError, TimeoutError, ValueError, KeyError, TypeError) as exc:
        raise EngineError(engine_api.KV_TRANSFER_FAILED, f"could not reach the prefill engine at {url}: {exc!r}") from None
