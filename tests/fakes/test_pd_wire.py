"""vLLM's and SGLang's P/D handshakes on the fake engine's OpenAI routes, played by the test as each router plays them.

vLLM (vllm-router, NIXL connector): the prefill leg carries ``kv_transfer_params
{"do_remote_decode": true}``; the decode leg carries the prefill answer's params unchanged.
SGLang (sglang-router): both legs carry the same body with ``bootstrap_host/port/room``, sent at
once. The verdicts come from the engines' ground-truth records.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from servecert.fakes.host import EngineHost
from servecert.fakes.topology_env import TopologyConfig
from servecert.protocol import engine_api, tokenizer
from tests.conftest import config

ZONE_A = {"zone": "a", "rack": "r1"}
ZONE_B = {"zone": "b", "rack": "r9"}
PROMPT = " ".join(tokenizer.decode_token(t) for t in range(1000, 1040))


def engine_config(role: str, protocol: str, domains: dict[str, str]) -> Any:
    return config(role=role, pd_protocol=protocol, topology=TopologyConfig(enabled=True, domains=domains))


async def post(http: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with http.post(url + "/v1/completions", json=body) as resp:
        return resp.status, await resp.json()


def completion(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "prompt": PROMPT, "max_tokens": 6, "ignore_eos": True, **extra}


async def test_vllm_prefill_answers_with_kv_transfer_params_and_decode_pulls_from_them(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    p = await host.add(engine_config("prefill", engine_api.PD_VLLM, ZONE_A))
    d = await host.add(engine_config("decode", engine_api.PD_VLLM, ZONE_B))
    ask = {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None, "remote_block_ids": None,
           "remote_host": None, "remote_port": None}  # fmt: skip
    status, answer = await post(http, p.url, completion(max_tokens=1, min_tokens=1, stream=False, kv_transfer_params=ask))
    assert status == 200, answer
    params = answer["kv_transfer_params"]
    where = urlsplit(p.url)
    assert (params["do_remote_prefill"], params["do_remote_decode"]) == (True, False)
    assert (params["remote_host"], params["remote_port"], params["remote_engine_id"]) == (where.hostname, where.port, p.engine_id)
    assert len(params["remote_block_ids"]) == 3  # 40 prompt tokens in blocks of 16
    assert answer["usage"]["completion_tokens"] == 1 and answer["choices"][0]["finish_reason"] == "length"

    status, body = await post(http, d.url, completion(kv_transfer_params=params))
    assert status == 200, body
    assert body["usage"]["completion_tokens"] == 6
    [record] = d.log.since(0)
    assert record.transfer is not None
    assert (record.transfer.source_engine, record.transfer.dest_engine) == (p.engine_id, d.engine_id)
    assert (record.transfer.source_domains, record.transfer.dest_domains) == (ZONE_A, ZONE_B)
    [prefilled] = p.log.since(0)
    assert prefilled.outcome == "prefilled"


async def test_vllm_decode_without_a_prefill_serves_the_whole_request(host: EngineHost, http: aiohttp.ClientSession) -> None:
    d = await host.add(engine_config("decode", engine_api.PD_VLLM, ZONE_B))
    status, body = await post(http, d.url, completion())
    assert status == 200, body
    [record] = d.log.since(0)
    assert record.transfer is None and record.outcome == "ok"


async def test_vllm_decode_leg_without_where_the_kv_is_is_refused_naming_the_fields(host: EngineHost, http: aiohttp.ClientSession) -> None:
    d = await host.add(engine_config("decode", engine_api.PD_VLLM, ZONE_B))
    status, body = await post(http, d.url, completion(kv_transfer_params={"do_remote_prefill": True, "remote_host": "127.0.0.1"}))
    assert status == 400
    assert "remote_port, remote_request_id" in body["error"]["message"]


async def test_an_engine_of_the_suites_protocol_ignores_kv_transfer_params(host: EngineHost, http: aiohttp.ClientSession) -> None:
    d = await host.add(engine_config("decode", engine_api.PD_SERVECERT, ZONE_B))
    params = {"do_remote_prefill": True, "remote_host": "127.0.0.1", "remote_port": 1, "remote_request_id": "x"}
    status, body = await post(http, d.url, completion(kv_transfer_params=params))
    assert status == 200, body
    [record] = d.log.since(0)
    assert record.transfer is None


def sglang_body(prefill_url: str, room: int, **extra: Any) -> dict[str, Any]:
    where = urlsplit(prefill_url)
    return completion(bootstrap_host=where.hostname, bootstrap_port=where.port, bootstrap_room=room, **extra)


@pytest.mark.parametrize("decode_first_s", [0.0, 0.3], ids=["together", "decode-first"])
async def test_sglang_legs_pair_through_the_room(host: EngineHost, http: aiohttp.ClientSession, decode_first_s: float) -> None:
    p = await host.add(engine_config("prefill", engine_api.PD_SGLANG, ZONE_A))
    d = await host.add(engine_config("decode", engine_api.PD_SGLANG, ZONE_B))
    body = sglang_body(p.url, random.randrange(2**63))

    async def prefill_later() -> tuple[int, dict[str, Any]]:
        await asyncio.sleep(decode_first_s)
        return await post(http, p.url, body)

    (p_status, p_body), (d_status, d_body) = await asyncio.gather(prefill_later(), post(http, d.url, body))
    assert (p_status, d_status) == (200, 200), (p_body, d_body)
    assert d_body["usage"]["completion_tokens"] == 6
    [record] = d.log.since(0)
    assert record.transfer is not None
    assert (record.transfer.source_engine, record.transfer.source_domains, record.transfer.dest_domains) == (p.engine_id, ZONE_A, ZONE_B)


async def test_sglang_decode_without_a_bootstrap_port_is_refused_saying_what_to_pass(host: EngineHost, http: aiohttp.ClientSession) -> None:
    d = await host.add(engine_config("decode", engine_api.PD_SGLANG, ZONE_B))
    body = sglang_body("http://127.0.0.1:1", 7)
    body["bootstrap_port"] = None
    status, answer = await post(http, d.url, body)
    assert status == 400
    assert "--prefill URL PORT" in answer["error"]["message"]


async def test_sglang_batched_rooms_are_refused(host: EngineHost, http: aiohttp.ClientSession) -> None:
    p = await host.add(engine_config("prefill", engine_api.PD_SGLANG, ZONE_A))
    status, answer = await post(http, p.url, sglang_body(p.url, 1) | {"bootstrap_room": [1, 2]})
    assert status == 400
    assert "one prompt per request" in answer["error"]["message"]
