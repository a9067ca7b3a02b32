"""fail policy: a decode worker missing the level's label is never chosen."""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 0), shapes.unlabelled_decode(level)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    labelled, unlabelled = deployment.workers[1], deployment.workers[2]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment)
        assertions.requests_must_succeed(run.outcomes, "a same-domain decode worker exists")
        assertions.destinations_must_be(run.transfers(), {labelled.engine_id}, f"decode worker without a {level} label present")
        await deployment.remove_worker(labelled)
        only_unlabelled = await router_checks.drive(session, deployment, count=6, concurrency=3, truth=run.truth)
    assertions.requests_must_fail(only_unlabelled.outcomes, f"only a decode worker without a {level} label is left")
    transfers = [t for t in only_unlabelled.transfers() if t.dest == unlabelled.engine_id]
    assertions.transfers_must_not_exist(transfers, f"KV into the decode worker without a {level} label")


TEST = ConformanceTest(
    short_name="RouterTopologyExcludesWorkersMissingLabel",
    description="Seed 000 runtime table row 2, fail: a worker missing the configured level is excluded from selection.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Excluded from selection",
        note="Row 'Worker missing topology level for configured domain', fail; with only that worker left, row 1's error applies.",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
