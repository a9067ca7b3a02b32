"""fail policy: when the same-domain decode leg fails, the request fails; it is never retried across the domain.

The prefill worker's only same-domain decode worker answers every request with an injected
error (the fake engines' fault injection); another decode worker, in another domain, is healthy.
Every request must fail, the faulty worker must have been tried, and the other-domain worker must
receive nothing: a router that retries a failed decode leg on any decode worker moves KV across
the boundary the level forbids.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes
from servecert.protocol import engine_api


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 0, "faulty"), shapes.decode(level, 1, "other-domain")]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    faulty, other = deployment.workers[1], deployment.workers[2]
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{faulty.url}/admin/faults", json={"error_rate": 1.0}) as resp:
            assert resp.status == 200, f"could not inject faults into {faulty.engine_id}: HTTP {resp.status}"
        run = await router_checks.drive(session, deployment, count=8, concurrency=4)
    what = f"the same-{level} decode worker fails every request, policy=fail"
    assertions.requests_must_fail(run.outcomes, what)
    tried = [r for r in run.truth.records if r.get("engine_id") == faulty.engine_id and r.get("outcome") == engine_api.INJECTED_ERROR]
    assert tried, f"{what}: the faulty decode worker {faulty.engine_id} was never tried, so the test saw no failed decode leg"
    elsewhere = [r for r in run.truth.records if r.get("engine_id") == other.engine_id]
    assert not elsewhere, (
        f"{what}: the decode worker in the other {level} ({other.engine_id}) received {len(elsewhere)} requests, "
        f"e.g. {elsewhere[0].get('request_id')}: a failed decode leg was retried across the {level} boundary"
    )
    assertions.transfers_must_stay_within(run.transfers(), level, what)


TEST = ConformanceTest(
    short_name="RouterTopologyFailedDecodeStaysInDomain",
    description="Under fail, a request whose same-domain decode leg fails gets an error; it is not retried on another domain.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "The default for mismachPolicy will be fail - constraining kv transfers to the same topology domain is a hard "
        "constraint so it makes sense to fail a request if this cannot be satisfied.",
        note="The seed speaks of selection; the suite holds a retry after a failed decode leg to the same hard constraint.",
    ),
    cases=tuple(Case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
