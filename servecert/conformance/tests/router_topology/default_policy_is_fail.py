"""A level with no mismatch policy set behaves as fail: the seed's default."""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 1)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, None))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=6, concurrency=3)
    what = f"level={level}, mismatch policy left unset, decode only in another {level}"
    assertions.requests_must_fail(run.outcomes, what)
    assertions.transfers_must_not_exist(run.transfers(), what)


TEST = ConformanceTest(
    short_name="RouterTopologyDefaultPolicyIsFail",
    description="With the level set and the mismatch policy unset, no same-domain decode worker means an error, as under fail.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "The default for mismachPolicy will be fail - constraining kv transfers to the same topology domain is a hard "
        "constraint so it makes sense to fail a request if this cannot be satisfied.",
    ),
    cases=tuple(Case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
