"""Level unset: no topology filtering at all, identical to routing without topology."""

from __future__ import annotations

import aiohttp

from conformance.suite import features
from conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from conformance.tests.router_topology import _assertions as assertions
from conformance.tests.router_topology import _checks as router_checks
from conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 0), shapes.decode(level, 1)]
    deployment = await ctx.deploy(router_checks.spec(workers, None))
    far = deployment.workers[2]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=32, concurrency=8)
        assertions.requests_must_succeed(run.outcomes, "level unset, decode workers in two domains")
        destinations = {t.dest for t in run.transfers()}
        assert far.engine_id in destinations, (
            f"level unset: the decode worker in the other {level} ({far.engine_id}) never received KV in 32 requests "
            f"at concurrency 8; routing must not filter by topology (destinations: {sorted(destinations)})"
        )
        await deployment.remove_worker(deployment.workers[1])
        far_only = await router_checks.drive(session, deployment, count=6, concurrency=3)
    assertions.requests_must_succeed(far_only.outcomes, f"level unset, decode only in another {level}")


TEST = ConformanceTest(
    short_name="RouterTopologyLevelUnsetNoFiltering",
    description="Seed 000: with kv_transfer_topology_level unset there is no topology filtering; behaviour is as without topology.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_UNSET),
    seed=SeedRef("000", "Failure Handling", "No topology filtering, identical to current behavior"),
    cases=tuple(Case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
