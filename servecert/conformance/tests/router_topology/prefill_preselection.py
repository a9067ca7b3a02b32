"""Before prefill selection, prefill workers with a same-domain decode worker are preferred; else all are eligible.

``prefers``: two prefill workers in two domains, a decode worker in only one of them: every
request's KV must come from the prefill worker beside it, under either policy (the row's fallback
cell is "Same as fail"). ``otherwise-all``: no prefill worker has a decode worker in its domain
(the only one shares nothing with either), under fallback so requests are served: both prefill
workers must be used, as the row's "then fallback to all other prefill workers" says.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes

PREFERS = "prefers"
OTHERWISE_ALL = "otherwise-all"
REQUESTS = 24


async def check(ctx: TestContext) -> None:
    level, policy, shape = ctx.params["level"], ctx.params["policy"], ctx.params["shape"]
    if shape == PREFERS:
        workers = [shapes.prefill(level, 0), shapes.prefill(level, 1), shapes.decode(level, 0)]
    else:
        far = shapes.sharing_nothing(shapes.domains(level, 0)) | {level: f"{level}-with-no-prefill"}
        workers = [shapes.prefill(level, 0), shapes.prefill(level, 1), shapes.worker("decode", far)]
    deployment = await ctx.deploy(router_checks.spec(workers, level, policy))
    near, other = deployment.workers[0], deployment.workers[1]
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, deployment, count=REQUESTS, concurrency=6)
    what = f"two prefill workers in two {level}s, policy={policy}, shape={shape}"
    assertions.requests_must_succeed(run.outcomes, what)
    sources = {t.source for t in run.transfers()}
    if shape == PREFERS:
        assert sources == {near.engine_id}, (
            f"{what}: only the prefill worker with a same-{level} decode worker ({near.engine_id}) may be chosen; "
            f"KV came from {sorted(sources)}"
        )
        return
    assert sources == {near.engine_id, other.engine_id}, (
        f"{what}: with no prefill worker beside a decode worker, every prefill worker is eligible, but in {REQUESTS} "
        f"requests at concurrency 6 KV came only from {sorted(sources)}"
    )


TEST = ConformanceTest(
    short_name="RouterTopologyPrefillPreselection",
    description="Seed 000 row 4, both policies: prefill workers with a decode worker in their domain are preferred; "
    "when there are none, every prefill worker is eligible.",
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
        note="The fallback column says 'Same as fail', so the prefers shape runs under both policies.",
    ),
    cases=(
        *(
            Case(f"{level}-{policy}", {"level": level, "policy": policy, "shape": PREFERS})
            for level in shapes.LEVELS
            for policy in shapes.POLICIES
        ),
        *(Case(f"{level}-{OTHERWISE_ALL}", {"level": level, "policy": "fallback", "shape": OTHERWISE_ALL}) for level in shapes.LEVELS),
    ),
    check=check,
)
