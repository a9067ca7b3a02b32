"""Seed 001 3.1: a block size change (16 -> 32) changes the model card; the rollout must not mix cards."""

from __future__ import annotations

from conformance import rollout_checks as rc
from conformance import rollout_scenarios as scenarios
from conformance import rollout_verdict as verdict
from conformance.suite import features
from conformance.suite.test_case import ConformanceTest, TestContext


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.BLOCK_SIZE)
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutBlockSize",
    description="Block size 16 -> 32 under streaming load: zero failed requests, every request preprocessed with its worker's "
    "card, no starved worker, traffic following the ready ratio, maxUnavailable and the P:D ratio held, old pods "
    "gone.",
    features=(features.ROLLOUT_MDC_ISOLATION,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
)
