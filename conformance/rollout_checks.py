"""ROLLOUT-ISOLATION: roll a DGD under streaming load and judge the rollout from the suite's own ground truth.

Data flow of one scenario (``run``)::

    create the suite's DGD (1 frontend, 2 prefill, 2 decode fake engines) -> its address answers
    PodHistory (every pod version, timed) + StreamingTraffic (every request's outcome) start
    the scenario's change is patched into the spec (and, for pause / rollback, acted on mid-way)
    wait until only the final version's pods run, all Ready; traffic stops; ground truth is read
    -> Evidence: the client's outcomes, the engines' ground-truth records (one JSON-lines file per
       engine pod, written by the fakes and kept after the pod is gone), the pod timeline
    -> verdict: every violated rule, each message starting with the seed 001 failure mode the
       scenario exercises (3.1 MDC checksum, 3.2 KV layout, 3.3 runtime API, or the frontend /
       pause / rollback mechanics), so a failure names the mode.

Which version a pod is comes from its container spec (``Scenario.version``: the argument, env or
image the scenario changed), never from the implementation's labels or status. The rules:

* zero failed requests (status 200, no error event, ``[DONE]``);
* every request preprocessed with the card of the worker that served it (3.1), and no ready
  worker starved for ``STARVE_S`` while traffic ran (3.1 as Dynamo shows it: the new card is
  discarded and its workers get nothing);
* no KV transfer between different layouts (3.2);
* no frontend talking to a worker of the other version, no protocol mismatch (3.3);
* the share of requests served by the new version within ``SHARE_TOLERANCE`` of the ready
  ratio, allowing the weights ``weight_follow_s`` to follow (seed 001 4.3.3);
* per worker component, ready workers never below target - maxUnavailable, and on each side the
  prefill:decode ratio within one worker (seed 001 4.1.2);
* at the end, no pod and no WorkerMetadata of the old version.
"""

from __future__ import annotations

import asyncio
import copy
import math
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from conformance import cluster_checks as kc
from conformance.rollout_traffic import Sent, StreamingTraffic
from conformance.suite.test_case import TestContext
from conformance.suite.timeouts import Timeouts
from fakes import groundtruth
from fakes.pod_runner.runner import groundtruth_dir
from fixtures.cluster_env import ClusterEnvironment
from protocol import engine_api
from protocol import kube_names as kn

MODEL = "servecert-model"
DGD_NAME = "rollme"
PREFILL, DECODE = 2, 2
TARGETS = {"prefill": PREFILL, "decode": DECODE}
ENGINE_TIMING = "constant:40:30"
"""Each request streams for ~0.5 s, so streams are in flight through every step."""
CONCURRENCY = 4
STARVE_S = 5.0
SHARE_TOLERANCE = 0.15
WARM_S = 2.0
TAIL_S = 2.0

MDC = "seed 001 3.1 (MDC checksum)"
KV_LAYOUT = "seed 001 3.2 (KV cache layout)"
RUNTIME_API = "seed 001 3.3 (runtime API)"
FRONTEND = "frontend rollout"
PAUSE = "pause and resume"
ROLLBACK = "rollback"


def base_dgd(name: str = DGD_NAME) -> dict[str, Any]:
    engine = ["--model", MODEL, "--timing", ENGINE_TIMING, "--block-size", "16", "--tensor-parallel-size", "1", "--protocol-version", "1"]
    return {
        "apiVersion": f"{kn.DGD_GROUP}/{kn.DGD_VERSION}",
        "kind": kn.DGD_KIND,
        "metadata": {"name": name},
        "spec": {
            "rolloutStrategy": {"maxSurge": 1, "maxUnavailable": 0},
            "components": [
                {"name": "frontend", "type": "frontend", "replicas": 1, "image": "servecert/frontend:1.6.1", "args": [], "env": []},
                {"name": "prefill", "type": "prefill", "replicas": PREFILL, "image": "servecert/fake-engine:1.6.1",
                 "args": [*engine, "--role", "prefill"]},
                {"name": "decode", "type": "decode", "replicas": DECODE, "image": "servecert/fake-engine:1.6.1",
                 "args": [*engine, "--role", "decode"]},
            ],
        },
    }  # fmt: skip


def set_arg(dgd: dict[str, Any], flag: str, value: str) -> None:
    for component in dgd["spec"]["components"]:
        args = component["args"]
        if flag in args:
            args[args.index(flag) + 1] = value


def arg(pod: Mapping[str, Any], flag: str) -> str | None:
    args = list(_container(pod).get("args") or [])
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def _container(pod: Mapping[str, Any]) -> dict[str, Any]:
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    return dict(containers[0])


def ctype(pod: Mapping[str, Any]) -> str:
    """frontend / prefill / decode from the container's own command line (the suite's images), or ''."""
    image = str(_container(pod).get("image", ""))
    if image.startswith("servecert/frontend"):
        return "frontend"
    if image.startswith("servecert/fake-engine"):
        return arg(pod, "--role") or ""
    return ""


@dataclass(frozen=True)
class Scenario:
    mode: str
    change: Callable[[dict[str, Any]], None]
    new_worker: Callable[[Mapping[str, Any]], bool] | None
    """Whether a worker pod runs the changed version (its container spec); None: workers do not change."""
    new_frontend: Callable[[Mapping[str, Any]], bool] | None = None
    """The same for frontend pods; None: their spec does not change (their version is the workers they talk to)."""

    @property
    def workers_change(self) -> bool:
        return self.new_worker is not None

    def version(self, pod: Mapping[str, Any]) -> bool | None:
        """True: new, False: old, None: a kind of pod whose spec the scenario does not change."""
        kind = ctype(pod)
        test = self.new_frontend if kind == "frontend" else self.new_worker
        return None if test is None or not kind else test(pod)

    def is_new(self, pod: Mapping[str, Any]) -> bool:
        return self.version(pod) is True


def block_size_change(dgd: dict[str, Any]) -> None:
    set_arg(dgd, "--block-size", "32")


def tensor_parallel_change(dgd: dict[str, Any]) -> None:
    set_arg(dgd, "--tensor-parallel-size", "2")


def runtime_change(dgd: dict[str, Any]) -> None:
    set_arg(dgd, "--protocol-version", "2")
    for component in dgd["spec"]["components"]:
        component["image"] = component["image"].replace(":1.6.1", ":1.7.0")
        if component["type"] == "frontend":
            component["env"] = [{"name": "DYN_RUNTIME_PROTOCOL_VERSION", "value": "2"}]


def frontend_change(dgd: dict[str, Any]) -> None:
    dgd["spec"]["components"][0]["image"] = "servecert/frontend:1.7.0"


def _image_tag(pod: Mapping[str, Any]) -> str:
    return str(_container(pod).get("image", "")).rpartition(":")[2]


def _new_tag(pod: Mapping[str, Any]) -> bool:
    return _image_tag(pod) == "1.7.0"


BLOCK_SIZE = Scenario(MDC, block_size_change, lambda p: arg(p, "--block-size") == "32")
TENSOR_PARALLEL = Scenario(KV_LAYOUT, tensor_parallel_change, lambda p: arg(p, "--tensor-parallel-size") == "2")
RUNTIME = Scenario(RUNTIME_API, runtime_change, _new_tag, _new_tag)
FRONTEND_IMAGE = Scenario(FRONTEND, frontend_change, None, _new_tag)


# -- the pod timeline --------------------------------------------------------------------------------


@dataclass
class Timeline:
    """Pod states over wall-clock time, from the suite's own watch."""

    moments: list[tuple[float, dict[str, dict[str, Any]]]]

    @classmethod
    def of(cls, history: kc.PodHistory, wall_offset: float) -> Timeline:
        state: dict[str, dict[str, Any]] = {}
        moments: list[tuple[float, dict[str, dict[str, Any]]]] = []
        for t, kind, pod in list(history.events):
            name = pod["metadata"]["name"]
            if kind == "DELETED":
                state.pop(name, None)
            else:
                state[name] = pod
            moments.append((t + wall_offset, dict(state)))
        return cls(moments)

    def at(self, wall: float) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for t, state in self.moments:
            if t > wall:
                break
            found = state
        return found

    def every_pod(self) -> dict[str, dict[str, Any]]:
        """Last version of every pod ever seen, by name."""
        out: dict[str, dict[str, Any]] = {}
        for _, state in self.moments:
            out.update(state)
        return out


def serving(pod: Mapping[str, Any]) -> bool:
    return kc.pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")


def side_counts(state: Mapping[str, Mapping[str, Any]], scenario: Scenario, only_ready: bool) -> dict[tuple[bool | None, str], int]:
    counts: Counter[tuple[bool | None, str]] = Counter()
    for pod in state.values():
        kind = ctype(pod)
        if not kind or pod["metadata"].get("deletionTimestamp") or (only_ready and not kc.pod_ready(pod)):
            continue
        counts[(scenario.version(pod), kind)] += 1
    return dict(counts)


def new_share(state: Mapping[str, Mapping[str, Any]], scenario: Scenario) -> float | None:
    """The ready ratio the new version's traffic share must follow (workers; frontends when only they change)."""
    counts = side_counts(state, scenario, only_ready=True)
    kinds = ("frontend",) if not scenario.workers_change else ("prefill", "decode")
    new = sum(counts.get((True, k), 0) for k in kinds)
    old = sum(counts.get((False, k), 0) for k in kinds)
    return new / (new + old) if new + old else None


# -- evidence ----------------------------------------------------------------------------------------


@dataclass
class Evidence:
    scenario: Scenario
    sent: list[Sent]
    records: list[tuple[str, dict[str, Any]]]  # (engine pod name, ground-truth record)
    timeline: Timeline
    changed_at: float
    finished_at: float
    max_unavailable: int = 0
    follow_s: float = 2.0
    stale_metadata: list[str] = field(default_factory=list)
    final_new: bool = True
    """Which version must be alone at the end (False after a rollback)."""
    steps: list[str] = field(default_factory=list)
    """The implementation's Events on the DGD (its weights as it set them), for the record only."""


def read_ground_truth(env: ClusterEnvironment, pods: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
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


def verdict(ev: Evidence) -> list[str]:
    """Every rule the rollout broke, each a sentence with numbers."""
    return [
        *_failed_requests(ev),
        *_card_mismatches(ev),
        *_starved_workers(ev),
        *_layout_mismatches(ev),
        *_cross_version(ev),
        *_share(ev),
        *_availability_and_ratio(ev),
        *_leftovers(ev),
    ]


def rollout_must_be_clean(ev: Evidence) -> None:
    problems = verdict(ev)
    if problems:
        raise AssertionError(f"{ev.scenario.mode}: " + "; ".join(problems))


def _failed_requests(ev: Evidence) -> list[str]:
    failed = [s for s in ev.sent if not s.ok]
    if not failed:
        return []
    kinds = Counter(_failure_kind(s) for s in failed)
    first = (failed[0].outcome.error or {}).get("message", f"status {failed[0].outcome.status}, done={failed[0].outcome.done}")
    return [f"{len(failed)} of {len(ev.sent)} requests failed ({dict(kinds)}; first: {str(first)[:300]})"]


def _failure_kind(sent: Sent) -> str:
    error = sent.outcome.error or {}
    return str(error.get("code") or error.get("type") or ("cut" if not sent.outcome.done else sent.outcome.status))


def _card_mismatches(ev: Evidence) -> list[str]:
    bad = [
        (pod, r)
        for pod, r in ev.records
        if r.get("outcome") == engine_api.MDC_CHECKSUM_MISMATCH or (r.get("mdc_checksum") and r["mdc_checksum"] != r["engine_mdc_checksum"])
    ]
    if not bad:
        return []
    pod, r = bad[0]
    return [
        f"{len(bad)} requests were preprocessed with another model card than their worker's (first: worker {pod} has "
        f"{r['engine_mdc_checksum']}, request came with {r['mdc_checksum']} from {r.get('frontend')})"
    ]


def _served_by(ev: Evidence) -> Counter[str]:
    return Counter(pod for pod, r in ev.records if r.get("outcome") in (groundtruth.OK, groundtruth.PREFILLED))


def _starved_workers(ev: Evidence) -> list[str]:
    """A worker Ready (and not terminating) for STARVE_S of traffic that served nothing: its card was discarded."""
    if not ev.scenario.workers_change:
        return []
    served = _served_by(ev)
    start, end = ev.changed_at - WARM_S, ev.finished_at
    ready_for: dict[str, float] = defaultdict(float)
    previous: tuple[float, dict[str, dict[str, Any]]] | None = None
    for t, state in ev.timeline.moments:
        if previous is not None:
            t0, before = previous
            span = max(0.0, min(t, end) - max(t0, start))
            for name, pod in before.items():
                if ctype(pod) in ("prefill", "decode") and serving(pod):
                    ready_for[name] += span
        previous = (t, state)
    if previous is not None:
        t0, before = previous
        for name, pod in before.items():
            if ctype(pod) in ("prefill", "decode") and serving(pod):
                ready_for[name] += max(0.0, end - max(t0, start))
    starved = sorted(name for name, s in ready_for.items() if s >= STARVE_S and served[name] == 0)
    if not starved:
        return []
    pods = ev.timeline.every_pod()
    detail = ", ".join(f"{n} ({'new' if ev.scenario.is_new(pods[n]) else 'old'}, ready {ready_for[n]:.1f}s)" for n in starved)
    return [f"workers ready while traffic ran served no request (their model card was discarded?): {detail}"]


def _layout_mismatches(ev: Evidence) -> list[str]:
    bad = []
    for pod, r in ev.records:
        transfer = r.get("transfer") or {}
        if r.get("outcome") == engine_api.KV_LAYOUT_MISMATCH or (
            transfer and transfer.get("source_layout") and transfer.get("source_layout") != transfer.get("dest_layout")
        ):
            bad.append((pod, r))
    if not bad:
        return []
    pod, r = bad[0]
    transfer = r.get("transfer") or {}
    layouts = f"{transfer.get('source_layout')} -> {transfer.get('dest_layout')}; " if transfer else ""
    return [f"{len(bad)} KV transfers between different layouts (first: to {pod}: {layouts}{r.get('error', '')[:200]})"]


def _cross_version(ev: Evidence) -> list[str]:
    pods = ev.timeline.every_pod()
    protocol = [
        (p, r) for p, r in ev.records
        if r.get("outcome") == engine_api.RUNTIME_PROTOCOL_MISMATCH or r.get("protocol_version") != r.get("engine_protocol_version")
    ]  # fmt: skip
    out = []
    if protocol:
        p, r = protocol[0]
        out.append(
            f"{len(protocol)} requests crossed runtime protocol versions (first: worker {p} speaks {r.get('engine_protocol_version')}, "
            f"request from {r.get('frontend')} spoke {r.get('protocol_version')})"
        )
    if not ev.scenario.workers_change:
        return out
    used: dict[str, set[bool | None]] = defaultdict(set)
    for p, r in ev.records:
        if p in pods and r.get("frontend") in pods:
            used[str(r["frontend"])].add(ev.scenario.version(pods[p]))
    unknown = {r.get("frontend") for _, r in ev.records} - set(pods)
    for frontend, versions in sorted(used.items()):
        own = ev.scenario.version(pods[frontend])
        if len(versions) > 1 or (own is not None and versions != {own}):
            named = sorted("new" if v else "old" for v in versions)
            mine = "" if own is None else f" (itself {'new' if own else 'old'})"
            out.append(f"frontend {frontend}{mine} sent requests to workers of versions {named}")
            break
    if unknown:
        out.append(f"ground truth names frontends that are no pod of the namespace: {sorted(str(u) for u in unknown)[:3]}")
    return out


def _share(ev: Evidence) -> list[str]:
    """Observed share of the new version against the ready ratio over each request's last ``follow_s``."""
    pods = ev.timeline.every_pod()
    follow_s = ev.follow_s
    observed: list[bool] = []
    low: list[float] = []
    high: list[float] = []
    for pod, r in ev.records:
        if r.get("role") not in ("decode", "agg") or r.get("outcome") != groundtruth.OK or pod not in pods:
            continue
        arrival = float(r.get("arrival") or 0.0)
        if not ev.changed_at <= arrival <= ev.finished_at:
            continue
        who = r.get("frontend") if not ev.scenario.workers_change else pod
        if who not in pods:
            continue
        ratios = [s for s in (new_share(ev.timeline.at(arrival - d), ev.scenario) for d in (0.0, follow_s / 2, follow_s)) if s is not None]
        if not ratios:
            continue
        observed.append(ev.scenario.is_new(pods[who]))
        low.append(min(ratios))
        high.append(max(ratios))
    if len(observed) < 20:
        return [f"only {len(observed)} requests were served during the rollout; too few to judge the traffic split"]
    share = sum(observed) / len(observed)
    lo, hi = sum(low) / len(low), sum(high) / len(high)
    if lo - SHARE_TOLERANCE <= share <= hi + SHARE_TOLERANCE:
        return []
    return [
        f"the new version served {share:.2f} of {len(observed)} requests during the rollout; the ready ratio (allowing "
        f"{follow_s:g}s for weights to follow) called for {lo:.2f}..{hi:.2f} (tolerance {SHARE_TOLERANCE})"
    ]


def _availability_and_ratio(ev: Evidence) -> list[str]:
    out: list[str] = []
    floor = {k: n - ev.max_unavailable for k, n in TARGETS.items()}
    for t, state in ev.timeline.moments:
        if not ev.changed_at <= t <= ev.finished_at:
            continue
        ready = side_counts(state, ev.scenario, only_ready=True)
        for kind, least in floor.items():
            have = sum(n for (_, k), n in ready.items() if k == kind)
            if have < least and not out:
                when = t - ev.changed_at
                out.append(f"maxUnavailable {ev.max_unavailable} exceeded: {when:.1f}s in, {have} {kind} ready of {TARGETS[kind]}")
        existing = side_counts(state, ev.scenario, only_ready=False)
        for new in (True, False):
            counts = {k: existing.get((new, k), 0) for k in TARGETS}
            least_share = min(counts[k] / n for k, n in TARGETS.items())
            ahead = [k for k, n in TARGETS.items() if counts[k] > math.floor(least_share * n + 1e-9) + 1]
            if ahead and len(out) < 2 and not any("ratio" in o for o in out):
                side = "new" if new else "old"
                out.append(f"prefill:decode ratio broken on the {side} side {t - ev.changed_at:.1f}s in: {counts} (targets {TARGETS})")
    return out


def _leftovers(ev: Evidence) -> list[str]:
    final = ev.timeline.moments[-1][1] if ev.timeline.moments else {}
    going = {n for n, p in final.items() if p["metadata"].get("deletionTimestamp")}  # NB: terminating, draining its streams
    stale = sorted(n for n, p in final.items() if ev.scenario.version(p) not in (None, ev.final_new) and n not in going)
    out = [f"pods of the abandoned version still there at the end: {stale}"] if stale else []
    frontends = sorted(n for n, p in final.items() if ctype(p) == "frontend" and not p["metadata"].get("deletionTimestamp"))
    if len(frontends) != 1:
        out.append(f"the DGD asks for 1 frontend; at the end there are {frontends}")
    if ev.stale_metadata:
        out.append(f"WorkerMetadata of pods that are gone still published at the end: {ev.stale_metadata}")
    return out


# -- driving a scenario ---------------------------------------------------------------------------------


async def address(env: ClusterEnvironment, name: str, timeout_s: float) -> str:
    async def probe() -> str | None:
        found = await kc.get(env, kc.DGD, name)
        return ((found or {}).get("status") or {}).get("address")

    return str(await kc.wait_for(probe, timeout_s, f"status.address of DGD {name}"))


async def versions_running(env: ClusterEnvironment, scenario: Scenario, new: bool) -> bool:
    """Only pods of one version of the changed kinds, every target Ready."""
    pods = [p for p in await kc.pods(env) if ctype(p) and not p["metadata"].get("deletionTimestamp")]
    wanted = {**TARGETS, "frontend": 1}
    counts = Counter(ctype(p) for p in pods if serving(p) and scenario.version(p) in (None, new))
    others = [p for p in pods if scenario.version(p) not in (None, new)]
    return not others and sum(1 for p in pods if ctype(p) == "frontend") == 1 and all(counts.get(k, 0) >= n for k, n in wanted.items())


async def deploy(env: ClusterEnvironment, timeouts: Timeouts, dgd: dict[str, Any]) -> str:
    await kc.create(env, kc.DGD, dgd)
    url = await address(env, dgd["metadata"]["name"], timeouts.operator_reconcile_s)
    await kc.wait_for(lambda: versions_running(env, BLOCK_SIZE, new=False), timeouts.pods_ready_s, "the DGD's 5 pods Ready")
    return url


async def patch_spec(env: ClusterEnvironment, dgd: dict[str, Any]) -> None:
    await kc.patch(env, kc.DGD, dgd["metadata"]["name"], {"spec": dgd["spec"]})


MidWay = Callable[[ClusterEnvironment, dict[str, Any]], Awaitable[None]]


async def run(ctx: TestContext, scenario: Scenario, mid_way: MidWay | None = None, final_new: bool = True) -> Evidence:
    """Deploy, roll under traffic (``mid_way`` acts once the first new worker is Ready), judge nothing yet."""
    return await run_in(kc.env_of(ctx), ctx.timeouts, scenario, mid_way, final_new)


async def run_in(
    env: ClusterEnvironment, timeouts: Timeouts, scenario: Scenario, mid_way: MidWay | None = None, final_new: bool = True
) -> Evidence:
    """``run`` outside the runner: the suite's own reliability tests drive an operator they kill and restart."""
    dgd = base_dgd()
    url = await deploy(env, timeouts, dgd)
    history = kc.PodHistory(env).start()
    wall_offset = time.time() - time.monotonic()
    load = await StreamingTraffic(url, MODEL, concurrency=CONCURRENCY, request_timeout_s=timeouts.request_s).start()
    try:
        await asyncio.sleep(WARM_S)
        changed = copy.deepcopy(dgd)
        scenario.change(changed)
        changed_at = time.time()
        await patch_spec(env, changed)
        if mid_way is not None:
            await kc.wait_for(lambda: _some_new_ready(env, scenario), timeouts.rollout_s, "a first Ready pod of the new version")
            await mid_way(env, changed)
        await kc.wait_for(
            lambda: versions_running(env, scenario, new=final_new), timeouts.rollout_s, "the rollout's end: the final version alone"
        )
        finished_at = time.time()
        await asyncio.sleep(TAIL_S)
    finally:
        sent = await load.stop()
        await asyncio.sleep(0.5)
        history.stop()
    timeline = Timeline.of(history, wall_offset)
    records = read_ground_truth(env, timeline.every_pod())
    stale = await _stale_metadata(env, timeline)
    evidence = Evidence(scenario, sent, records, timeline, changed_at, finished_at, 0, timeouts.weight_follow_s, stale, final_new)
    evidence.steps = await _rollout_events(env, dgd["metadata"]["name"])
    return evidence


async def _rollout_events(env: ClusterEnvironment, name: str) -> list[str]:
    """The implementation's own account of its steps (Events on the DGD): reported, never judged."""
    found = await asyncio.to_thread(env.core.list_namespaced_event, env.namespace, _request_timeout=30)
    items = sorted(
        (e for e in found.items if e.involved_object.name == name and e.involved_object.kind == kn.DGD_KIND),
        key=lambda e: (e.metadata.creation_timestamp, e.metadata.name),
    )
    return [f"{e.metadata.creation_timestamp:%H:%M:%S} {e.reason}: {e.message}" for e in items]


async def _stale_metadata(env: ClusterEnvironment, timeline: Timeline) -> list[str]:
    """WorkerMetadata naming a pod that no longer exists (the fakes withdraw theirs when they stop)."""
    found = await asyncio.to_thread(
        env.custom.list_namespaced_custom_object, kn.WM_GROUP, kn.WM_VERSION, env.namespace, kn.WM_PLURAL, _request_timeout=30
    )
    final = timeline.moments[-1][1] if timeline.moments else {}
    return sorted(str(i["metadata"]["name"]) for i in found.get("items", []) if (i.get("spec") or {}).get("podName") not in final)


async def _some_new_ready(env: ClusterEnvironment, scenario: Scenario) -> bool:
    return any(ctype(p) and scenario.is_new(p) and serving(p) for p in await kc.pods(env))


def summary(ev: Evidence) -> str:
    """Requests sent and failed, duration, the new version's share of requests per second, the implementation's steps."""
    failed = sum(1 for s in ev.sent if not s.ok)
    head = (
        f"{len(ev.sent)} requests sent, {failed} failed, rollout {ev.finished_at - ev.changed_at:.1f}s, "
        f"{len(ev.records)} ground-truth records from {len({p for p, _ in ev.records})} engine pods"
    )
    return "\n".join([head, f"observed share of the new version by second: {observed_shares(ev)}", *ev.steps])


def observed_shares(ev: Evidence) -> list[str]:
    """Per second since the change: requests served by the new version / requests served (decode or aggregated records)."""
    pods = ev.timeline.every_pod()
    bins: dict[int, list[bool]] = defaultdict(list)
    for pod, r in ev.records:
        who = pod if ev.scenario.workers_change else str(r.get("frontend"))
        if r.get("role") in ("decode", "agg") and r.get("outcome") == groundtruth.OK and who in pods:
            bins[int(float(r.get("arrival") or 0.0) - ev.changed_at)].append(ev.scenario.is_new(pods[who]))
    return [f"{t}s:{sum(v)}/{len(v)}" for t, v in sorted(bins.items()) if -2 <= t <= ev.finished_at - ev.changed_at + 1]


async def serving_pods(env: ClusterEnvironment) -> dict[str, bool]:
    """Name -> terminating? for every pod of the suite's images."""
    return {p["metadata"]["name"]: bool(p["metadata"].get("deletionTimestamp")) for p in await kc.pods(env) if ctype(p)}


def pods_changed(before: Mapping[str, bool], after: Mapping[str, bool]) -> tuple[list[str], list[str]]:
    """(created, deleted) between two ``serving_pods`` views; a pod terminating before that is gone after is no change."""
    created = sorted(set(after) - set(before))
    deleted = sorted(n for n, terminating in after.items() if terminating and not before.get(n, False))
    deleted += sorted(n for n in set(before) - set(after) if not before[n])
    return created, deleted


def counts_must_hold(before: Mapping[str, bool], after: Mapping[str, bool], held_s: float) -> None:
    created, deleted = pods_changed(before, after)
    if created or deleted:
        raise AssertionError(
            f"{PAUSE}: paused, yet within {held_s:g}s the operator created {created or 'nothing'} and deleted {deleted or 'nothing'}"
        )
