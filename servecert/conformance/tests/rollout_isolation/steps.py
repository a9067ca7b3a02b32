"""Seed 001 4.1.2 (Solution B): the rollout's steps, with targets, frontends and strategy away from the defaults.

Every rule of the verdict applies; this test exists for the step rules, judged from the suite's
pod watch: no worker of the new version before a new frontend is Ready, nor before the new frontend
has the old one's replica count (T1-T3; the seed example's three frontends), per component
never more than target + maxSurge pods nor fewer than target - maxUnavailable ready (T3-T4, the
Deployment bounds the seed's DGD exposes), the prefill:decode ratio within one worker on each
side, no new request to a worker being deleted, and at the end the spec's frontends alone (T5).
The cases vary what the other tests hold fixed: the seed's own example (Prefill 4, Decode 2, a
frontend of 3 replicas), maxSurge 2 at 3:1, and Grove's maxSurge 0 / maxUnavailable 1 at 2:2.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.STEP_CASES[ctx.params["case"]])
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutSteps",
    description="Block size 16 -> 32 at 4:2 with 3 frontends, at 3:1 with maxSurge 2, and at 2:2 with maxSurge 0 / "
    "maxUnavailable 1: new workers only once a new frontend is Ready and has the old one's replicas, pods within target + "
    "maxSurge, ready within "
    "target - maxUnavailable, the P:D ratio within one worker, no request to a worker being deleted, the spec's frontends "
    "alone at the end.",
    features=(features.ROLLOUT_STEPS,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    cases=tuple(Case(name, {"case": name}) for name in scenarios.STEP_CASES),
    seed=SeedRef(
        "001",
        "4.1.2 Solution B: Controller Manages New/Old Worker Resource",
        "The controller will then iteratively scale down the old worker resource by 1 and scale up the new worker resource "
        "by 1 until the old worker resource has scaled to 0 and the new worker resource has scaled to the desired replica count.",
        note="The order T1-T5 (new frontend, ready, new worker sets at 1 replica, +1/-1 steps, old frontend deleted) is the "
        "seed's diagram; the seed assumes maxSurge 1 / maxUnavailable 0 and lists both as configurable, so the cases hold "
        "the implementation to a Deployment's meaning of them. 'No new request to a worker being deleted' (2 s allowance) "
        "is the suite's reading of T4.",
    ),
)
