"""Before prefill selection, prefill workers with a same-domain decode worker are preferred."""

from __future__ import annotations

import aiohttp

from conformance.suite import features
from conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from conformance.tests.router_topology import _assertions as assertions
from conformance.tests.router_topology import _checks as router_checks
from conformance.tests.router_topology import _placements as shapes


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.prefill(level, 1), shapes.decode(level, 0)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    near = deployment.workers[0]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=24, concurrency=6)
    assertions.requests_must_succeed(run.outcomes, f"two prefill {level}s, decode in one of them, policy=fail")
    sources = {t.source for t in run.transfers()}
    assert sources == {near.engine_id}, (
        f"prefill preselection: only the prefill worker with a same-{level} decode worker ({near.engine_id}) may be chosen; "
        f"KV came from {sorted(sources)}"
    )


TEST = ConformanceTest(
    short_name="RouterTopologyPrefillPreselection",
    description="Seed 000 row 4: prefill workers that have decode workers in their domain are preferred before prefill selection.",
    features=(
        features.DISAGGREGATED_SERVING,
        features.KV_TRANSFER_TOPOLOGY_FILTER,
        features.KV_TRANSFER_TOPOLOGY_PREFILL_PRESELECTION,
    ),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Filter for prefill workers that have decode workers in the same domain first and then fallback to all other prefill workers "
        "(window where a decode worker can join).",
    ),
    cases=tuple(Case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
