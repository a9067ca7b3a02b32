"""Seed 001 scenario 2: a frontend-only change rolls the frontend the same way; workers stay."""

from __future__ import annotations

from conformance.suite import features
from conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
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
    seed=SeedRef(
        "001",
        "2. Scenarios",
        "**Update Dynamo Frontend Version** - Updating the Dynamo framework runtime image for the Frontend service.",
        note="The seed names the scenario, not its procedure: traffic moving to the new frontend as its replicas become "
        "ready (4.3's weighted split, by ready frontends) and the old one draining without a failed request are the suite's.",
    ),
)
