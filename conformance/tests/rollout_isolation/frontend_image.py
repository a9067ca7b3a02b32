"""Seed 001 scenario 2: a frontend-only change rolls the frontend the same way; workers stay."""

from __future__ import annotations

from conformance.suite import features
from conformance.suite.test_case import ConformanceTest, TestContext
from conformance.tests.rollout_isolation import _checks as rc
from conformance.tests.rollout_isolation import _scenarios as scenarios
from conformance.tests.rollout_isolation import _verdict as verdict


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.FRONTEND_IMAGE)
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutFrontendImage",
    description="Frontend image 1.6.1 -> 1.7.0 under streaming load: traffic moves to the new frontend as it becomes ready, the"
    " old one drains without a failed request and is gone at the end.",
    features=(features.ROLLOUT_FRONTEND,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
)
