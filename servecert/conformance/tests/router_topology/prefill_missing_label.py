"""fail policy: a prefill worker missing the level's label is in no domain, so its requests get an error.

The only prefill worker lacks the configured level's label; one decode worker shares every other
label with it, another sits on the other side. No decode worker is in the prefill's domain, since
it has none: every request gets an error and no KV moves. A router that reads a missing label as
"any domain" serves. In the ``-decode-unlabelled-too`` cases the decode worker beside it lacks the
label as well: a router that compares the two missing values as equal moves every request's KV
to it. The fallback half is ``RouterTopologyPrefillMissingLabelFallback``.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level, both = ctx.params["level"], ctx.params["decode_unlabelled_too"]
    workers = shapes.unlabelled_prefill_beside_decode(level, both)
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=8, concurrency=4)
    what = f"policy=fail, the only prefill worker lacks the {level} label" + (", and so does a decode worker" if both else "")
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
        "worker is in its domain, not even one that lacks the label too.",
    ),
    cases=tuple(
        shapes.level_case(f"{level}-decode-unlabelled-too" if both else level, {"level": level, "decode_unlabelled_too": both})
        for level in shapes.LEVELS
        for both in (False, True)
    ),
    check=check,
)
