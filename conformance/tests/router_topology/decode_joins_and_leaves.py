"""fail policy while a same-domain decode worker joins and then leaves mid-run."""

from __future__ import annotations

import aiohttp

from conformance.suite import features
from conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from conformance.tests.router_topology import _assertions as assertions
from conformance.tests.router_topology import _checks as router_checks
from conformance.tests.router_topology import _placements as shapes
from fixtures import traffic


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    deployment = await ctx.deploy(router_checks.spec([shapes.prefill(level, 0), shapes.decode(level, 1)], level, "fail"))
    t = ctx.timeouts
    async with aiohttp.ClientSession() as session:
        before = await router_checks.drive(session, deployment, count=4, concurrency=2)
        assertions.requests_must_fail(before.outcomes, f"before a decode worker joins the prefill's {level}")

        joined = await deployment.add_worker(shapes.decode(level, 0))

        async def served() -> bool:
            out = await traffic.complete(session, deployment.frontend_url, shapes.MODEL, traffic.unique_prompt())
            return out.ok

        await assertions.condition_must_hold_eventually(
            served,
            t.eventual_consistency_s,
            t.poll_interval_s,
            f"requests served after a decode worker joined the prefill's {level}",
            consecutive=t.required_consecutive_successes,
        )
        during = await router_checks.drive(session, deployment, truth=before.truth)
        assertions.requests_must_succeed(during.outcomes, f"with a same-{level} decode worker present")

        await deployment.remove_worker(joined)

        async def refused() -> bool:
            out = await traffic.complete(session, deployment.frontend_url, shapes.MODEL, traffic.unique_prompt())
            return not out.ok

        await assertions.condition_must_hold_eventually(
            refused,
            t.eventual_consistency_s,
            t.poll_interval_s,
            f"requests refused after the same-{level} decode worker left",
            consecutive=t.required_consecutive_successes,
        )
        await during.truth.refresh(deployment.workers)
    assertions.transfers_must_stay_within(during.transfers(), level, "across the worker joining and leaving")


TEST = ConformanceTest(
    short_name="RouterTopologyDecodeJoinsAndLeaves",
    description="A same-domain decode worker joining is used within the consistency bound; once it leaves, fail applies again.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "Phase 1 — Worker Metadata (Dynamo)",
        "Verify topology metadata flows through RuntimeConfigWatch to the router",
        note="The seed sets no bound on joins and leaves: the suite requires the fail filter to follow the current decode set "
        "within its eventual-consistency bound.",
    ),
    cases=tuple(Case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
