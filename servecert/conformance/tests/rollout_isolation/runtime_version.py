"""Seed 001 3.3: a runtime version change (images 1.6.1 -> 1.7.0, protocol 1 -> 2) must never pair versions."""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.RUNTIME)
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutRuntimeVersion",
    description="Runtime 1.6.1 -> 1.7.0 (frontend and workers, runtime protocol 1 -> 2) under streaming load: no frontend talks"
    " to a worker of the other version, zero failed requests, and every other rollout rule.",
    features=(features.ROLLOUT_RUNTIME_ISOLATION,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "001",
        "3.3 Runtime API Incompatibilities",
        "During a RollingUpdate, an old frontend may route requests to new workers (or vice versa) using incompatible API versions.",
        note="Also judges the other rollout rules of 4.1.2 and 4.3, as RolloutBlockSize does.",
    ),
)
