"""Disaggregated serving between fake engines, and the mismatches a real worker refuses.

A frontend's part is played by the test: prefill on one engine, then ask a decode engine to pull
the KV and continue. The verdicts come from the engines' ground-truth records.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from servecert.fakes.engine import Engine
from servecert.fakes.host import EngineHost
from servecert.protocol import engine_api, topology
from servecert.protocol.card import ModelCard
from tests.conftest import config
from tests.fakes.engine_helpers import prompt, request

ZONE_A_RACK_1 = {"zone": "a", "rack": "r1", "host": "h1"}
ZONE_A_RACK_1_OTHER_HOST = {"zone": "a", "rack": "r1", "host": "h2"}
ZONE_A_RACK_2 = {"zone": "a", "rack": "r2", "host": "h3"}
ZONE_B = {"zone": "b", "rack": "r9", "host": "h9"}


def topo(domains: dict[str, str]) -> Any:
    from servecert.fakes.topology_env import TopologyConfig

    return TopologyConfig(enabled=True, domains=domains, transfer_domain="zone")


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with http.post(url, json=body) as resp:
        return resp.status, await resp.json()


async def prefill(http: aiohttp.ClientSession, engine: Engine, tokens: int = 100) -> dict[str, Any]:
    req = request(prompt(tokens), max_tokens=5).to_dict()
    req["mdc_checksum"] = engine.checksum
    status, body = await post(http, engine.url + "/engine/prefill", req)
    assert status == 200, body
    return dict(body["kv_transfer"])


async def decode(http: aiohttp.ClientSession, engine: Engine, handle: dict[str, Any], tokens: int = 100) -> tuple[int, dict[str, Any]]:
    req = request(prompt(tokens), max_tokens=5).to_dict()
    req.update(mdc_checksum=engine.checksum, kv_transfer=handle, stream=False)
    return await post(http, engine.url + "/engine/generate", req)


@pytest.mark.parametrize(
    ("decode_domains", "distance"),
    [
        (ZONE_A_RACK_1, topology.LOCAL),
        (ZONE_A_RACK_1_OTHER_HOST, "host"),
        (ZONE_A_RACK_2, "rack"),
        (ZONE_B, "zone"),
        ({}, topology.UNKNOWN),
    ],
    ids=["same-host", "same-rack", "same-zone", "cross-zone", "unlabelled"],
)
async def test_a_kv_transfer_is_priced_by_the_distance_between_the_engines(
    host: EngineHost, http: aiohttp.ClientSession, decode_domains: dict[str, str], distance: str
) -> None:
    p = await host.add(config(role="prefill", topology=topo(ZONE_A_RACK_1)))
    d = await host.add(config(role="decode", topology=topo(decode_domains)))
    handle = await prefill(http, p)
    status, body = await decode(http, d, handle)
    assert status == 200, body
    assert len(body["token_ids"]) == 5
    [record] = d.log.since(0)
    assert record.transfer is not None
    t = record.transfer
    assert (t.source_engine, t.dest_engine, t.distance) == (p.engine_id, d.engine_id, distance)
    assert (t.source_domains, t.dest_domains) == (ZONE_A_RACK_1, decode_domains)
    assert t.kv_bytes == 100 * p.config.kv_bytes_per_token
    assert t.duration_ms == pytest.approx(topology.DEFAULT_QOS[distance].transfer_ms(t.kv_bytes))
    [prefilled] = p.log.since(0)
    assert prefilled.outcome == "prefilled"


def test_crossing_a_zone_costs_more_than_staying_in_a_rack() -> None:
    kv_bytes = 100 * 131072
    ordered = [topology.DEFAULT_QOS[d].transfer_ms(kv_bytes) for d in (topology.LOCAL, "host", "rack", "zone")]
    assert ordered == sorted(ordered)
    assert ordered[-1] > 5 * ordered[2]


async def test_a_pulled_handle_cannot_be_pulled_twice(host: EngineHost, http: aiohttp.ClientSession) -> None:
    p = await host.add(config(role="prefill"))
    d = await host.add(config(role="decode"))
    handle = await prefill(http, p)
    assert (await decode(http, d, handle))[0] == 200
    status, body = await decode(http, d, handle)
    assert status == 404
    assert body["error"]["code"] == engine_api.KV_HANDLE_NOT_FOUND
    assert p.pool.active_blocks == 0  # the pinned blocks were released by the first pull


async def test_a_transfer_between_incompatible_kv_layouts_is_refused(host: EngineHost, http: aiohttp.ClientSession) -> None:
    p = await host.add(config(role="prefill", tensor_parallel_size=2))
    d = await host.add(config(role="decode", tensor_parallel_size=1))
    handle = await prefill(http, p)
    status, body = await decode(http, d, handle)
    assert status == 409
    assert body["error"]["code"] == engine_api.KV_LAYOUT_MISMATCH
    assert "tensor_parallel_size: 1 != 2" in body["error"]["message"]
    [record] = d.log.since(0)
    assert (record.outcome, record.transfer) == (engine_api.KV_LAYOUT_MISMATCH, None)


async def test_the_prefill_side_also_refuses_a_pull_into_an_incompatible_layout(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    p = await host.add(config(role="prefill", engine_version="2"))
    handle = await prefill(http, p)
    dest = {"block_size": 16, "tensor_parallel_size": 1, "dtype": "fp16", "engine_version": "1"}
    status, body = await post(http, p.url + "/engine/kv/pull", {"handle_id": handle["handle_id"], "dest_layout": dest})
    assert status == 409
    assert "engine_version" in body["error"]["message"]


async def test_a_request_preprocessed_with_another_model_card_is_refused(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(block_size=32))
    old_card = ModelCard(served_model_name="m", block_size=16).checksum()
    req = request(prompt(40)).to_dict()
    req.update(mdc_checksum=old_card, stream=False, frontend="fe-old")
    status, body = await post(http, engine.url + "/engine/generate", req)
    assert status == 422
    assert body["error"]["code"] == engine_api.MDC_CHECKSUM_MISMATCH
    assert "block_size 32" in body["error"]["message"]
    [record] = engine.log.since(0)
    assert (record.outcome, record.mdc_checksum, record.frontend) == (engine_api.MDC_CHECKSUM_MISMATCH, old_card, "fe-old")
    req["mdc_checksum"] = engine.checksum
    assert (await post(http, engine.url + "/engine/generate", req))[0] == 200


async def test_a_request_in_another_runtime_protocol_is_refused(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(protocol_version="2"))
    req = request(prompt(10)).to_dict()
    req.update(protocol_version="1", stream=False)
    status, body = await post(http, engine.url + "/engine/generate", req)
    assert status == 400
    assert body["error"]["code"] == engine_api.RUNTIME_PROTOCOL_MISMATCH
    assert engine.log.since(0)[0].outcome == engine_api.RUNTIME_PROTOCOL_MISMATCH


async def test_a_worker_of_the_wrong_role_refuses_the_request(host: EngineHost, http: aiohttp.ClientSession) -> None:
    p = await host.add(config(role="prefill"))
    req = request(prompt(10)).to_dict()
    status, body = await post(http, p.url + "/engine/generate", req)
    assert (status, body["error"]["code"]) == (400, engine_api.WRONG_ROLE)
    status, body = await post(http, p.url + "/v1/completions", {"model": "m", "prompt": "hi"})
    assert (status, body["error"]["code"]) == (400, engine_api.WRONG_ROLE)


async def test_the_model_card_checksum_ignores_runtime_settings() -> None:
    base = ModelCard(served_model_name="m")
    assert base.checksum() == ModelCard(served_model_name="m").checksum()
    for changed in (
        ModelCard(served_model_name="m2"),
        ModelCard(served_model_name="m", block_size=32),
        ModelCard(served_model_name="m", context_length=4096),
        ModelCard(served_model_name="m", tokenizer="other"),
        ModelCard(served_model_name="m", worker_type="decode"),
    ):
        assert changed.checksum() != base.checksum()


async def test_streamed_engine_generation_ends_with_a_final_line(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config())
    req = request(prompt(10), max_tokens=4).to_dict()
    async with http.post(engine.url + "/engine/generate", json=req) as resp:
        lines = [line async for line in resp.content]
    assert len(lines) == 5
    assert lines[-1].startswith(b'{"finish_reason": "length"')
