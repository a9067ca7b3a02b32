"""Seed 000's start-up row, the other half: a worker whose topology file appears within its retry period starts.

Topology labels are patched onto a pod after it is scheduled, so a worker may start before its
file exists; the seed's "after a retry period" gives the file time to appear. The level cannot
be resolved from any node (``_unresolvable``), so once the decode worker's process has run for
half its retry period (and must still be running: a worker with no retry period has exited by
then), the suite patches the level's label onto its pod itself, as a late Grove would. The
operator's projection must carry it into the worker's file while the worker waits: the worker
must become Ready in its first run (no exit, no restart) and register that value as its domain
for the level (its WorkerMetadata, published by the suite's own fake engine).
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.operator_topology import _unresolvable as unresolvable
from servecert.conformance.utils import kube as kc
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, waiting

LATE_VALUE = "late-rack"


async def check(ctx: TestContext) -> None:
    env = kc.env_of(ctx)
    period = ctx.timeouts.worker_topology_wait_s
    await unresolvable.deploy(env, period)

    async def running() -> kube_objects.Pod | None:
        found = [p for p in await kc.pods(env, unresolvable.DECODE) if (unresolvable.container(p).get("state") or {}).get("running")]
        return found[0] if found else None

    pod = await kc.wait_for(running, ctx.timeouts.pods_ready_s, "the decode worker's process to run")
    name = pod["metadata"]["name"]
    half = waiting.Deadline(period / 2)

    async def waited_half() -> bool:
        worker_must_still_wait(await _pod(env, name), period)
        return half.expired

    await kc.wait_for(waited_half, period, f"half the retry period of {name} to pass")
    await kc.label_pod(env, name, {f"{kn.TOPOLOGY_LABEL_PREFIX}{unresolvable.MISSING_LEVEL}": LATE_VALUE})

    async def settled() -> kube_objects.Pod | None:
        now = await _pod(env, name)
        return now if kc.pod_ready(now) or unresolvable.first_run_end(now) else None

    what = f"the decode worker {name}, labelled {unresolvable.MISSING_LEVEL}={LATE_VALUE} while it waited, to be Ready or to end"
    pod = await kc.wait_for(settled, period + ctx.timeouts.pods_ready_s, what)
    worker_must_start_in_its_first_run(pod, period)
    await worker_must_register_domain(env, name, LATE_VALUE)


async def _pod(env: ClusterEnvironment, name: str) -> kube_objects.Pod:
    found = await kc.pod(env, name)
    if found is None:
        raise AssertionError(f"the decode worker's pod {name} is gone; the operator must keep it while it waits for its file")
    return found


def worker_must_still_wait(pod: kube_objects.Pod, period_s: float) -> None:
    ended = unresolvable.first_run_end(pod)
    if ended:
        raise AssertionError(
            f"the decode worker {pod['metadata']['name']} ended ({ended}) within half its retry period "
            f"({kn.ENV_TOPOLOGY_WAIT}={period_s:g}), before its label came: it must wait for its file"
        )


def worker_must_start_in_its_first_run(pod: kube_objects.Pod, period_s: float) -> None:
    ended, status = unresolvable.first_run_end(pod), unresolvable.container(pod)
    if ended or status.get("restartCount"):
        raise AssertionError(
            f"the decode worker {pod['metadata']['name']} got its {unresolvable.MISSING_LEVEL} label while it waited "
            f"({kn.ENV_TOPOLOGY_WAIT}={period_s:g}), yet its first run ended ({ended}; restarts: {status.get('restartCount')}): "
            "a file that appears within the retry period must let the worker start"
        )


async def worker_must_register_domain(env: ClusterEnvironment, pod_name: str, value: str) -> None:
    registered = [m for m in await kc.worker_metadata(env) if (m.get("spec") or {}).get("podName") == pod_name]
    domains = [((m["spec"].get("metadata") or {}).get("runtime_config") or {}).get("topology_domains") for m in registered]
    if not any((d or {}).get(unresolvable.MISSING_LEVEL) == value for d in domains):
        raise AssertionError(
            f"the decode worker {pod_name} is Ready but registered the domains {domains} (WorkerMetadata), not "
            f"{unresolvable.MISSING_LEVEL}={value} from the label patched while it waited"
        )


TEST = ConformanceTest(
    short_name="WorkerTopologyStartupWaitsForLabels",
    description="A worker whose topology label arrives after it started, within its retry period, starts with that domain "
    "instead of exiting.",
    features=(features.WORKER_TOPOLOGY_STARTUP,),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "If file value is not present for DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL after a retry period, hard exit.",
        note="The other half of the row: a file present before the period ends lets the worker start. The suite labels the pod "
        "itself, standing in for Grove's patch arriving late.",
    ),
    environments=frozenset({"cluster"}),
    check=check,
)
