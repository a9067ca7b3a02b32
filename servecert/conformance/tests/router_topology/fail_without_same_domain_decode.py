"""fail policy, no same-domain decode worker: the client gets an error and no KV crosses the boundary."""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 1)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=6, concurrency=3)
    assertions.requests_must_fail(run.outcomes, f"decode only in another {level}, policy=fail")
    assertions.transfers_must_not_exist(run.transfers(), f"decode only in another {level}, policy=fail")


TEST = ConformanceTest(
    short_name="RouterTopologyFailWithoutSameDomainDecode",
    description="Seed 000 runtime table row 1, fail: no same-domain decode worker -> error to the client, no cross-domain transfer.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "3. KV Router Filtering",
        "a. fail: return an error when no decode workers match the prefill worker\u2019s topology domain",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
