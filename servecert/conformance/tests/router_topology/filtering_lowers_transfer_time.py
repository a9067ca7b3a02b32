"""With cross-domain transfers priced higher, filtering lowers the median KV-transfer time of requests.

The transfer time is the fake network's price recorded by the decode engine (latency + bytes /
bandwidth of the distance), the part of TTFT topology decides. The client-side TTFT medians are
logged beside it for people reading the report; only the recorded prices are compared.
"""

from __future__ import annotations

import statistics

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes

REQUESTS = 32


async def transfer_p50(ctx: TestContext, level: str, filtered: bool) -> float:
    workers = [shapes.prefill(level, 0), shapes.decode(level, 0), *(shapes.decode(level, 1) for _ in range(3))]
    deployment = await ctx.deploy(router_checks.spec(workers, level if filtered else None, "fail"))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=REQUESTS, concurrency=8)
    assertions.requests_must_succeed(run.outcomes, f"filtered={filtered}")
    durations = [t.duration_ms for t in run.transfers()]
    assertions.transfers_must_exist(run.transfers(), REQUESTS, f"filtered={filtered}")
    ttfts = [o.ttft_s for o in run.outcomes if o.ttft_s is not None]
    ctx.log.info(
        "level=%s filtered=%s transfer p50 %.3f ms, client TTFT p50 %.2f ms",
        level,
        filtered,
        statistics.median(durations),
        1000 * statistics.median(ttfts),
    )
    return statistics.median(durations)


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    unfiltered = await transfer_p50(ctx, level, filtered=False)
    filtered = await transfer_p50(ctx, level, filtered=True)
    assert filtered < unfiltered, (
        f"level={level}: median KV-transfer time with filtering ({filtered:.3f} ms) must be lower than without "
        f"({unfiltered:.3f} ms) when three of four decode workers are across the boundary"
    )


TEST = ConformanceTest(
    short_name="RouterTopologyFilteringLowersTransferTime",
    description="Filtering by topology lowers the median priced KV-transfer time when most decode capacity is across the boundary.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_LATENCY),
    seed=SeedRef(
        "000",
        "The Problem",
        "This transfer is latency-sensitive — crossing an AZ boundary for example adds significant network latency.",
        note="The seed's motivation, not a rule: the suite measures the fake network's priced transfer time with and without "
        "the filter.",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
