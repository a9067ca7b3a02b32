"""Seed 001 3.1: a block size change (16 -> 32) changes the model card; the rollout must not mix cards.

Three cases, as seed 001 2 names worker changes to "command, args, or environment variables": the
block size in the engines' args, in their env (``SERVECERT_ENGINE_BLOCK_SIZE``), and in their
container's command (``servecert engine serve --block-size 16``, the image's program and an option).
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.BLOCK_SIZE_CASES[ctx.params["change"]])
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutBlockSize",
    description="Block size 16 -> 32 (in the engines' args; in their env; in their container's command) under streaming "
    "load: zero failed requests, every request preprocessed with its worker's card, no starved worker, traffic following the "
    "ready ratio, maxUnavailable and the P:D ratio held, old pods gone.",
    features=(features.ROLLOUT_MDC_ISOLATION,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    cases=tuple(Case(name, {"change": name}) for name in scenarios.BLOCK_SIZE_CASES),
    seed=SeedRef(
        "001",
        "3.1 Different MDC Checksums",
        "This results in new workers having requests preprocessed with the old MDC, "
        "which can result in request errors or unexpected behaviors.",
        note="Also judges 4.1.2 (maxUnavailable, P/D ratio) and 4.3 (traffic follows the ready ratio); a ready worker "
        "that serves nothing counts as its card discarded (the suite's reading of 3.1).",
    ),
)
