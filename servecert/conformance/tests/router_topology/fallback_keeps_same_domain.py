"""fallback policy with a same-domain decode worker present: it is still the only one used."""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 0), shapes.decode(level, 1), shapes.unlabelled_decode(level)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fallback"))
    same = deployment.workers[1]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment)
    assertions.requests_must_succeed(run.outcomes, "fallback with a same-domain decode worker")
    assertions.destinations_must_be(run.transfers(), {same.engine_id}, f"fallback while a same-{level} decode worker exists")


TEST = ConformanceTest(
    short_name="RouterTopologyFallbackKeepsSameDomain",
    description="Seed 000 row 2, fallback: workers missing the level, and other domains, are excluded while same-domain workers exist.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_FALLBACK),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Excluded when same-domain workers exist; eligible as fallback when none do",
        note="Also that other-domain workers stay unused while a same-domain one exists (3b: fallback only if none exist).",
    ),
    cases=tuple(Case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
