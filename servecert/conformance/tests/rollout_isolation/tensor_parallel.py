"""Seed 001 3.2: tensor parallel 1 -> 2 in a disaggregated DGD changes the KV layout; no KV transfer may cross layouts."""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.TENSOR_PARALLEL)
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutTensorParallel",
    description="Tensor parallel 1 -> 2 (prefill and decode) under streaming load: no KV transfer between old and new layouts, "
    "zero failed requests, and every other rollout rule.",
    features=(features.ROLLOUT_KV_LAYOUT_ISOLATION,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "001",
        "3.2 Incompatible KV Cache Transfer",
        "The discovery of old prefill/decode workers by the new set of workers can result in KV block shape "
        "incompatibilities, KV transfer API breaking changes, etc. that result in request errors or unexpected behaviors.",
        note="Also judges the other rollout rules of 4.1.2 and 4.3, as RolloutBlockSize does.",
    ),
)
