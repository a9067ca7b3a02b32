"""With a level configured, every KV transfer stays inside the prefill worker's domain at that level."""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.prefill(level, 1), shapes.decode(level, 0), shapes.decode(level, 1)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment)
    assertions.requests_must_succeed(run.outcomes, f"balanced {level}s, each with prefill and decode")
    transfers = run.transfers()
    assertions.transfers_must_exist(transfers, len(run.outcomes), "every disaggregated request")
    assertions.transfers_must_stay_within(transfers, level, f"level={level}, policy=fail")


TEST = ConformanceTest(
    short_name="RouterTopologyTransfersStayInDomain",
    description="With kv_transfer_topology_level set, the router only picks decode workers in the prefill worker's domain.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "3. KV Router Filtering",
        "When the KV Router is selecting a decode worker for a given prefill worker, "
        "it would filter the decoder workers for only those in the same topology domain.",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
