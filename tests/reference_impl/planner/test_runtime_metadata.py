"""Runtime metadata (seed 003, Step 1 and Step 3): the KV hit rate, read from the prefilling engines, and speculative
decoding's accept length, read from the decoding ones; each kept by last-value semantics and applied as an input
feature: the hit rate to the prompt tokens a request makes an engine prefill, the accept length to a token's ITL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from protocol.planner_decisions import MemoryDecisionStore
from reference_impl.planner import traffic
from reference_impl.planner.config import PlannerConfig
from reference_impl.planner.connectors.virtual import VirtualConnector
from reference_impl.planner.planner import Planner, Worker
from reference_impl.planner.traffic import TrafficSample

METRICS = """# TYPE vllm:request_success_total counter
vllm:request_success_total{{model_name="m"}} {done}
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{model_name="m"}} {queries}
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{model_name="m"}} {hits}
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{model_name="m"}} {drafts}
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{model_name="m"}} {accepted}
"""


class Engine:
    """A /metrics endpoint whose prefix-cache counters the test sets."""

    def __init__(self) -> None:
        self.counters = {"done": 0, "queries": 0, "hits": 0, "drafts": 0, "accepted": 0}

    async def metrics(self, _: web.Request) -> web.Response:
        return web.Response(text=METRICS.format(**self.counters))


@pytest.fixture
async def engines() -> AsyncIterator[tuple[dict[str, Engine], dict[str, str]]]:
    found: dict[str, Engine] = {"prefill": Engine(), "decode": Engine()}
    urls: dict[str, str] = {}
    runners = []
    for name, engine in found.items():
        app = web.Application()
        app.router.add_get("/metrics", engine.metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        urls[name] = f"http://127.0.0.1:{port}"
        runners.append(runner)
    yield found, urls
    for runner in runners:
        await runner.cleanup()


async def test_the_hit_rate_counts_the_prefilling_engines_only(engines: tuple[dict[str, Engine], dict[str, str]]) -> None:
    found, urls = engines
    pairs = [(name, url) for name, url in urls.items()]
    async with aiohttp.ClientSession() as session:
        meter = traffic.TrafficMeter(session)
        await meter.sample(pairs, 6.0, prefilling={"prefill"})
        found["prefill"].counters.update(queries=1024, hits=896)
        found["decode"].counters.update(queries=1024, hits=0)  # a decode engine that did count lookups must not dilute it
        assert (await meter.sample(pairs, 6.0, prefilling={"prefill"})).kv_hit_rate == pytest.approx(0.875)
        assert (await meter.sample(pairs, 6.0, prefilling={"prefill"})).kv_hit_rate is None  # no lookup in the window


async def test_the_accept_length_counts_the_decoding_engines_only(engines: tuple[dict[str, Engine], dict[str, str]]) -> None:
    found, urls = engines
    pairs = [(name, url) for name, url in urls.items()]
    async with aiohttp.ClientSession() as session:
        meter = traffic.TrafficMeter(session)
        await meter.sample(pairs, 6.0, decoding={"decode"})
        found["decode"].counters.update(drafts=100, accepted=150)
        found["prefill"].counters.update(drafts=100, accepted=0)
        assert (await meter.sample(pairs, 6.0, decoding={"decode"})).accept_length == pytest.approx(2.5)
        assert (await meter.sample(pairs, 6.0, decoding={"decode"})).accept_length is None


def test_a_merged_window_keeps_the_newest_valid_hit_rate() -> None:
    assert traffic.merged(TrafficSample(6, 512, 32, 6.0, 0.5), TrafficSample(6, 512, 32, 6.0, None)).kv_hit_rate == 0.5
    assert traffic.merged(TrafficSample(6, 512, 32, 6.0, 0.5), TrafficSample(6, 512, 32, 6.0, 0.8)).kv_hit_rate == 0.8


class PrefillAndDecode:
    def workers(self) -> list[Worker]:
        return [Worker("p", "http://127.0.0.1:9", "prefill"), Worker("d", "http://127.0.0.1:9", "decode")]


async def test_the_planner_keeps_the_last_valid_values_and_applies_them() -> None:
    samples = iter([
        TrafficSample(0, 0, 0, 6.0), TrafficSample(12, 512, 32, 6.0, 0.875, 3.0), TrafficSample(12, 512, 32, 6.0)
    ])
    seen: list[tuple[set[str], set[str]]] = []

    async def sample(engines: object, seconds: float, prefilling: set[str], decoding: set[str]) -> TrafficSample:
        seen.append((set(prefilling), set(decoding)))
        return next(samples)

    async with aiohttp.ClientSession() as session:
        planner = Planner(PlannerConfig(isl=512), PrefillAndDecode(), VirtualConnector(MemoryDecisionStore(), 60), session)
        planner.traffic.sample = sample  # type: ignore[method-assign,assignment]
        assert (planner.prefill_tokens, planner.accept_length) == (512, 1.0)  # cold start: no discount, accept length 1
        workers = planner.source.workers()
        for now in (0.0, 6.0):
            await planner._throughput(workers, now)
        assert planner.prefill_tokens == pytest.approx(64)
        await planner._throughput(workers, 12.0)  # a window without lookups or drafts keeps the last valid values
        assert (planner.kv_hit_rate, planner.accept_length) == (pytest.approx(0.875), pytest.approx(3.0))
    assert seen == [({"p"}, {"d"})] * 3
