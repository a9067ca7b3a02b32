"""Only the value at the configured level decides: not the finer levels, not the broader ones.

The prefill worker has two decode candidates. One agrees with it at the configured level and at
no other (its zone, rack and host differ, as far as the level allows); the other differs at the
configured level alone. The rule sends every KV transfer to the first. A router that compares
every label, or the path from the broadest level down to the configured one, finds no match
(the first differs elsewhere) and fails the requests; one that compares a fixed level (the host,
the zone) instead of the configured one picks the second. In the balanced shapes of
``RouterTopologyTransfersStayInDomain`` every worker of a side carries the same labels, so all
of these give the rule's answer there.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    placed = shapes.domains(level, 0)
    workers = [
        shapes.worker("prefill", placed),
        shapes.worker("decode", shapes.agreeing_only_at(level, placed), "agrees-at-level-only"),
        shapes.worker("decode", shapes.differing_only_at(level, placed), "differs-at-level-only"),
    ]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    agrees = deployment.workers[1]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment)
    what = f"level={level}: one decode worker shares only the {level} with the prefill, the other everything but the {level}"
    assertions.requests_must_succeed(run.outcomes, what)
    transfers = run.transfers()
    assertions.transfers_must_exist(transfers, len(run.outcomes), what)
    assertions.destinations_must_be(transfers, {agrees.engine_id}, what)


TEST = ConformanceTest(
    short_name="RouterTopologyMatchesTheLevelOnly",
    description="Decode candidates are those with the prefill's value at the configured level, whatever their finer and broader labels.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "3. KV Router Filtering",
        "kv_transfer_topology_level (read from env var DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL injected from operator): "
        "topology domain to constrain kv-cache transfers within",
        note="The level names the one domain compared; the suite's placements make every other level disagree.",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
