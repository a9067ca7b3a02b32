"""Seed 001 4.1.3: a rollout can be paused — every count holds — and resumed to its end."""

from __future__ import annotations

import asyncio
from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.suite.timeouts import Timeouts
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict
from servecert.conformance.utils import kube as kc
from servecert.harness.cluster_env import ClusterEnvironment


async def pause_then_resume(env: ClusterEnvironment, changed: dict[str, Any], t: Timeouts) -> None:
    """Paused: nothing created or deleted while the workers started before the pause come up, nor 5 s after.

    ``t.rollout_pause_settle_s`` lets the operator see ``paused: true`` (a step decided just before may
    still land); the workers already on their way up get at most ``t.rollout_pause_ready_s``; then
    ``t.rollout_pause_hold_s`` more (5 s by default). Waiting for them matters: an operator that ignores
    the pause takes its next step only when they are Ready, which under load can take longer than the
    hold (make test saw such a run pass). And the engines load their model for ``PAUSE_STARTUP_S``: with
    workers Ready in a second, such an operator finished the rollout inside the settle (make test saw
    that pass too, on a quiet machine).
    """
    await kc.patch(env, kc.DGD, changed["metadata"]["name"], {"spec": {"rolloutStrategy": {"paused": True}}})
    await asyncio.sleep(t.rollout_pause_settle_s)
    before = await rc.serving_pods(env)
    waited = await rc.until_pods_ready(env, t.rollout_pause_ready_s)
    await asyncio.sleep(t.rollout_pause_hold_s)
    after = await rc.serving_pods(env)
    verdict.counts_must_hold(before, after, waited + t.rollout_pause_hold_s)
    await kc.patch(env, kc.DGD, changed["metadata"]["name"], {"spec": {"rolloutStrategy": {"paused": False}}})


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.PAUSED_BLOCK_SIZE, mid_way=lambda env, changed: pause_then_resume(env, changed, ctx.timeouts))
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutPauseResume",
    description=f"A block-size rollout (engines loading their model for {scenarios.PAUSE_STARTUP_S:g} s) paused once its first "
    "new worker is Ready creates and deletes nothing while the workers already started come up and for 5 s after, then "
    "completes when resumed; zero failed requests and every other rollout rule.",
    features=(features.ROLLOUT_PAUSE_RESUME,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "001",
        "4.1.3 Solution Selection",
        "Pause functionality for the RollingUpdate.",
        note="The seed names pause as a capability only; spec.rolloutStrategy.paused, nothing created or deleted while "
        "paused, and completion once resumed are the suite's.",
    ),
)
