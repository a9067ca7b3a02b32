"""ROLLOUT-ISOLATION: roll the suite's DGD under streaming load and gather the evidence to judge it.

Data flow of one scenario (``run``)::

    create the scenario's DGD (1 frontend; 2 prefill + 2 decode, or 4 aggregated, fake engines) -> its address answers
    PodHistory (every pod version, timed) + StreamingTraffic (every request's outcome) start
    the scenario's change is patched into the spec (``mid_way`` then acts: pause, revert, kill)
    wait until only the final version's pods run, all Ready; traffic stops; ground truth is read
    -> ``_verdict.Evidence``: the client's outcomes, the engines' ground-truth records
       (one JSON-lines file per engine pod, written by the fakes and kept by the pod runner after
       the pod is gone), the pod timeline, the WorkerMetadata left, the implementation's Events
       (reported, never judged)

``run_in`` is the same outside the runner, for the suite's own reliability tests.
"""

import asyncio
import contextlib
import copy
import datetime
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from servecert.conformance.suite import phases
from servecert.conformance.suite.test_case import TestContext
from servecert.conformance.suite.timeouts import Timeouts
from servecert.conformance.tests.rollout_isolation._scenarios import MODEL, Scenario, ctype
from servecert.conformance.tests.rollout_isolation._traffic import StreamingTraffic
from servecert.conformance.tests.rollout_isolation._verdict import Evidence, Timeline, serving
from servecert.conformance.utils import kube as kc
from servecert.fakes import groundtruth
from servecert.fakes.pod_runner.runner import groundtruth_dir
from servecert.harness import traffic
from servecert.harness.cluster import kube
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, waiting


def read_ground_truth(env: ClusterEnvironment, pods: Mapping[str, kube_objects.Pod]) -> list[tuple[str, dict[str, Any]]]:
    """Every record of every engine pod of the namespace the suite saw, from the files that outlive the pods."""
    if env.pods_dir is None:
        raise AssertionError("this cluster has no pod runner: the engines' ground truth cannot be read")
    folder = groundtruth_dir(env.pods_dir)
    out: list[tuple[str, dict[str, Any]]] = []
    for name, pod in sorted(pods.items()):
        path = folder / f"{env.namespace}_{name}_{pod['metadata']['uid'][:8]}.jsonl"
        if path.is_file():
            out += [(name, record) for record in groundtruth.read_json_lines(path)]
    return out


# -- driving a scenario ---------------------------------------------------------------------------------


async def address(env: ClusterEnvironment, name: str, timeout_s: float) -> str:
    async def probe() -> str | None:
        found = await kc.dgd(env, name)
        return (found.get("status") or {}).get("address") if found else None

    return str(await kc.wait_for(probe, timeout_s, f"status.address of DGD {name}"))


async def versions_running(env: ClusterEnvironment, scenario: Scenario, new: bool) -> bool:
    """Only pods of one version of the changed kinds, every target Ready."""
    pods = [p for p in await kc.pods(env) if ctype(p) and not p["metadata"].get("deletionTimestamp")]
    wanted = {**scenario.targets, "frontend": scenario.frontends}
    counts = Counter(ctype(p) for p in pods if serving(p) and scenario.version(p) in (None, new))
    others = [p for p in pods if scenario.version(p) not in (None, new)]
    frontends = sum(1 for p in pods if ctype(p) == "frontend")
    return not others and frontends == scenario.frontends and all(counts.get(k, 0) >= n for k, n in wanted.items())


async def deploy(env: ClusterEnvironment, timeouts: Timeouts, scenario: Scenario, dgd: dict[str, Any]) -> str:
    """Create the DGD and return its address once its pods are Ready and a completion sent there is served.

    A DGD that never gets there fails the case in setup (``DeploymentNotReady``): the rollout was never tried.
    """
    await kc.create(env, kc.DGD, dgd)
    try:
        url = await address(env, dgd["metadata"]["name"], timeouts.pods_ready_s)  # NB: the proxy pod must run first
        await kc.wait_for(lambda: versions_running(env, scenario, new=False), timeouts.pods_ready_s, "the DGD's pods Ready")
        await until_served(url, timeouts.pods_ready_s)
    except AssertionError as exc:
        raise phases.DeploymentNotReady(f"the DGD {dgd['metadata']['name']} never became ready to serve: {exc}") from exc
    return url


async def until_served(url: str, bound_s: float) -> None:
    """Probe the DGD's address until a streamed completion is served whole; fail with the last answer after ``bound_s``.

    Ready pods are not yet a serving DGD: the proxy routes to a frontend only once the
    implementation has put it there. The rollout's traffic starts from a DGD that serves, so a
    failure the verdict counts is the rollout's, not the deployment's.
    """
    last: list[traffic.Outcome] = []
    async with aiohttp.ClientSession() as session:

        async def served() -> bool:
            last[:] = [await traffic.complete(session, url, MODEL, traffic.unique_prompt(tag="probe"), max_tokens=2, timeout_s=10)]
            return last[0].ok

        def seen() -> str:
            return "last: " + ("no answer" if not last else f"status {last[0].status}, error {last[0].error}")

        await waiting.until_async(
            served, timeout_s=bound_s, what=f"the DGD at {url} serving a completion once its pods were Ready", interval_s=0.2, describe=seen
        )


async def patch_spec(env: ClusterEnvironment, dgd: dict[str, Any]) -> None:
    await kc.patch(env, kc.DGD, dgd["metadata"]["name"], {"spec": dgd["spec"]})


MidWay = Callable[[ClusterEnvironment, dict[str, Any]], Awaitable[None]]


async def run(ctx: TestContext, scenario: Scenario, mid_way: MidWay | None = None, final_new: bool = True) -> Evidence:
    """Deploy, roll under traffic (``mid_way`` acts once the first new worker is Ready), judge nothing yet."""
    return await run_in(kc.env_of(ctx), ctx.timeouts, scenario, mid_way, final_new)


async def run_in(
    env: ClusterEnvironment,
    timeouts: Timeouts,
    scenario: Scenario,
    mid_way: MidWay | None = None,
    final_new: bool = True,
    on_traffic: Callable[[str], None] | None = None,
    mid_way_at_creation: bool = False,
) -> Evidence:
    """``run`` outside the runner: the suite's own reliability tests drive an engine they kill;
    ``servecert bench rollout`` adds locust's ``rollout`` profile beside the suite's traffic (``on_traffic(url)``).

    ``mid_way`` acts once the first new worker is Ready, or with ``mid_way_at_creation`` once it exists: then no
    step can have followed it yet (a step waits for a new worker to be Ready), whatever the machine's load."""
    dgd = scenario.dgd()
    url = await deploy(env, timeouts, scenario, dgd)
    history = kc.PodHistory(env).start()
    wall_offset = time.time() - time.monotonic()
    traffic = StreamingTraffic(
        url, MODEL, concurrency=scenario.concurrency, max_tokens=scenario.max_tokens, request_timeout_s=timeouts.request_s
    )
    load = await traffic.start()
    if on_traffic is not None:
        on_traffic(url)
    try:
        await asyncio.sleep(timeouts.rollout_warm_s)
        changed = copy.deepcopy(dgd)
        scenario.change(changed)
        judged = scenario.after(frozenset(p["metadata"]["uid"] for p in await kc.pods(env)))
        changed_at = time.time()
        await patch_spec(env, changed)
        if mid_way is not None:
            await kc.wait_for(lambda: _some_new(env, judged, ready=not mid_way_at_creation), timeouts.rollout_s, "a first new worker")
            await mid_way(env, changed)
        # NB: the end is the changed kinds' final version alone: for a frontend-only change, the frontends (an
        # implementation that keeps the old workers ends there, and the verdict names them).
        await kc.wait_for(
            lambda: versions_running(env, scenario, new=final_new), timeouts.rollout_s, "the rollout's end: the final version alone"
        )
        finished_at = time.time()
        await asyncio.sleep(timeouts.rollout_tail_s)
    finally:
        sent = await load.stop()
        await asyncio.sleep(0.5)
        history.stop()
    timeline = Timeline.of(list(history.events), wall_offset)
    records = read_ground_truth(env, timeline.every_pod())
    stale = await _stale_metadata(env, timeline)
    evidence = Evidence(
        judged,
        sent,
        records,
        timeline,
        changed_at,
        finished_at,
        timeouts.weight_follow_s,
        stale,
        final_new,
        starve_s=timeouts.rollout_starve_s,
        share_tolerance=timeouts.rollout_share_tolerance,
        warm_s=timeouts.rollout_warm_s,
        ratio_grace_s=timeouts.rollout_ratio_grace_s,
        deleted_route_s=timeouts.rollout_deleted_route_s,
    )
    evidence.steps = await _rollout_events(env, dgd["metadata"]["name"])
    return evidence


async def _rollout_events(env: ClusterEnvironment, name: str) -> list[tuple[float, str]]:
    """The implementation's own account of its steps (Events on the DGD): reported, never judged."""
    found = await asyncio.to_thread(kube.list_events, env.api, env.namespace)
    mine = [e for e in found if e["involvedObject"].get("name") == name and e["involvedObject"].get("kind") == kn.DGD_KIND]
    timed = sorted(((_event_time(e), int(e["metadata"].get("resourceVersion") or 0), e) for e in mine), key=lambda item: item[:2])
    return [(t.timestamp(), f"{t:%H:%M:%S.%f}"[:-3] + f" {e.get('reason')}: {e.get('message')}") for t, _, e in timed]


def _event_time(event: kube_objects.Event) -> datetime.datetime:
    """The Event's own microsecond time when it has one, else its creation (whole seconds; resourceVersion orders ties).

    NB: the facade's dicts carry times as the API server wrote them (RFC 3339, ``Z``), which ``fromisoformat`` reads exactly.
    """
    return datetime.datetime.fromisoformat(event.get("eventTime") or event["metadata"]["creationTimestamp"])


async def _stale_metadata(env: ClusterEnvironment, timeline: Timeline) -> list[str]:
    """WorkerMetadata naming a pod that no longer exists (the fakes withdraw theirs when they stop)."""
    found = await asyncio.to_thread(kube.list_worker_metadata, env.api, env.namespace)
    final = timeline.moments[-1][1] if timeline.moments else {}
    return sorted(str(i["metadata"]["name"]) for i in found if (i.get("spec") or {}).get("podName") not in final)


async def _some_new(env: ClusterEnvironment, scenario: Scenario, ready: bool) -> bool:
    """A pod of the new version exists (``ready``: and serves)."""
    return any(ctype(p) and scenario.is_new(p) and (serving(p) or not ready) for p in await kc.pods(env))


async def serving_pods(env: ClusterEnvironment) -> dict[str, bool]:
    """Name -> terminating? for every pod of the suite's images."""
    return {p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp")) for p in await kc.pods(env) if ctype(p)}


async def until_pods_ready(env: ClusterEnvironment, bound_s: float) -> float:
    """Seconds until every pod of the suite's images that is not terminating is Ready, at most ``bound_s``.

    A paused rollout's workers already on their way up still come up; only once they have can an
    operator that ignores the pause show it, by taking its next step.
    """
    waited = waiting.Deadline(bound_s)

    async def all_ready() -> bool:
        pods = [p for p in await kc.pods(env) if ctype(p) and not p["metadata"].get("deletionTimestamp")]
        return all(kc.pod_ready(p) for p in pods)

    with contextlib.suppress(waiting.WaitTimeout):  # NB: not a failure: the bound only caps the wait
        await waiting.until_async(all_ready, timeout_s=bound_s, what="every pod of the suite's images Ready", interval_s=0.25)
    return waited.elapsed()
