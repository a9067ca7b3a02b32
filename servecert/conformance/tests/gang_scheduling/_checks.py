"""What GANG-SCHEDULING checks share: the case's own nodes, seed 004's story 4 placed on them, bindings over time.

Data flow::

    add_case_nodes(env, n)        kwok Nodes of 8 GPUs, labelled and tainted servecert.io/case=<namespace>
    story4(env) / place(spec)     pods select and tolerate exactly those nodes
    PodHistory (utils.kube)   every pod event the suite's own watch saw, with the time it saw it
        -> timeline(history)      (time, pod, bound?) — bound from spec.nodeName to deletion
        -> partial_spans / unpaired_spans     how long a replica was partly bound, or a role ran alone
        -> *_must_* assertions    name the replica, the span and the pods

Why per-case nodes: the rows of seed 004's table differ only in how many GPUs exist, and the
cluster is shared by every case; nodes no other pod may use make "the cluster offers 64 GPUs"
true for this case alone. Why a timeline rather than the end state: a scheduler that binds
half a replica and the rest a second later ends in the same state as one that binds it whole;
only the history tells them apart. Bindings of one scheduling decision reach the API one by one,
so a replica may look partly bound for milliseconds; ``gang_bind_window_s`` bounds that.
Replica membership comes from seed 004's pod names (``{service}-{role}-{replica}-0[-w]``),
which INFERENCESERVICE-API certifies — not from the implementation's labels.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servecert.conformance.suite.test_case import TestContext
from servecert.conformance.utils import kube as kc
from servecert.harness import seed_examples
from servecert.harness.cluster import kube, topology
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import waiting

CASE_LABEL = topology.ISOLATION_KEY
GPU = topology.GPU_RESOURCE
GPUS_PER_NODE = 8
STORY4 = "deepseek-r1-disagg"
PREFILL, DECODE = "prefill", "decode"

Groups = dict[str, frozenset[str]]
"""Replica ("prefill-0") -> the names of its pods."""
Event = tuple[float, str, bool]
"""(time seen, pod name, bound after this event)."""


def case_node(env: ClusterEnvironment, name: str, labels: Mapping[str, str] | None = None, gpus: int = GPUS_PER_NODE) -> dict[str, Any]:
    """A kwok node only this case's pods select and tolerate."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    return topology.fake_node(name, labels or {}, resources, reserved_for=env.namespace)


async def add_case_nodes(env: ClusterEnvironment, count: int, *, ready_s: float, first: int = 0) -> list[str]:
    """``count`` nodes of 8 GPUs named ``<namespace>-n<i>``, Ready (within ``ready_s``: ``gang_nodes_ready_s``) when this
    returns; deleted when the case closes."""
    names = [f"{env.namespace}-n{i}" for i in range(first, first + count)]
    await asyncio.gather(*(kc.add_node(env, case_node(env, name)) for name in names))
    await nodes_ready(env, names, ready_s)
    return names


async def nodes_ready(env: ClusterEnvironment, names: Sequence[str], timeout_s: float) -> None:
    """Wait for kwok to report the nodes Ready (``gang_nodes_ready_s``): a scheduler that parks pods until a node event
    must get a fair start."""

    async def ready() -> bool:
        up = await asyncio.to_thread(kube.ready_node_names, env.api, f"{CASE_LABEL}={env.namespace}")
        return set(names) <= up

    await kc.wait_for(ready, timeout_s, f"nodes {list(names)[:3]}... Ready")


def place(pod_spec: dict[str, Any], env: ClusterEnvironment) -> dict[str, Any]:
    """Make a pod spec select and tolerate the case's nodes (and only them)."""
    return topology.reserve(pod_spec, env.namespace)


def story4(env: ClusterEnvironment, *, prefill: int = 1, decode: int = 2) -> dict[str, Any]:
    """Seed 004's story 4 verbatim (8 GPUs a pod), replicas as given, on the case's nodes."""
    body = copy.deepcopy(seed_examples.load("inferenceservice-story4"))
    for role in body["spec"]["roles"]:
        role["replicas"] = {PREFILL: prefill, DECODE: decode}[role["name"]]
        place(role["template"].setdefault("spec", {}), env)
    return body


def groups(body: Mapping[str, Any]) -> Groups:
    """Seed 004's pod names per replica: leader ``{lws}-0``, workers ``{lws}-0-{w}``."""
    service = body["metadata"]["name"]
    out: Groups = {}
    for role in body["spec"]["roles"]:
        size = int((role.get("multinode") or {}).get("nodeCount", 1))
        for replica in range(int(role.get("replicas", 1))):
            lws = f"{service}-{role['name']}-{replica}"
            out[f"{role['name']}-{replica}"] = frozenset([f"{lws}-0", *(f"{lws}-0-{w}" for w in range(1, size))])
    return out


def of_role(all_groups: Groups, role: str) -> Groups:
    return {name: pods for name, pods in all_groups.items() if name.rsplit("-", 1)[0] == role}


def timeline(history: kc.PodHistory) -> list[Event]:
    """Per event: is the pod bound after it? Bound from ``spec.nodeName`` until deletion starts."""
    out: list[Event] = []
    for at, kind, pod in list(history.events):
        bound = bool((pod.get("spec") or {}).get("nodeName")) and kind != "DELETED" and not pod["metadata"].get("deletionTimestamp")
        out.append((at, pod["metadata"]["name"], bound))
    return out


def bound_at_end(events: Sequence[Event]) -> set[str]:
    state: dict[str, bool] = {}
    for _, pod, bound in events:
        state[pod] = bound
    return {pod for pod, bound in state.items() if bound}


def whole(bound: set[str], all_groups: Groups) -> set[str]:
    return {name for name, pods in all_groups.items() if pods <= bound}


def touched(bound: set[str], all_groups: Groups) -> set[str]:
    return {name for name, pods in all_groups.items() if pods & bound}


@dataclass(frozen=True)
class Span:
    what: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


class PlacementBroken(AssertionError):
    """A replica was partly bound, or a role ran alone, longer than the bind window: no later state repairs it."""


def _spans(events: Sequence[Event], end: float, bad: Callable[[set[str]], bool], describe: Callable[[set[str]], str]) -> list[Span]:
    """Maximal intervals over which ``bad(bound)`` holds, each named by ``describe(bound)`` at its start."""
    bound: set[str] = set()
    out: list[Span] = []
    opened: tuple[float, str] | None = None
    for at, pod, is_bound in [*events, (end, "", False)]:
        if pod:
            (bound.add if is_bound else bound.discard)(pod)
        now_bad = bool(pod) and bad(bound)
        if now_bad and opened is None:
            opened = (at, describe(bound))
        elif not now_bad and opened is not None:
            out.append(Span(opened[1], opened[0], at))
            opened = None
    return out


def partial_spans(events: Sequence[Event], all_groups: Groups, end: float) -> list[Span]:
    """Intervals in which some replica had some but not all of its pods bound."""
    out: list[Span] = []
    for name, pods in all_groups.items():
        def partly(bound: set[str], pods: frozenset[str] = pods) -> bool:
            return 0 < len(pods & bound) < len(pods)

        def say(bound: set[str], name: str = name, pods: frozenset[str] = pods) -> str:
            return f"{name} ({len(pods & bound)}/{len(pods)} pods bound: {sorted(pods & bound)})"

        out += _spans(events, end, partly, say)
    return out


def unpaired_spans(events: Sequence[Event], all_groups: Groups, end: float) -> list[Span]:
    """Intervals in which a whole prefill replica ran with no whole decode replica, or the reverse."""
    prefill, decode = of_role(all_groups, PREFILL), of_role(all_groups, DECODE)

    def alone(bound: set[str]) -> bool:
        return bool(whole(bound, prefill)) != bool(whole(bound, decode))

    def say(bound: set[str]) -> str:
        return f"whole replicas {sorted(whole(bound, all_groups))} (prefill without decode or decode without prefill)"

    return _spans(events, end, alone, say)


def spans_must_stay_within(spans: Iterable[Span], window_s: float, what: str) -> None:
    long = [s for s in spans if s.seconds > window_s]
    if long:
        worst = max(long, key=lambda s: s.seconds)
        raise PlacementBroken(
            f"{what}: {len(long)} time(s) longer than {window_s:g}s; longest {worst.seconds:.2f}s: {worst.what}"
        )


def replicas_must_be_bound(bound: set[str], all_groups: Groups, expected: set[str], what: str) -> None:
    """Exactly the ``expected`` replicas whole, and no pod of any other replica bound."""
    full, some = whole(bound, all_groups), touched(bound, all_groups)
    if full != expected or some != expected:
        partial = sorted(some - full)
        broken = "intra-replica atomicity broken: " if partial else ""
        raise AssertionError(
            f"{what}: {broken}whole replicas {sorted(full)}, partly bound {partial}; expected exactly "
            f"{sorted(expected) or 'none'} (bound pods: {sorted(bound)})"
        )


async def hold_and_watch(history: kc.PodHistory, all_groups: Groups, seconds: float, expected: set[str], what: str) -> None:
    """For ``seconds``, the bound replicas must stay exactly ``expected`` (nothing more binds, nothing falls off)."""
    async for _ in waiting.holding_async(seconds, 0.25):  # NB: the last tick is at the window's end
        replicas_must_be_bound(bound_at_end(timeline(history)), all_groups, expected, what)


async def wait_for_replicas(
    history: kc.PodHistory, all_groups: Groups, accept: Any, timeout_s: float, window_s: float, what: str
) -> set[str]:
    """Wait until ``accept(whole_replicas)`` holds with no partly bound replica; return the whole replicas.

    A replica partly bound for longer than ``window_s`` fails at once: no later state repairs that.
    """

    async def probe() -> set[str] | None:
        timeline_must_be_atomic(history, all_groups, window_s, what, paired=False)
        bound = bound_at_end(timeline(history))
        full = whole(bound, all_groups)
        return full if full == touched(bound, all_groups) and accept(full) else None

    try:
        found: set[str] = await kc.wait_for(probe, timeout_s, what)
    except PlacementBroken:
        raise
    except AssertionError:
        bound = bound_at_end(timeline(history))
        raise AssertionError(
            f"{what}: the replicas that fit were not placed within {timeout_s:g}s; whole replicas "
            f"{sorted(whole(bound, all_groups))}, partly bound {sorted(touched(bound, all_groups) - whole(bound, all_groups))}; "
            f"{await pod_group_says(history.env)}"
        ) from None
    return found


async def pod_group_says(env: ClusterEnvironment) -> str:
    """The namespace's PodGroups' phase and last condition, for failure messages."""
    said = []
    for group in await asyncio.to_thread(kube.list_pod_groups, env.api, env.namespace):
        status = group.get("status") or {}
        last = (status.get("conditions") or [{}])[-1]
        said.append(f"PodGroup {group['metadata']['name']} {status.get('phase')}: {last.get('message') or last.get('reason') or ''}")
    return "; ".join(said) or "no PodGroup in the namespace"


async def apply_story(ctx: TestContext, body: dict[str, Any], what: str) -> Groups:
    """Create the InferenceService and wait for every pod seed 004 names for it; return its replicas."""
    env, all_groups = kc.env_of(ctx), groups(body)
    await kc.create(env, kc.ISVC, body)
    await pods_must_exist(env, frozenset().union(*all_groups.values()), ctx.timeouts.operator_reconcile_s, what)
    return all_groups


async def all_whole(ctx: TestContext, history: kc.PodHistory, all_groups: Groups, what: str) -> set[str]:
    """Wait until every replica is wholly bound (and none was ever partly bound beyond the window)."""
    t = ctx.timeouts
    return await wait_for_replicas(history, all_groups, lambda full: full == set(all_groups), t.gang_bound_s, t.gang_bind_window_s, what)


async def pods_must_exist(env: ClusterEnvironment, names: frozenset[str] | set[str], timeout_s: float, what: str) -> None:
    async def present() -> bool:
        return set(names) <= {p["metadata"]["name"] for p in await kc.pods(env)}

    await kc.wait_for(present, timeout_s, f"{what}: pods {sorted(names)} to exist")


def timeline_must_be_atomic(history: kc.PodHistory, all_groups: Groups, window_s: float, what: str, *, paired: bool) -> None:
    """No replica partly bound, and (``paired``) no role running alone, for longer than the bind window."""
    events = timeline(history)
    end = time.monotonic()
    partial = partial_spans(events, all_groups, end)
    spans_must_stay_within(partial, window_s, f"{what}: intra-replica atomicity broken, a replica was partly bound")
    if paired:
        spans_must_stay_within(
            unpaired_spans(events, all_groups, end), window_s, f"{what}: cross-role coordination broken, a role ran without the other"
        )
