"""A prefill worker missing the level's label is in no domain: fail refuses, fallback serves.

The only prefill worker lacks the configured level's label; one decode worker shares every other
label with it, another sits on the other side. No decode worker is in the prefill's domain, since
it has none: under ``fail`` every request gets an error and no KV moves; under ``fallback`` every
request is served. A router that reads a missing label as "any domain" serves under fail; one
that refuses unlabelled prefill workers outright fails under fallback.
"""

from __future__ import annotations

import aiohttp

from conformance.suite import features
from conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from conformance.tests.router_topology import _assertions as assertions
from conformance.tests.router_topology import _checks as router_checks
from conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level, policy = ctx.params["level"], ctx.params["policy"]
    workers = [shapes.unlabelled_prefill(level, "unlabelled"), shapes.decode(level, 0), shapes.decode(level, 1)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, policy))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=8, concurrency=4)
    what = f"policy={policy}, the only prefill worker lacks the {level} label"
    if policy == "fail":
        assertions.requests_must_fail(run.outcomes, what)
        assertions.transfers_must_not_exist(run.transfers(), what)
        return
    assertions.requests_must_succeed(run.outcomes, what)
    assertions.transfers_must_exist(run.transfers(), len(run.outcomes), what)


TEST = ConformanceTest(
    short_name="RouterTopologyPrefillMissingLabel",
    description="Seed 000 row 2 on the prefill side: a prefill worker without the level's label has no same-domain decode "
    "worker; fail returns an error, fallback routes to any decode worker.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_FALLBACK),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Worker missing topology level for configured domain",
        note="The row names no side; for a prefill worker the suite reads it with row 1: it is in no domain, so no decode "
        "worker is in its domain.",
    ),
    cases=tuple(Case(f"{level}-{policy}", {"level": level, "policy": policy}) for level in shapes.LEVELS for policy in shapes.POLICIES),
    check=check,
)
