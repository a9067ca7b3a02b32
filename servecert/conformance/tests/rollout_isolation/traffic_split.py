"""Seed 001 4.3: during a rollout, traffic moves to the new version in step with its ready workers.

Two cases: ``seed-example`` (below) and ``prefill-4-decode-2``, seed 001 4.1.2's Prefill 4 / Decode 2 under the same
loads, where ``new_ready_workers`` counts both roles: with one new worker of each Ready and one old of each deleted the
formula gives 2/6, weights from the decode workers alone 1/2.

The DGD is seed 001's own example: one frontend and one aggregated worker set of four, the set
the seed's diagram rolls (NS A 4 workers; NS B 1 of 4 ready -> weights 75/25). With maxSurge 1 the
ready ratio steps 0 -> 1/4 -> 1/2 -> 3/4 -> 1, each step held while the next engine loads its model
(``SPLIT_STARTUP_S``, 10 s), with short streams (``SPLIT_MAX_TOKENS``) so each phase serves ~500
requests. At 2:2 disaggregated targets the ratio only takes 0, 1/2 and 1, and a fixed 50/50 split
(the seed's plain Service) gives the same answer as the rule; here it is 0.25 away in two phases,
and the verdict judges each phase on its own.

The phase size is what tells the formula from its nearest plausible miss: weights from the
workers each set has, Ready or not (their desired counts), give (k+1)/5 while new worker k+1
loads, 0.40 where the ready ratio is 0.25. At ~110 requests a phase (6 s loads, 12-token streams)
the allowance (0.05 + 3 standard errors) was 0.17 and passed it; at ~500 it is 0.11, and the
suite's synthetic rollouts (tests/conformance/rollout_isolation/test_split.py) fail it in 47 or
more of 50 while a weighted random choice at the ready ratio fails in at most 1 of 100.

A deleted old worker stays up 12 s after it withdraws (``SPLIT_DRAIN_QUIET_S``, as a preStop sleep keeps a pod),
Terminating with its Ready condition still True: weights that count it give 3/5 where the formula gives 3/4, in the
phase after the third step. Not counting a terminating pod as ready is the suite's reading of "ready" (as an
EndpointSlice marks it not ready), which the readiness tests share.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.SPLIT_CASES[ctx.params["case"]])
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutTrafficSplit",
    description="Four aggregated workers, then Prefill 4 / Decode 2, rolled one at a time (block size 16 -> 32, each engine "
    "loading for 10 s and staying up 12 s after its deletion): in every phase the new version's share of requests follows "
    "new_ready / (old_ready + new_ready) within 2 s; zero failed requests, no mixed cards, capacity held, old pods gone.",
    features=(features.ROLLOUT_TRAFFIC_SPLIT,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    cases=tuple(Case(name, {"case": name}) for name in scenarios.SPLIT_CASES),
    seed=SeedRef(
        "001",
        "4.3 Load Balancing",
        "Naively configuring a Kubernetes Service for both the new and old set of frontends will result in a 50/50 split of "
        "traffic which does not represent the shifting ratio of old/new workers.",
        note="The rule is 4.3.1's Weight Calculation, `weight_new = new_ready_workers / (old_ready_workers + "
        "new_ready_workers)`, which 4.3.3 (the preferred Solution C) keeps: the controller updates the weights as workers "
        "scale up and down. Judged per ratio phase from the engines' ground truth; the follow allowance (2 s), tolerance "
        "and the three standard errors are the suite's.",
    ),
)
