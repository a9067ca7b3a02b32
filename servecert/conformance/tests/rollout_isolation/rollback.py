"""Seed 001 4.1.3: reverting the spec mid-rollout rolls back by the same mechanism."""

from __future__ import annotations

import dataclasses
from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict
from servecert.harness.cluster_env import ClusterEnvironment


async def revert(env: ClusterEnvironment, changed: dict[str, Any]) -> None:
    await rc.patch_spec(env, scenarios.base_dgd())


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, dataclasses.replace(scenarios.BLOCK_SIZE, mode=scenarios.ROLLBACK), mid_way=revert, final_new=False)
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutRollback",
    description="A block-size rollout reverted once its first new worker is Ready ends with only the old version running; "
    "zero failed requests, no mixed cards, capacity and the P:D ratio held throughout.",
    features=(features.ROLLOUT_ROLLBACK,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "001",
        "Future Considerations",
        "Adding ControllerRevisions for the ability to pause a deployment and rollback.",
        note="The seed lists rollback only as a future consideration; reverting the spec mid-rollout to end with only the "
        "old version, every rollout rule held, is the suite's.",
    ),
)
