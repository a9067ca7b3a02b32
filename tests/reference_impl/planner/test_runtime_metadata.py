"""Runtime metadata (seed 003, Step 1 and Step 3): the KV hit rate, read from the prefilling engines, and speculative
decoding's accept length, read from the decoding ones; each kept by last-value semantics and applied as an input
feature: the hit rate to the prompt tokens a request makes an engine prefill, the accept length to a token's ITL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from servecert.protocol.planner_decisions import MemoryDecisionStore
from servecert.reference_impl.planner import traffic
from servecert.reference_impl.planner.config import PlannerConfig
from servecert.reference_impl.planner.connectors.virtual import VirtualConnector
from servecert.reference_impl.planner.planner import Planner, Worker
from servecert.reference_impl.planner.traffic import TrafficSample

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


@pytest.mark.parametrize(
    ("field", "roles", "counters", "expected"),
    [
        # a decode engine that did count lookups must not dilute the hit rate
        ("kv_hit_rate", {"prefilling": {"prefill"}}, {"prefill": {"queries": 1024, "hits": 896}, "decode": {"queries": 1024}}, 0.875),
        ("accept_length", {"decoding": {"decode"}}, {"decode": {"drafts": 100, "accepted": 150}, "prefill": {"drafts": 100}}, 2.5),
    ],
)
async def test_each_figure_counts_only_the_engines_that_make_it(
    engines: tuple[dict[str, Engine], dict[str, str]],
    field: str,
    roles: dict[str, set[str]],
    counters: dict[str, dict[str, int]],
    expected: float,
) -> None:
    found, urls = engines
    pairs = list(urls.items())
    async with aiohttp.ClientSession() as session:
        meter = traffic.TrafficMeter(session)
        await meter.sample(pairs, 6.0, **roles)
        for name, values in counters.items():
            found[name].counters.update(values)
        assert getattr(await meter.sample(pairs, 6.0, **roles), field) == pytest.approx(expected)
        assert getattr(await meter.sample(pairs, 6.0, **roles), field) is None  # nothing looked up or drafted in the window


async def test_an_added_engine_counts_from_zero_and_an_unanswered_scrape_loses_nothing(
    engines: tuple[dict[str, Engine], dict[str, str]],
) -> None:
    """An engine the planner added started its counters at zero: all it served counts in the window it appeared in (a
    meter that counted it from its next scrape read 2.0 of 3.84 requests/s right after a x4 step, and the floor fell)."""
    found, urls = engines
    both = list(urls.items())
    async with aiohttp.ClientSession() as session:
        meter = traffic.TrafficMeter(session)
        found["decode"].counters["done"] = 50
        await meter.sample([("decode", urls["decode"])], 6.0)  # the planner's start: history is not a window's
        found["decode"].counters["done"], found["prefill"].counters["done"] = 60, 4
        assert (await meter.sample(both, 6.0)).requests == 14  # 10 more on decode, 4 on prefill since it was added
        found["prefill"].counters["done"] = 3
        assert (await meter.sample(both, 6.0)).requests == 3  # prefill restarted: a counter reset counts from zero
        await meter.sample([("decode", "http://127.0.0.1:9"), ("prefill", urls["prefill"])], 6.0)  # decode does not answer
        found["decode"].counters["done"] = 65
        assert (await meter.sample(both, 6.0)).requests == 5  # the gap once, not decode's whole life


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
        assert planner.kv_hit_rate == pytest.approx(0.875)
        assert planner.accept_length == pytest.approx(3.0)
    assert seen == [({"p"}, {"d"})] * 3
