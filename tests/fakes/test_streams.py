"""What engines publish: KV events, forward-pass metrics, Prometheus metrics, metadata, ground truth."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp

from servecert.fakes.host import EngineHost, addresses
from servecert.protocol import waiting
from tests.conftest import config

COMPLETION = {"model": "m", "prompt": " ".join(f"w{i}" for i in range(40)), "max_tokens": 3, "ignore_eos": True}


async def sse_records(http: aiohttp.ClientSession, url: str, want: int, timeout: float = 10.0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    async def read() -> None:
        async with http.get(url) as resp:
            async for line in resp.content:
                if line.startswith(b"data: "):
                    out.append(json.loads(line[6:]))
                    if len(out) >= want:
                        return

    await asyncio.wait_for(read(), timeout)
    return out


async def test_kv_events_are_replayed_and_streamed_over_the_network(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config())
    async with http.post(engine.url + "/v1/completions", json=COMPLETION) as resp:
        assert resp.status == 200
    events = await sse_records(http, engine.url + "/events/kv?since=0&max_seconds=5", want=2)
    assert [e["kind"] for e in events] == ["stored", "stored"]  # 40 prompt tokens -> 2 full blocks
    assert events[1]["parent_hash"] == events[0]["block_hashes"][0]
    assert all(e["engine_id"] == engine.engine_id for e in events)


async def test_decode_workers_publish_no_kv_events(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(role="decode"))
    async with http.post(engine.url + "/v1/completions", json=COMPLETION) as resp:
        assert resp.status == 200
    assert list(engine.kv_events) == []


async def test_forward_pass_metrics_stream_per_iteration_with_the_planners_fields(
    host: EngineHost, http: aiohttp.ClientSession
) -> None:
    engine = await host.add(config())
    reader = asyncio.create_task(sse_records(http, engine.url + "/events/fpm?max_seconds=5", want=3))
    async for _ in waiting.holding_async(1.0, 0.02):  # bounded, best-effort wait for the subscription to attach
        if engine.fpm_listeners:
            break
    async with http.post(engine.url + "/v1/completions", json=COMPLETION) as resp:
        assert resp.status == 200
    records = await reader
    first = records[0]
    assert {"worker_id", "counter_id", "wall_time", "scheduled_requests", "queued_requests"} <= set(first)
    assert first["worker_id"] == engine.engine_id
    assert first["scheduled_requests"]["num_prefill_requests"] == 1
    assert first["scheduled_requests"]["sum_prefill_tokens"] == 40
    assert [r["counter_id"] for r in records] == sorted(r["counter_id"] for r in records)
    # Seed 003: wall_time is the iteration's execution time (the regression target), not a timestamp.
    assert first["wall_time"] == engine.config.timing.prefill_ms(40) / 1000.0 > 0


async def test_metrics_use_vllms_names(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config())
    async with http.post(engine.url + "/v1/completions", json=COMPLETION) as resp:
        assert resp.status == 200
    async with http.get(engine.url + "/metrics") as resp:
        text = await resp.text()
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_success_total",
        "vllm:generation_tokens_total",
    ):
        assert name in text, name
    assert 'vllm:generation_tokens_total{model_name="m"} 3.0' in text


async def test_metadata_publishes_card_layout_and_topology(host: EngineHost, http: aiohttp.ClientSession) -> None:
    from servecert.fakes.topology_env import TopologyConfig

    engine = await host.add(config(role="decode", topology=TopologyConfig(enabled=True, domains={"zone": "a"}, transfer_domain="zone")))
    async with http.get(engine.url + "/engine/metadata") as resp:
        meta = await resp.json()
    assert meta["card"]["checksum"] == engine.checksum
    assert meta["card"]["worker_type"] == "decode"
    assert meta["kv_layout"] == {"block_size": 16, "tensor_parallel_size": 1, "dtype": "fp16", "engine_version": "1"}
    assert meta["runtime_config"]["topology_domains"] == {"zone": "a"}
    assert meta["runtime_config"]["kv_transfer_domain"] == "zone"


async def test_ground_truth_is_queryable_from_a_sequence_number(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config())
    for _ in range(3):
        async with http.post(engine.url + "/v1/completions", json=COMPLETION) as resp:
            assert resp.status == 200
    async with http.get(engine.url + "/groundtruth?since=1") as resp:
        body = await resp.json()
    assert [r["seq"] for r in body["records"]] == [2, 3]
    async with http.get(engine.url + "/groundtruth?since=x") as resp:
        assert resp.status == 400


def test_many_engines_get_distinct_loopback_addresses() -> None:
    assert addresses("127.0.0.254", 3) == ["127.0.0.254", "127.0.1.1", "127.0.1.2"]
    assert addresses("10.0.0.1", 2) == ["10.0.0.1", "10.0.0.1"]


async def test_one_process_serves_engines_on_their_own_addresses(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engines = [await host.add(config(engine_id=f"e{i}"), address, 0) for i, address in enumerate(addresses("127.0.3.1", 16))]
    assert len({e.url.split(":")[1] for e in engines}) == 16
    for engine in engines:
        async with http.get(engine.url + "/health") as resp:
            assert (await resp.json())["engine_id"] == engine.engine_id


async def test_an_idle_engine_sends_heartbeats_with_wall_time_zero(host: EngineHost, http: aiohttp.ClientSession) -> None:
    engine = await host.add(config(heartbeat_seconds=0.05))
    records = await sse_records(http, engine.url + "/events/fpm?max_seconds=5", want=2)
    assert [r["wall_time"] for r in records] == [0.0, 0.0]  # seed 003: "Idle heartbeats (wall_time=0) are skipped"
    assert all(r["scheduled_requests"]["num_prefill_requests"] == 0 for r in records)
