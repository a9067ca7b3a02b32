"""A decode engine's side of a KV transfer: check layouts, pull from the prefill engine, pay the wire.

The decode engine refuses a handle whose KV layout differs from its own (seed 001, 3.2) before
any byte moves; otherwise it asks the prefill engine to release the pinned blocks
(``POST /engine/kv/pull``, which checks the layouts again from its side), then waits the time the
fake network prices the transfer at, divided by the time scale. The returned record is the
ground truth of the transfer: both engines, their domains, distance, bytes and duration.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from servecert.fakes.engine import Engine, EngineError
from servecert.fakes.groundtruth import TransferRecord
from servecert.protocol import engine_api
from servecert.protocol.engine_api import KvHandle
from servecert.protocol.layout import KvLayout

PULL_TIMEOUT_SECONDS = 30.0


def layout_of(data: Any) -> KvLayout:
    if not isinstance(data, dict):
        raise TypeError("layout must be an object")
    return KvLayout.from_dict(data)


async def pull(engine: Engine, session: aiohttp.ClientSession, handle: KvHandle) -> TransferRecord:
    source_layout = layout_of(handle.layout)
    problems = engine.layout.incompatibilities(source_layout)
    if problems:
        raise EngineError(
            engine_api.KV_LAYOUT_MISMATCH,
            f"KV layout mismatch: {handle.engine_id} produced KV this decode worker {engine.engine_id} "
            f"cannot use ({'; '.join(problems)})",
        )
    body = {"handle_id": handle.handle_id, "dest_engine": engine.engine_id, "dest_layout": engine.layout.to_dict()}
    try:
        async with session.post(
            handle.url + "/engine/kv/pull", json=body, timeout=aiohttp.ClientTimeout(total=PULL_TIMEOUT_SECONDS)
        ) as resp:
            data = await resp.json(content_type=None)
            if resp.status != 200:
                error = (data or {}).get("error", {}) if isinstance(data, dict) else {}
                raise EngineError(
                    str(error.get("code") or engine_api.KV_TRANSFER_FAILED),
                    f"KV pull from {handle.engine_id} failed: {error.get('message', resp.status)}",
                    resp.status if resp.status in (404, 409) else 502,
                )
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise EngineError(
            engine_api.KV_TRANSFER_FAILED, f"could not pull KV from {handle.engine_id} at {handle.url}: {exc!r}"
        ) from None
    priced = engine.config.network.price(handle.domains, engine.domains, handle.kv_bytes)
    if engine.config.time_scale > 0:
        await asyncio.sleep(priced.duration_ms / 1000.0 / engine.config.time_scale)
    return TransferRecord(
        source_engine=handle.engine_id,
        dest_engine=engine.engine_id,
        source_domains=dict(handle.domains),
        dest_domains=engine.domains,
        distance=priced.distance,
        kv_bytes=priced.kv_bytes,
        duration_ms=priced.duration_ms,
        source_layout=dict(handle.layout),
        dest_layout=engine.layout.to_dict(),
    )
