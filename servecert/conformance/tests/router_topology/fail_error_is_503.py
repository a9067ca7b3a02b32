"""fail policy: the error is an HTTP 503 with an OpenAI error body naming the level and the prefill's value."""

from __future__ import annotations

import aiohttp

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.router_topology import _checks as router_checks
from servecert.conformance.tests.router_topology import _placements as shapes
from servecert.harness import traffic


async def check(ctx: TestContext) -> None:
    level = ctx.params["level"]
    prefill = shapes.prefill(level, 0)
    deployment = await ctx.deploy(router_checks.spec([prefill, shapes.decode(level, 1)], level, "fail"))
    async with aiohttp.ClientSession() as session:
        for stream in (True, False):
            out = await traffic.complete(session, deployment.frontend_url, shapes.MODEL, traffic.unique_prompt(), stream=stream)
            assert out.status == 503, f"stream={stream}: expected HTTP 503, got {out.status} (error {out.error})"
            assert out.error is not None, f"stream={stream}: the 503 has no OpenAI error body"
            assert {"message", "type", "code"} <= set(out.error), f"stream={stream}: error body lacks OpenAI fields: {out.error}"
            message = str(out.error["message"])
            value = prefill.domains[level]
            assert level in message and value in message, (
                f"stream={stream}: the message must name the level {level!r} and the prefill worker's value {value!r}: {message!r}"
            )


TEST = ConformanceTest(
    short_name="RouterTopologyFailReturns503",
    description="The fail-policy error is HTTP 503 with an OpenAI error body whose message names the level and the prefill's domain.",
    features=(features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_ERROR_503),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Return error to client",
        note="The seed names no status or body: HTTP 503 with an OpenAI error body naming the level and the prefill's value "
        "is the suite's addition.",
    ),
    cases=tuple(shapes.level_case(level, {"level": level}) for level in shapes.LEVELS),
    check=check,
)
