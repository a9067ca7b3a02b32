"""fail policy while a same-domain decode worker joins and then leaves mid-run.

The worker that leaves keeps running (withdrawn from the deployment, its engine left serving:
``ProcessEnvironment.linger``), so a router that still sends it work gets that work served, and
its ground truth shows it: the refusal the suite waits for is the policy's error, not a refused
connection to a stopped engine. After the refusals, further requests must fail too, the left
worker must receive nothing, and no KV may move at all (the only decode worker left is in
another domain). An adapter that hosts its engines itself (Dynamo's) stops the left one, and on
a cluster the left worker's component is scaled to 0 (its pod deleted): then only the refusals
are judged, since a stopped engine records nothing. The joining worker is declared ``standby``,
so on a cluster it joins by a scale-up of its own component.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.adapters.contract import WorkerRef
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes
from servecert.harness import traffic
from servecert.harness.observe import GroundTruth
from servecert.harness.process_env import ProcessEnvironment


async def _refresh_if_running(truth: GroundTruth, ref: WorkerRef) -> None:
    """Read ``ref``'s new records; an engine that was stopped (its adapter hosts it) can receive nothing, so has none."""
    try:
        await truth.refresh([ref])
    except aiohttp.ClientConnectionError:
        return


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    joining = shapes.decode(level, 0)
    deployment = await ctx.deploy(router_checks.spec([shapes.prefill(level, 0), shapes.decode(level, 1)], level, "fail", standby=[joining]))
    t = ctx.timeouts
    async with aiohttp.ClientSession() as session:
        before = await router_checks.drive(session, deployment, count=4, concurrency=2)
        assertions.requests_must_fail(before.outcomes, f"before a decode worker joins the prefill's {level}")

        joined = await deployment.add_worker(joining)

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

        if isinstance(ctx.env, ProcessEnvironment):  # NB: a leaving engine keeps serving, so stray work shows in its log
            ctx.env.linger(joined)
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
        await _refresh_if_running(during.truth, joined)
        seen = len(during.truth.records)
        after = await router_checks.drive(session, deployment, count=6, concurrency=3, truth=during.truth)
        await _refresh_if_running(after.truth, joined)
    assertions.requests_must_fail(after.outcomes, f"after the same-{level} decode worker left")
    assertions.transfers_must_stay_within(during.transfers(), level, "across the worker joining and leaving")
    late = [r for r in after.truth.records[seen:] if r.get("engine_id") == joined.engine_id or r.get("transfer")]
    assert not late, (
        f"after the same-{level} decode worker {joined.engine_id} left and requests were refused, the engines recorded "
        f"{len(late)} more requests or KV transfers, e.g. {late[0]}: a worker that left must never receive work again, "
        "and under fail no KV may cross the boundary"
    )


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
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
