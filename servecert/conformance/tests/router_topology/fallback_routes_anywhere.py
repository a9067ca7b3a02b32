"""fallback policy, no same-domain decode worker: any decode worker serves, and a warning is logged.

The decode workers share nothing with the prefill worker: one has a value of its own at every
level, the other lacks the level's label (and shares the broader ones). Both must receive KV
(row 2's fallback cell makes the unlabelled one eligible), so a fallback that stays "near" the
prefill, or skips unlabelled workers, fails; and the implementation's own log must hold a
warning naming the level (row 1: "Log warning"), read through the adapter's ``log_records``.
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
    placed = shapes.domains(level, 0)
    workers = [
        shapes.worker("prefill", placed),
        shapes.worker("decode", shapes.sharing_nothing(placed), "shares-nothing"),
        shapes.unlabelled_decode(level, "unlabelled"),
    ]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fallback"))
    far, unlabelled = deployment.workers[1], deployment.workers[2]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=REQUESTS, concurrency=8)
    assertions.requests_must_succeed(run.outcomes, f"fallback, no decode worker in the prefill's {level}")
    transfers = run.transfers()
    assertions.transfers_must_exist(transfers, len(run.outcomes), "every request under fallback")
    assertions.destinations_must_be(transfers, {far.engine_id, unlabelled.engine_id}, "fallback")
    received = {t.dest for t in transfers}
    for ref, why in ((far, "sharing no label with the prefill"), (unlabelled, f"missing the {level} label")):
        assert ref.engine_id in received, (
            f"fallback with no same-{level} decode worker: the decode worker {why} ({ref.engine_id}) must be eligible, "
            f"but it received no KV in {REQUESTS} requests at concurrency 8"
        )
    assertions.log_must_warn_of(await assertions.log_of(deployment), level, f"fallback across the {level} boundary")


TEST = ConformanceTest(
    short_name="RouterTopologyFallbackRoutesAnywhere",
    description="Seed 000 rows 1-2, fallback: with no same-domain decode worker, any decode worker (missing labels included) "
    "serves, and a warning naming the level is logged.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_FALLBACK),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Log warning, route to any available decode worker",
        note="Also row 2's fallback cell (a worker missing the level is eligible when no same-domain worker exists). "
        "The warning is read from the implementation's log through the adapter (LoggingDeployment).",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
