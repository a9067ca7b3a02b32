"""Seed 001 4.1.3: a rollout can be paused — every count holds — and resumed to its end."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from conformance.suite import features
from conformance.suite.test_case import ConformanceTest, TestContext
from conformance.tests.rollout_isolation import _checks as rc
from conformance.tests.rollout_isolation import _scenarios as scenarios
from conformance.tests.rollout_isolation import _verdict as verdict
from conformance.utils import kube as kc
from fixtures.cluster_env import ClusterEnvironment

SETTLE_S = 2.0
"""Time for the operator to see paused: true (a step decided just before may still land)."""
READY_BOUND_S = 60.0
"""At most this long for the workers already on their way up at the pause to become Ready."""
HOLD_S = 5.0


async def pause_then_resume(env: ClusterEnvironment, changed: dict[str, Any]) -> None:
    """Paused: nothing created or deleted while the workers started before the pause come up, nor 5 s after.

    Waiting for them matters: an operator that ignores the pause takes its next step only when they
    are Ready, which under load can take longer than the hold (make test saw such a run pass).
    """
    await kc.patch(env, kc.DGD, changed["metadata"]["name"], {"spec": {"rolloutStrategy": {"paused": True}}})
    await asyncio.sleep(SETTLE_S)
    before = await rc.serving_pods(env)
    waited = await rc.until_pods_ready(env, READY_BOUND_S)
    await asyncio.sleep(HOLD_S)
    after = await rc.serving_pods(env)
    verdict.counts_must_hold(before, after, waited + HOLD_S)
    await kc.patch(env, kc.DGD, changed["metadata"]["name"], {"spec": {"rolloutStrategy": {"paused": False}}})


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, dataclasses.replace(scenarios.BLOCK_SIZE, mode=scenarios.PAUSE), mid_way=pause_then_resume)
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutPauseResume",
    description="A block-size rollout paused once its first new worker is Ready creates and deletes nothing while the "
    "workers already started come up and for 5 s after, then completes when resumed; zero failed requests and every "
    "other rollout rule.",
    features=(features.ROLLOUT_PAUSE_RESUME,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
)
