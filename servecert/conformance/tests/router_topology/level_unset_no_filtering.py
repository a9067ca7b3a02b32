"""Level unset: no topology filtering at all, identical to routing without topology, prefill choice included.

Two prefill workers, one beside a decode worker and one in a domain no decode worker is in; two
decode workers in two domains. With no level, both prefill workers must be chosen (no
pre-selection) and the decode worker in the other domain must receive KV (no filtering); with the
near decode worker gone, requests are still served.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes

REQUESTS = 32


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.prefill(level, 2, "alone"), shapes.decode(level, 0), shapes.decode(level, 1)]
    deployment = await ctx.deploy(router_checks.spec(workers, None))
    alone, near, far = deployment.workers[1], deployment.workers[2], deployment.workers[3]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=REQUESTS, concurrency=8)
        assertions.requests_must_succeed(run.outcomes, "level unset, decode workers in two domains")
        transfers = run.transfers()
        destinations, sources = {t.dest for t in transfers}, {t.source for t in transfers}
        assert far.engine_id in destinations, (
            f"level unset: the decode worker in the other {level} ({far.engine_id}) never received KV in {REQUESTS} requests "
            f"at concurrency 8; routing must not filter by topology (destinations: {sorted(destinations)})"
        )
        assert alone.engine_id in sources, (
            f"level unset: the prefill worker in a {level} without decode workers ({alone.engine_id}) was never chosen in "
            f"{REQUESTS} requests at concurrency 8; prefill choice must not depend on topology (sources: {sorted(sources)})"
        )
        await deployment.remove_worker(near)
        far_only = await router_checks.drive(session, deployment, count=6, concurrency=3)
    assertions.requests_must_succeed(far_only.outcomes, f"level unset, decode only in another {level}")


TEST = ConformanceTest(
    short_name="RouterTopologyLevelUnsetNoFiltering",
    description="Seed 000: with kv_transfer_topology_level unset there is no topology filtering of decode or prefill workers.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_UNSET),
    seed=SeedRef("000", "Failure Handling", "No topology filtering, identical to current behavior"),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
