"""A DGD's pods, sets and rollout, as one pure plan: what to create, delete, drain, and how to weight the frontends.

Data flow::

    the DGD (spec: components, rolloutStrategy) + the pods it owns (labels: revisions, dynamo namespace)
        -> plan(dgd, pods, levels, images, behaviour)
             worker pods of the spec's workers revision   = the new side
             worker pods of any other workers revision     = the old side (seed 001 4.1.2)
             rollout_plan.next_step(Situation)             -> new/old counts for this step
             frontend sets, one per (workers, frontend) revision: the spec's is created at once
             (the new dynamo namespace gets its frontend first); others drain once nothing needs them
             weights: each frontend set's share of ready workers (weights.split)
        -> Plan(create, delete, drain, weights, status, step)    applied by ``reconcile``

Everything is derived from the pods and the spec, never from memory: a restarted operator
computes the same plan (the status it writes is a report, and a resume needs nothing else).
A rollback is the same mechanism: reverting the spec makes the old revision the target again,
and the pods of the abandoned one become the old side.

Every change of a template, the frontend's alone included, is a new workers revision: a new
dynamo namespace with its own frontend, the workers rolled into it step by step (seed 001 4.1,
T1-T5: "Final State: Frontend + Workers in NS B"). The broken ``frontend_rolls_workers=False``
keeps the workers on a frontend-only change and puts the new frontend beside them in their
namespace; its weights then follow the sets' ready frontends (the workers behind them are the same).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servecert.protocol import kube_names as kn
from servecert.protocol.kube_objects import DynamoGraphDeployment, Pod, RolloutStatus
from servecert.reference_impl.operator import dgd_pods, inference_service, rollout_plan
from servecert.reference_impl.operator.behaviour import REFERENCE, Behaviour
from servecert.reference_impl.operator.rollout_plan import Side, Situation, Step
from servecert.reference_impl.traffic_split import weights as weight_split

SetKey = tuple[str, str]  # (workers revision, frontend revision)


@dataclass(frozen=True)
class PodView:
    name: str
    component: str
    ctype: str
    revisions: dgd_pods.Revisions
    dynamo_namespace: str
    ready: bool
    deleting: bool
    ip: str

    @property
    def index(self) -> int:
        tail = self.name.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else 0

    @property
    def is_frontend(self) -> bool:
        return self.ctype == dgd_pods.FRONTEND

    @property
    def set_key(self) -> SetKey:
        return (self.revisions.workers, self.revisions.frontend)


def view(pod: Pod) -> PodView:
    meta, status = pod["metadata"], pod.get("status") or {}
    labels = meta.get("labels") or {}
    return PodView(
        name=meta["name"],
        component=str(labels.get(kn.COMPONENT_LABEL, "")),
        ctype=str(labels.get(kn.COMPONENT_TYPE_LABEL, "")),
        revisions=dgd_pods.pod_revisions(pod),
        dynamo_namespace=str(labels.get(kn.DYNAMO_NAMESPACE_LABEL, "")),
        ready=inference_service.pod_ready(pod),
        deleting=bool(meta.get("deletionTimestamp")),
        ip=str(status.get("podIP") or ""),
    )


@dataclass
class Plan:
    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    drain: list[str] = field(default_factory=list)
    """Frontend pods to take out of the proxy (drain) and then delete: they finish their streams on SIGTERM."""
    weights: dict[str, int] = field(default_factory=dict)
    """Frontend pod name -> proxy weight (0..256), for ready frontends only."""
    frontends: dict[str, PodView] = field(default_factory=dict)
    """Every live frontend pod, by name: what the proxy's slots and the drains are made of."""
    target: dgd_pods.Revisions = field(default_factory=lambda: dgd_pods.Revisions("", ""))
    """The spec's revisions: the new side."""
    step: Step | None = None
    status: RolloutStatus = field(default_factory=RolloutStatus)


@dataclass(frozen=True)
class Strategy:
    max_surge: int = 1
    max_unavailable: int = 0
    paused: bool = False


def strategy(dgd: DynamoGraphDeployment) -> Strategy:
    """spec.rolloutStrategy; a percentage is taken of the largest worker component (surge up, unavailable down)."""
    raw = (dgd.get("spec") or {}).get("rolloutStrategy") or {}
    largest = max((dgd_pods.replicas(c) for c in dgd_pods.components(dgd) if c.get("type") != dgd_pods.FRONTEND), default=1)
    surge = _count(raw.get("maxSurge", 1), largest, math.ceil)
    unavailable = _count(raw.get("maxUnavailable", 0), largest, math.floor)
    if surge + unavailable == 0:
        surge = 1  # NB: as a Deployment refuses 0/0, which could never progress; admission tells the user
    return Strategy(surge, unavailable, bool(raw.get("paused", False)))


def _count(value: int | str, of: int, rounding: Callable[[float], int]) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return max(0, int(rounding(of * float(value[:-1]) / 100)))
    return max(0, int(value))


def routing_frontends(
    dgd: DynamoGraphDeployment, pods: Sequence[Pod], behaviour: Behaviour = REFERENCE
) -> tuple[dict[str, str], frozenset[str]]:
    """While old workers remain: the spec's ready frontends (name -> IP) ``frontend_routes`` asks, and the IPs of the
    spec's ready workers they should have found."""
    target = dgd_pods.revisions(dgd, behaviour.frontend_rolls_workers)
    views = [view(p) for p in pods if not p["metadata"].get("deletionTimestamp")]
    workers = [v for v in views if not v.is_frontend and v.ctype != dgd_pods.PROXY]
    if all(v.revisions.workers == target.workers for v in workers):
        return {}, frozenset()
    frontends = {v.name: v.ip for v in views if v.is_frontend and v.set_key == (target.workers, target.frontend) and v.ready and v.ip}
    return frontends, frozenset(v.ip for v in workers if v.revisions.workers == target.workers and v.ready and v.ip)


def other_revisions(dgd: DynamoGraphDeployment, pods: Sequence[Pod], target: dgd_pods.Revisions) -> list[str]:
    """Worker pods of any revision but ``target``, not already going (the broken ``resume_rollouts=False`` deletes them)."""
    views = [view(p) for p in pods if not p["metadata"].get("deletionTimestamp")]
    return sorted(v.name for v in views if not v.is_frontend and v.ctype != dgd_pods.PROXY and v.revisions.workers != target.workers)


def _found(workers: Sequence[PodView], frontends: Sequence[str], routes: Mapping[str, frozenset[str]] | None) -> list[PodView]:
    """``workers``, each Ready only if every one of ``frontends`` has found it (``routes=None``: pod readiness alone)."""
    if routes is None:
        return list(workers)
    known = [routes.get(name) for name in frontends]

    def found(v: PodView) -> bool:
        return bool(known) and all(hosts is not None and v.ip in hosts for hosts in known)

    return [dataclasses.replace(v, ready=v.ready and found(v)) for v in workers]


def plan(
    dgd: DynamoGraphDeployment,
    pods: Sequence[Pod],
    levels: Sequence[str] | None,
    images: dgd_pods.Images,
    behaviour: Behaviour = REFERENCE,
    routes: Mapping[str, frozenset[str]] | None = None,
) -> Plan:
    """The next step; ``routes`` (``frontend_routes.read``) holds a new worker back from the steps until its frontends found it."""
    isolate = behaviour.isolate_rollouts
    target = dgd_pods.revisions(dgd, behaviour.frontend_rolls_workers)
    views = [view(p) for p in pods]
    live = [v for v in views if not v.deleting]
    workers = [v for v in live if not v.is_frontend and v.ctype != dgd_pods.PROXY]
    frontends = [v for v in live if v.is_frontend]
    worker_targets = _targets(dgd, frontend=False)
    frontend_targets = _targets(dgd, frontend=True)
    new_workers = [v for v in workers if v.revisions.workers == target.workers]
    old_workers = [v for v in workers if v.revisions.workers != target.workers]
    target_set = (target.workers, target.frontend)
    if old_workers and not behaviour.full_new_frontend:
        frontend_targets = {name: min(n, 1) for name, n in frontend_targets.items()}
    target_frontends_ready = _all_ready(frontends, target_set, frontend_targets)
    out = Plan(frontends={v.name: v for v in frontends}, target=target)
    counts: dict[str, int] = dict(worker_targets)
    if old_workers:
        routing = [v.name for v in frontends if v.set_key == target_set and v.ready and v.ip]
        found_new = _found(new_workers, routing, routes)
        situation = _situation(dgd, worker_targets, old_workers, found_new, target_frontends_ready)
        out.step = rollout_plan.next_step(_broken_as_asked(situation, behaviour))
        counts = out.step.new
        out.delete += _scale_down(old_workers, out.step.old)
    counts.update(frontend_targets)
    desired = dgd_pods.desired_pods(
        dgd, levels, images, counts, isolate, behaviour.worker_topology_wait, behaviour.default_mismatch_policy, target
    )
    have = {v.name for v in live}
    out.create = [pod for name, pod in desired.items() if name not in have]
    out.delete += [v.name for v in live if _same_set(v, target) and v.name not in desired]
    for v in frontends:
        if v.set_key != target_set and (not behaviour.new_frontend_first or not _still_needed(v, old_workers, target_frontends_ready)):
            out.drain.append(v.name)
    going = set(out.delete)
    serving_workers = [w for w in workers if w.name not in going]
    if behaviour.weight_counts_terminating:
        serving_workers += [v for v in views if v.deleting and not v.is_frontend and v.ctype != dgd_pods.PROXY]
    out.weights = _weights(frontends, serving_workers, set(out.drain), set(worker_targets), target_set, behaviour)
    out.status = _status(dgd, target, out, old_workers, new_workers, frontends, target_frontends_ready, isolate)
    return out


def _broken_as_asked(s: Situation, behaviour: Behaviour) -> Situation:
    """The reference keeps every rule; the broken variants in tests/nonconforming drop the one they name."""
    if not behaviour.honour_pause:
        s = dataclasses.replace(s, paused=False)
    if not behaviour.honour_max_unavailable:
        s = dataclasses.replace(s, max_unavailable=sum(s.target.values()))
    if not behaviour.honour_max_surge:
        s = dataclasses.replace(s, max_surge=sum(s.target.values()))
    if not behaviour.honour_ratio:
        s = dataclasses.replace(s, keep_ratio=False)
    if not behaviour.workers_after_frontend:
        s = dataclasses.replace(s, frontend_ready=True)
    return s


def _targets(dgd: DynamoGraphDeployment, frontend: bool) -> dict[str, int]:
    """Replicas by component name, of the frontend components or of the worker components."""
    return {str(c["name"]): dgd_pods.replicas(c) for c in dgd_pods.components(dgd) if (c.get("type") == dgd_pods.FRONTEND) == frontend}


def _same_set(v: PodView, target: dgd_pods.Revisions) -> bool:
    """A pod of the target revision (workers: same workers revision; frontends: same pair)."""
    return v.revisions.workers == target.workers and (not v.is_frontend or v.revisions.frontend == target.frontend)


def _situation(
    dgd: DynamoGraphDeployment,
    targets: Mapping[str, int],
    old: Sequence[PodView],
    new: Sequence[PodView],
    frontend_ready: bool,
) -> Situation:
    strat = strategy(dgd)
    return Situation(
        target=dict(targets),
        old=_sides(old),
        new=_sides(new),
        frontend_ready=frontend_ready,
        paused=strat.paused,
        max_surge=strat.max_surge,
        max_unavailable=strat.max_unavailable,
    )


def _sides(views: Sequence[PodView]) -> dict[str, Side]:
    desired: dict[str, int] = defaultdict(int)
    ready: dict[str, int] = defaultdict(int)
    for v in views:
        desired[v.component] += 1
        ready[v.component] += int(v.ready)
    return {c: Side(desired[c], ready[c]) for c in desired}


def _scale_down(old: Sequence[PodView], keep: Mapping[str, int]) -> list[str]:
    """Old pods to delete so each component keeps ``keep[c]``: pods not ready first, then the highest index."""
    out: list[str] = []
    by_component: dict[str, list[PodView]] = defaultdict(list)
    for v in old:
        by_component[v.component].append(v)
    for component, views in by_component.items():
        extra = len(views) - keep.get(component, 0)
        ordered = sorted(views, key=lambda v: (v.ready, -v.index, v.name))
        out += [v.name for v in ordered[: max(0, extra)]]
    return out


def _all_ready(frontends: Sequence[PodView], key: SetKey, targets: Mapping[str, int]) -> bool:
    mine = [v for v in frontends if v.set_key == key]
    return all(sum(1 for v in mine if v.component == c and v.ready) >= n for c, n in targets.items())


def _still_needed(v: PodView, old_workers: Sequence[PodView], target_ready: bool) -> bool:
    """An old frontend serves until its own workers are gone and the spec's frontends are all ready."""
    if not target_ready:
        return True
    return any(w.revisions.workers == v.revisions.workers for w in old_workers)


def _weights(
    frontends: Sequence[PodView],
    workers: Sequence[PodView],
    draining: set[str],
    components: set[str],
    target: SetKey,
    behaviour: Behaviour = REFERENCE,
) -> dict[str, int]:
    """Seed 001 4.3.3: each frontend set gets the share of ready workers behind it; its ready pods split it evenly.

    Workers this step deletes are not counted (the caller applies weights before deleting), and a
    set without a ready worker of every component cannot serve a request, so it counts none. When
    every set shares one workers revision (the broken ``frontend_rolls_workers=False``), the sets'
    ready frontends are the measure instead: the workers behind them are the same.
    """
    serving = [v for v in frontends if v.ready and v.ip and v.name not in draining]
    sets = sorted({v.set_key for v in serving})
    if not sets:
        return {}
    if len({key[0] for key in sets}) == 1:
        ready = {key: sum(1 for v in serving if v.set_key == key) for key in sets}
    else:
        lag = behaviour.weight_lag_workers
        desired = behaviour.weight_from_desired
        counted = behaviour.weight_component_types
        ready = {key: _serving_workers(workers, key[0], components, lag if key == target else 0, desired, counted) for key in sets}
    shares = _shares(_broken_split(ready, target, behaviour.split))
    out: dict[str, int] = {}
    for key in sets:
        mine = [v for v in serving if v.set_key == key]
        for v in mine:
            out[v.name] = round(shares[key] / len(mine)) if shares[key] else 0
    return out


def _serving_workers(
    workers: Sequence[PodView],
    revision: str,
    components: set[str],
    lag: int = 0,
    desired: bool = False,
    types: frozenset[str] | None = None,
) -> int:
    """Ready workers of one revision, counted ``lag`` short per component; none unless every component has a ready one.

    ``desired``: every worker of the revision counts, Ready or not, once each component has a ready one (broken).
    ``types``: only workers of these component types count (broken: seed 001 4.3.1 counts every worker)."""
    mine = [w for w in workers if w.revisions.workers == revision]
    ready = [w for w in mine if w.ready]
    counted = {c: max(0, sum(1 for w in (mine if desired else ready) if w.component == c) - lag) for c in components}
    able = all(any(w.component == c for w in ready) for c in components)
    if not (able and all(counted.values())):
        return 0
    kinds = {w.component: w.ctype for w in mine}
    return sum(n for c, n in counted.items() if types is None or kinds.get(c) in types)


def _broken_split(ready: Mapping[SetKey, int], target: SetKey, split: str) -> dict[SetKey, int]:
    """The reference splits by ``ready``; the broken variants in tests/nonconforming split otherwise."""
    if split == "even":
        return {key: int(n > 0) for key, n in ready.items()}
    if split == "switch" and ready.get(target):
        return {key: int(key == target) for key in ready}
    return dict(ready)


def _shares(ready: Mapping[SetKey, int]) -> dict[SetKey, int]:
    """``weights.split`` for any number of sets; with nothing ready anywhere, an even split (no set can serve better)."""
    if len(ready) == 2:
        first, second = ready
        old, new = weight_split.split(ready[first], ready[second])
        return {first: old, second: new} if sum(ready.values()) else {first: 1, second: 1}
    total = sum(ready.values())
    if total == 0:
        return {key: 1 for key in ready}
    return {key: round(weight_split.MAX_WEIGHT * n / total) for key, n in ready.items()}


def _status(
    dgd: DynamoGraphDeployment,
    target: dgd_pods.Revisions,
    out: Plan,
    old_workers: Sequence[PodView],
    new_workers: Sequence[PodView],
    frontends: Sequence[PodView],
    target_frontends_ready: bool,
    isolate: bool,
) -> RolloutStatus:
    old_namespaces = sorted({v.dynamo_namespace for v in old_workers} | {v.dynamo_namespace for v in frontends if v.name in out.drain})
    if out.step is not None:
        phase, reason = out.step.phase, out.step.reason
    elif out.drain or not target_frontends_ready or out.create:
        phase, reason = rollout_plan.PROGRESSING, "the spec's frontends are starting or the old ones draining"
    else:
        phase, reason = rollout_plan.COMPLETE, "every pod runs the spec's revision"
    return {
        "phase": phase,
        "reason": reason,
        "targetRevision": {"workers": target.workers, "frontend": target.frontend},
        "newNamespace": dgd_pods.dynamo_namespace(dgd, target.workers, isolate),
        "oldNamespaces": [ns for ns in old_namespaces if ns != dgd_pods.dynamo_namespace(dgd, target.workers, isolate)],
        # NB: lists, not maps: a status merge patch replaces a list whole, but would keep the keys a map no longer has.
        "old": [{"component": c, "desired": s.desired, "ready": s.ready} for c, s in sorted(_sides(old_workers).items())],
        "new": [{"component": c, "desired": s.desired, "ready": s.ready} for c, s in sorted(_sides(new_workers).items())],
        "weights": [{"frontend": name, "weight": w} for name, w in sorted(out.weights.items())],
        "draining": sorted(out.drain),
    }
