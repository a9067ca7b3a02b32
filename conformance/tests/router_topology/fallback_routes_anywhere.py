"""fallback policy, no same-domain decode worker: requests are served by any decode worker."""

from __future__ import annotations

import aiohttp

from conformance.suite import features
from conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from conformance.tests.router_topology import _assertions as assertions
from conformance.tests.router_topology import _checks as router_checks
from conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 1), shapes.unlabelled_decode(level)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fallback"))
    other, unlabelled = deployment.workers[1], deployment.workers[2]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=32, concurrency=8)
    assertions.requests_must_succeed(run.outcomes, f"fallback, decode workers only outside the prefill's {level}")
    transfers = run.transfers()
    assertions.transfers_must_exist(transfers, len(run.outcomes), "every request under fallback")
    assertions.destinations_must_be(transfers, {other.engine_id, unlabelled.engine_id}, "fallback")
    assert unlabelled.engine_id in {t.dest for t in transfers}, (
        f"fallback with no same-{level} decode worker: the worker missing the {level} label must be eligible, "
        "but it received no KV in 32 requests at concurrency 8"
    )


TEST = ConformanceTest(
    short_name="RouterTopologyFallbackRoutesAnywhere",
    description="Seed 000 rows 1-2, fallback: with no same-domain decode worker, any decode worker (missing labels included) serves.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_FALLBACK),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Log warning, route to any available decode worker",
        note="Also row 2's fallback cell (a worker missing the level is eligible when no same-domain worker exists); "
        "the warning is not observed.",
    ),
    cases=tuple(Case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
