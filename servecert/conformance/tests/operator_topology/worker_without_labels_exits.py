"""Seed 000's start-up row: a worker whose topology level never gets a label (so no file) hard-exits, after a retry period.

The level can never be resolved (``_unresolvable``), so the worker must exit non-zero rather than
serve without a domain — but only after the retry period the suite gives it, not at once: the
labels are patched after scheduling, so a worker may start before its file exists
(``WorkerTopologyStartupWaitsForLabels`` checks the other half). The period is read from the
first run's ``startedAt`` and ``finishedAt`` (whole seconds).
"""

from __future__ import annotations

from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.operator_topology import _unresolvable as unresolvable
from servecert.conformance.utils import kube as kc
from servecert.protocol import kube_names as kn


async def check(ctx: TestContext) -> None:
    env = kc.env_of(ctx)
    period = ctx.timeouts.worker_topology_wait_s
    await unresolvable.deploy(env, period)

    async def terminated() -> dict[str, Any] | None:
        for pod in await kc.pods(env, unresolvable.DECODE):
            ended = unresolvable.first_run_end(pod)
            if ended:
                return ended
        return None

    ended = await kc.wait_for(
        terminated, period + ctx.timeouts.pods_ready_s, f"the decode worker (level {unresolvable.MISSING_LEVEL} unresolvable) to end"
    )
    if ended.get("exitCode") in (0, None):
        raise AssertionError(
            f"a worker whose {unresolvable.MISSING_LEVEL} file never appeared ended with exit code {ended.get('exitCode')}; "
            "it must exit non-zero"
        )
    run_must_last_the_retry_period(ended, period)
    ctx.log.info("the worker exited %s s after it started (retry period %g s)", unresolvable.run_seconds(ended), period)


def run_must_last_the_retry_period(ended: dict[str, Any], period_s: float) -> None:
    """The run lasted at least ``period_s``, less the 1 s the API's whole-second timestamps can lose."""
    ran = unresolvable.run_seconds(ended)
    if ran < period_s - 1.0:
        raise AssertionError(
            f"the worker exited {ran:g} s after it started (startedAt {ended['startedAt']}, finishedAt {ended['finishedAt']}); "
            f"it must wait out its retry period ({kn.ENV_TOPOLOGY_WAIT}={period_s:g}) for its {unresolvable.MISSING_LEVEL} file first"
        )


TEST = ConformanceTest(
    short_name="WorkerTopologyStartupHardExit",
    description="A worker whose configured topology level has no label (so no projected file) waits out its retry period, "
    "then exits non-zero instead of serving.",
    features=(features.WORKER_TOPOLOGY_STARTUP,),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "If file value is not present for DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL after a retry period, hard exit.",
        note="The seed names no knob for the retry period; the suite sets it with DYN_TOPOLOGY_WAIT_SECONDS (worker_topology_wait_s) "
        "and requires the exit no sooner.",
    ),
    environments=frozenset({"cluster"}),
    check=check,
)
