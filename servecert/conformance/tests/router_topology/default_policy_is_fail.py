"""A level with no mismatch policy set behaves as fail: the seed's default.

With the policy unset and the only decode worker in another domain, every request fails and no KV
moves. The error must be the one the same router gives under an explicit ``fail``: the same HTTP
status and error code, streamed and not, read from a second deployment of the same workers with
``mismatchPolicy: fail``. A router whose default path fails some other way (a 500 where its fail
answers 503) has a default that is not fail. The seed names no status; the comparison needs none.
"""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.adapters.contract import Deployment
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _assertions as assertions
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes
from servecert.harness import traffic


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    workers = [shapes.prefill(level, 0), shapes.decode(level, 1)]
    unset = await ctx.deploy(router_checks.spec(workers, level, None))
    explicit = await ctx.deploy(router_checks.spec(workers, level, "fail"))
    async with aiohttp.ClientSession() as session:
        run = await router_checks.drive(session, unset, count=6, concurrency=3)
        what = f"level={level}, mismatch policy left unset, decode only in another {level}"
        assertions.requests_must_fail(run.outcomes, what)
        assertions.transfers_must_not_exist(run.transfers(), what)
        for stream in (True, False):
            default_error, fail_error = await _error(session, unset, stream), await _error(session, explicit, stream)
            assert default_error == fail_error, (
                f"{what}, stream={stream}: the unset policy's error is (HTTP status, code) {default_error}, the same router's "
                f"under mismatchPolicy fail is {fail_error}: the default must be fail"
            )


async def _error(session: aiohttp.ClientSession, deployment: Deployment, stream: bool) -> tuple[int, object]:
    out = await traffic.complete(session, deployment.frontend_url, shapes.MODEL, traffic.unique_prompt(), stream=stream)
    return out.status, (out.error or {}).get("code")


TEST = ConformanceTest(
    short_name="RouterTopologyDefaultPolicyIsFail",
    description="With the level set and the mismatch policy unset, no same-domain decode worker means an error, the same one "
    "as under an explicit fail.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "The default for mismachPolicy will be fail - constraining kv transfers to the same topology domain is a hard "
        "constraint so it makes sense to fail a request if this cannot be satisfied.",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
