"""fallback policy: a prefill worker missing the level's label is served by any decode worker.

The fail half's placement (``RouterTopologyPrefillMissingLabel``): the only prefill worker lacks
the level's label, so no decode worker is in its domain, and fallback must serve every request.
A router that refuses unlabelled prefill workers outright fails here.
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
    workers = shapes.unlabelled_prefill_beside_decode(level)
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fallback"))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=8, concurrency=4)
    what = f"policy=fallback, the only prefill worker lacks the {level} label"
    assertions.requests_must_succeed(run.outcomes, what)
    assertions.transfers_must_exist(run.transfers(), len(run.outcomes), what)


TEST = ConformanceTest(
    short_name="RouterTopologyPrefillMissingLabelFallback",
    description="Seed 000 row 2 on the prefill side, fallback: a prefill worker without the level's label is served by any "
    "decode worker.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_FALLBACK),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Excluded when same-domain workers exist; eligible as fallback when none do",
        note="Read for the prefill side: it is in no domain, so none exist, and the request falls back.",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
