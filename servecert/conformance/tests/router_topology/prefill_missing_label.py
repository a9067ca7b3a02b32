"""fail policy: a prefill worker missing the level's label is in no domain, so its requests get an error.

The only prefill worker lacks the configured level's label; one decode worker shares every other
label with it, another sits on the other side. No decode worker is in the prefill's domain, since
it has none: every request gets an error and no KV moves. A router that reads a missing label as
"any domain" serves. The fallback half is ``RouterTopologyPrefillMissingLabelFallback``.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = shapes.unlabelled_prefill_beside_decode(level)
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=8, concurrency=4)
    what = f"policy=fail, the only prefill worker lacks the {level} label"
    assertions.requests_must_fail(run.outcomes, what)
    assertions.transfers_must_not_exist(run.transfers(), what)


TEST = ConformanceTest(
    short_name="RouterTopologyPrefillMissingLabel",
    description="Seed 000 row 2 on the prefill side, fail: a prefill worker without the level's label has no same-domain "
    "decode worker, so the client gets an error.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Worker missing topology level for configured domain",
        note="The row names no side; for a prefill worker the suite reads it with row 1: it is in no domain, so no decode "
        "worker is in its domain.",
    ),
    cases=tuple(Case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
