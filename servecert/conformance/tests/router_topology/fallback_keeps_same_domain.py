"""fallback policy with a same-domain decode worker present: it is still the only one used.

``present``: the prefill worker has a same-domain decode worker from the start, beside one in
another domain and one missing the level's label; every transfer goes to it.

``joins``: at first the only decode worker is in another domain, so fallback serves the requests
across the boundary, as the seed allows. Then a decode worker joins the prefill's domain. Once the
router routes to it (within the suite's eventual-consistency bound), fallback is over: every
later transfer must stay in the domain. A router that keeps a prefill worker's fallback choice
(a cache keyed by the prefill, a "mode" that sticks) still sends KV across the boundary.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes
from servecert.harness.observe import GroundTruth


async def check(ctx: TestContext) -> None:
    if ctx.params["same_domain"] == "joins":
        await _check_join(ctx)
        return
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 0), shapes.decode(level, 1), shapes.unlabelled_decode(level)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, "fallback"))
    same = deployment.workers[1]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment)
    assertions.requests_must_succeed(run.outcomes, "fallback with a same-domain decode worker")
    assertions.destinations_must_be(run.transfers(), {same.engine_id}, f"fallback while a same-{level} decode worker exists")


async def _check_join(ctx: TestContext) -> None:
    level, t = ctx.params["level"], ctx.timeouts
    joining = shapes.decode(level, 0, "joining")
    spec = router_checks.spec([shapes.prefill(level, 0), shapes.decode(level, 1)], level, "fallback", standby=[joining])
    deployment = await ctx.deploy(spec)
    async with aiohttp.ClientSession() as session:
        before = await router_checks.drive(session, deployment, count=4, concurrency=2)
        assertions.requests_must_succeed(before.outcomes, f"fallback before a decode worker joins the prefill's {level}")
        joined = await deployment.add_worker(joining)
        await assertions.condition_must_hold_eventually(
            lambda: router_checks.recorded_by(session, deployment, joined),
            t.eventual_consistency_s,
            t.poll_interval_s,
            f"requests' KV moved to the decode worker that joined the prefill's {level}",
            consecutive=t.required_consecutive_successes,
        )
        truth = GroundTruth(session)
        await truth.refresh(deployment.workers)
        truth.records.clear()  # NB: read up to now (the fallback, the probes): only the requests below are judged
        after = await router_checks.drive(session, deployment, truth=truth)
    what = f"fallback after a decode worker joined the prefill's {level} and the router used it"
    assertions.requests_must_succeed(after.outcomes, what)
    assertions.destinations_must_be(after.transfers(), {joined.engine_id}, what)


TEST = ConformanceTest(
    short_name="RouterTopologyFallbackKeepsSameDomain",
    description="Seed 000 row 2, fallback: workers missing the level, and other domains, are excluded while same-domain workers "
    "exist, also once one joins after fallback began.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_FALLBACK),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Excluded when same-domain workers exist; eligible as fallback when none do",
        note="Also that other-domain workers stay unused while a same-domain one exists (3b: fallback only if none exist), "
        "including one that joined after fallback began, once the router has routed to it.",
    ),
    cases=tuple(
        shapes.level_case(level if when == "present" else f"{level}-joins", {"level": level, "same_domain": when})
        for level in shapes.LEVELS
        for when in ("present", "joins")
    ),
    check=check,
)
