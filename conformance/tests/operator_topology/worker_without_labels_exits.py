"""Seed 000's start-up row: a worker whose topology level never gets a label (so no file) hard-exits, after a retry period.

The suite makes a ClusterTopology with a level no node carries a label for, and a DGD that
constrains KV transfers to that level. The operator must still tell the workers to read their
topology (``DYN_TOPOLOGY_ENABLED``, the level); the injector cannot resolve the level, so its
file stays empty and the worker must exit non-zero rather than serve without a domain — but
only after the retry period the suite gives it (``DYN_TOPOLOGY_WAIT_SECONDS``), not at once: the
labels are patched after scheduling, so a worker may start before its file exists. The period is
read from the API server's container status (``startedAt`` to ``finishedAt`` of the first run,
whole seconds), which the pod runner writes from the process it ran.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from conformance.suite import features
from conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from conformance.utils import kube as kc
from conformance.utils import manifests
from protocol import kube_names as kn

MISSING_LEVEL = "pod-rack"


async def check(ctx: TestContext) -> None:
    env = kc.env_of(ctx)
    topology = f"{env.namespace}-unresolvable"
    levels = [
        {"domain": "zone", "labelKey": "topology.kubernetes.io/zone"},
        {"domain": MISSING_LEVEL, "labelKey": "servecert.io/no-node-has-this"},
    ]
    body = {"apiVersion": f"{kn.CT_GROUP}/{kn.CT_VERSION}", "kind": kn.CT_KIND, "metadata": {"name": topology}, "spec": {"levels": levels}}
    await asyncio.to_thread(env.custom.create_cluster_custom_object, kn.CT_GROUP, kn.CT_VERSION, kn.CT_PLURAL, body)
    env.cleanups.append(lambda: env.custom.delete_cluster_custom_object(kn.CT_GROUP, kn.CT_VERSION, kn.CT_PLURAL, topology))
    dgd = manifests.dgd("nolabel", level=MISSING_LEVEL, prefill=1, decode=1, cluster_topology=topology)
    for component in dgd["spec"]["components"]:
        component["env"] = [{"name": kn.ENV_TOPOLOGY_WAIT, "value": f"{ctx.timeouts.worker_topology_wait_s:g}"}]
    await kc.create(env, kc.DGD, dgd)
    selector = f"{kn.DGD_NAME_LABEL}=nolabel,{kn.COMPONENT_TYPE_LABEL}=decode"

    async def terminated() -> dict[str, Any] | None:
        for pod in await kc.pods(env, selector):
            for status in (pod.get("status") or {}).get("containerStatuses") or []:
                ended = (status.get("state") or {}).get("terminated") or (status.get("lastState") or {}).get("terminated")
                if ended:
                    return dict(ended)
        return None

    ended = await kc.wait_for(
        terminated,
        ctx.timeouts.worker_topology_wait_s + ctx.timeouts.pods_ready_s,
        f"the decode worker (level {MISSING_LEVEL} unresolvable) to end",
    )
    if ended.get("exitCode") in (0, None):
        raise AssertionError(
            f"a worker whose {MISSING_LEVEL} file never appeared ended with exit code {ended.get('exitCode')}; it must exit non-zero"
        )
    run_must_last_the_retry_period(ended, ctx.timeouts.worker_topology_wait_s)
    ctx.log.info("the worker exited %s s after it started (retry period %g s)", _run_seconds(ended), ctx.timeouts.worker_topology_wait_s)


def _run_seconds(ended: dict[str, Any]) -> float:
    started, finished = (datetime.fromisoformat(str(ended[key])) for key in ("startedAt", "finishedAt"))
    return (finished - started).total_seconds()


def run_must_last_the_retry_period(ended: dict[str, Any], period_s: float) -> None:
    """The run lasted at least ``period_s``, less the 1 s the API's whole-second timestamps can lose."""
    ran = _run_seconds(ended)
    if ran < period_s - 1.0:
        raise AssertionError(
            f"the worker exited {ran:g} s after it started (startedAt {ended['startedAt']}, finishedAt {ended['finishedAt']}); "
            f"it must wait out its retry period ({kn.ENV_TOPOLOGY_WAIT}={period_s:g}) for its {MISSING_LEVEL} file first"
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
