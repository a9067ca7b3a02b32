"""Seed 001 scenario 2: a frontend-only change moves frontend and workers into a new dynamo namespace together.

Seed 001 4.1's procedure makes no exception for the frontend: the new frontend gets "a new
DYN_NAMESPACE B", the workers are updated "along with updating the controller-determined
DYN_NAMESPACE to B" (T3), and the final state is "Frontend + Workers in NS B". So a new frontend
sends only to workers the change created, the old frontend only to the workers that were there,
and no worker of before the change is left at the end (``Scenario.after``: a worker's version is
whether the change created it). The old way — the new frontend beside the old workers in their
namespace — is ``tests/nonconforming/rollout.py:FrontendJoinsOldWorkers``.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict


async def check(ctx: TestContext) -> None:
    evidence = await rc.run(ctx, scenarios.FRONTEND_IMAGE)
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)


TEST = ConformanceTest(
    short_name="RolloutFrontendImage",
    description="Frontend image 1.6.1 -> 1.7.0 under streaming load: the new frontend comes first in a new dynamo namespace, the"
    " workers roll into it step by step, each frontend sends only to workers of its own side, without a failed request; at"
    " the end no worker of before the change and no old frontend is left.",
    features=(features.ROLLOUT_FRONTEND,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "001",
        "4. Solution: Isolate New/Old Worker Deployments",
        "- **Runtime API Incompatibilities**: frontends and workers within each isolated namespace are always at the same version,"
        " preventing cross-version API mismatches.",
        note="Scenario 2, 'Update Dynamo Frontend Version'. 4.1 gives one procedure for every change: a new frontend 'with a "
        "new DYN_NAMESPACE B', the workers' 'DYN_NAMESPACE = NS B' (T3), 'Final State: Frontend + Workers in NS B'. The steps, "
        "split and drain rules of a worker change apply unchanged.",
    ),
)
