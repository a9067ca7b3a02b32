"""ROLLOUT-ISOLATION's verdict: every rule a rollout broke, from the suite's own evidence.

Data flow: ``Evidence`` holds what ``servecert.conformance.tests.rollout_isolation._checks`` gathered — the client's outcome
of every request (``_traffic``), the engines' ground-truth records (one file per engine
pod, kept after the pod is gone), the ``Timeline`` of pod states from the suite's watch — and
``verdict`` returns one sentence with numbers per broken rule; ``rollout_must_be_clean`` raises
them prefixed with the scenario's seed 001 mode, so a failure names the mode. The rules:

* zero failed requests (status 200, no error event, ``[DONE]``);
* every request preprocessed with the card of the worker that served it (3.1), and no ready
  worker starved for ``starve_s`` while traffic ran and its version could serve (3.1 as Dynamo
  shows it: the new card is discarded and its workers get nothing);
* no KV transfer between different layouts (3.2);
* no protocol mismatch, no frontend talking to workers of both versions or of the other version (3.3);
* phase by phase, the share of requests served by the new version follows the ready ratio
  ``new_ready / (old_ready + new_ready)``, allowing the weights ``follow_s`` to follow, within
  ``share_tolerance`` plus sampling error (seed 001 4.3);
* per worker component, ready workers never below target - maxUnavailable, pods never above
  target + maxSurge, and on each side the prefill:decode ratio within one worker (for longer than
  ``ratio_grace_s``); no worker of the new version before a new frontend is Ready, nor before the new
  frontend has as many replicas as the old one had (T1); no request to a
  worker more than ``deleted_route_s`` into its deletion (seed 001 4.1.2, its steps T1-T5);
* at the end, no pod of the abandoned version, the spec's frontends, no WorkerMetadata of a gone pod.

Pure functions of the evidence, so each rule is shown to fail on evidence that breaks it
(tests/conformance/rollout_isolation/test_verdict.py).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from servecert.conformance.suite.timeouts import Timeouts
from servecert.conformance.tests.rollout_isolation._scenarios import PAUSE, Scenario, ctype
from servecert.conformance.tests.rollout_isolation._traffic import Sent
from servecert.conformance.utils.kube import pod_ready
from servecert.fakes import groundtruth
from servecert.protocol import engine_api, kube_objects

_DEFAULTS = Timeouts()

# -- the pod timeline --------------------------------------------------------------------------------


@dataclass
class Timeline:
    """Pod states over wall-clock time, from the suite's own watch, timed as the API server wrote them.

    The watch receives a change some time after the API server wrote it, and on a busy machine
    that is seconds: the suite's own thread waits for a core. Judged at receipt, a worker would
    look Ready seconds after the implementation saw it Ready, and the traffic it rightly got in
    between would look like traffic ahead of the ready ratio. So each moment is timed by the
    earliest upper bound of its write the suite has: its receipt; the write's own second in
    ``managedFields`` (the API server's clock, whole seconds: the write was before that second's
    end) when the write changed a managed field; and any later moment's bound (the watch delivers
    writes in the order they were made). The API server stamps a write before it commits it, so a
    bound can precede the commit by the server's own handling of that write: a fraction of a second
    on this cluster, against the seconds of a busy watch it removes.
    """

    moments: list[tuple[float, dict[str, kube_objects.Pod]]]
    lag_s: float = 0.0
    """The longest the watch received a write after that write's bound from the API server's clock."""

    @classmethod
    def of(cls, events: Sequence[tuple[float, str, kube_objects.Pod]], wall_offset: float) -> Timeline:
        """From a pod watch's (monotonic time, event type, pod) events; ``wall_offset`` turns times into wall clock."""
        state: dict[str, kube_objects.Pod] = {}
        states: list[dict[str, kube_objects.Pod]] = []
        received = [t + wall_offset for t, _, _ in events]
        bounds = _write_bounds(events, received)
        for _, kind, pod in events:
            name = pod["metadata"]["name"]
            if kind == "DELETED":
                state.pop(name, None)
            else:
                state[name] = pod
            states.append(dict(state))
        lag = max((r - b for r, b in zip(received, bounds, strict=True)), default=0.0)
        return cls(list(zip(bounds, states, strict=True)), lag_s=lag)

    def at(self, wall: float) -> dict[str, kube_objects.Pod]:
        found: dict[str, kube_objects.Pod] = {}
        for t, state in self.moments:
            if t > wall:
                break
            found = state
        return found

    def every_pod(self) -> dict[str, kube_objects.Pod]:
        """Last version of every pod ever seen, by name."""
        out: dict[str, kube_objects.Pod] = {}
        for _, state in self.moments:
            out.update(state)
        return out


def _write_bounds(events: Sequence[tuple[float, str, kube_objects.Pod]], received: Sequence[float]) -> list[float]:
    """Per event, the earliest upper bound of its write's time: receipt, the write's own second + 1, later bounds.

    The write's second: a new managedFields time (a write that changed a managed field stamps its
    manager's entry), or for the deletion request, which stamps none, ``deletionTimestamp`` less
    ``deletionGracePeriodSeconds`` (the server sets the one to its clock plus the other).
    """
    own: list[float] = []
    last: dict[str, kube_objects.Pod] = {}
    for (_, kind, pod), at in zip(events, received, strict=True):
        name = pod["metadata"]["name"]
        second = _write_second(kind, last.get(name), pod)
        own.append(at if second is None else min(at, second + 1.0))
        last[name] = pod
    bounds = list(own)
    for i in range(len(bounds) - 2, -1, -1):
        bounds[i] = min(bounds[i], bounds[i + 1])
    return bounds


def _write_second(kind: str, before: kube_objects.Pod | None, pod: kube_objects.Pod) -> float | None:
    """The second (API server's clock) of the write that made ``pod`` from ``before``, when the pod says it; else None."""
    if kind == "ADDED":
        return last_written(pod)
    if kind != "MODIFIED" or before is None:
        return None
    deletion, grace = pod["metadata"].get("deletionTimestamp"), pod["metadata"].get("deletionGracePeriodSeconds")
    if deletion and not before["metadata"].get("deletionTimestamp") and grace is not None:
        return datetime.datetime.fromisoformat(str(deletion)).timestamp() - float(grace)
    written, earlier = last_written(pod), last_written(before)
    return written if written is not None and (earlier is None or written > earlier) else None


def last_written(pod: kube_objects.Pod) -> float | None:
    """The latest ``managedFields`` time of a pod (the API server's clock, whole seconds), as wall-clock seconds."""
    fields = pod["metadata"].get("managedFields") or []
    times = [datetime.datetime.fromisoformat(str(f["time"])).timestamp() for f in fields if f.get("time")]
    return max(times) if times else None


def serving(pod: kube_objects.Pod) -> bool:
    return pod_ready(pod) and not pod["metadata"].get("deletionTimestamp")


def side_counts(state: Mapping[str, kube_objects.Pod], scenario: Scenario, only_ready: bool) -> dict[tuple[bool | None, str], int]:
    counts: Counter[tuple[bool | None, str]] = Counter()
    for pod in state.values():
        kind = ctype(pod)
        if not kind or pod["metadata"].get("deletionTimestamp") or (only_ready and not pod_ready(pod)):
            continue
        counts[(scenario.version(pod), kind)] += 1
    return dict(counts)


def new_share(state: Mapping[str, kube_objects.Pod], scenario: Scenario) -> float | None:
    """Seed 001 4.3's ``new_ready / (old_ready + new_ready)`` at one moment (None: nothing ready).

    A version counts its ready workers only while it has a ready worker of every role: a new
    prefill whose decode is still loading serves no request, so it is no capacity to send traffic to.
    """
    able = [state[name] for name in _could_serve(state, scenario)]
    new = sum(1 for pod in able if scenario.is_new(pod))
    old = len(able) - new
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
    follow_s: float = 2.0
    stale_metadata: list[str] = field(default_factory=list)
    final_new: bool = True
    """Which version must be alone at the end (False after a rollback)."""
    steps: list[tuple[float, str]] = field(default_factory=list)
    """The implementation's Events on the DGD (wall time, text: its weights as it set them), for the record only."""
    starve_s: float = _DEFAULTS.rollout_starve_s
    """A worker Ready this long while its version could serve, having served nothing, is starved (``rollout_starve_s``)."""
    share_tolerance: float = _DEFAULTS.rollout_share_tolerance
    """How far the new version's share may stray from the ready ratio (``rollout_share_tolerance``)."""
    warm_s: float = _DEFAULTS.rollout_warm_s
    """Traffic ran this long before the change, so starvation counts from there (``rollout_warm_s``)."""
    deleted_route_s: float = _DEFAULTS.rollout_deleted_route_s
    """Requests may still reach a worker this long after its deletion began (``rollout_deleted_route_s``)."""
    ratio_grace_s: float = _DEFAULTS.rollout_ratio_grace_s
    """A broken prefill:decode ratio shorter than this is a controller's pod-by-pod step, not a broken ratio."""

    def __post_init__(self) -> None:
        if self.scenario.new_worker is None:
            raise ValueError(f"{self.scenario.mode}: judge the scenario as it is after its change (Scenario.after)")


def verdict(ev: Evidence) -> list[str]:
    """Every rule the rollout broke, each a sentence with numbers."""
    return [
        *_failed_requests(ev),
        *_card_mismatches(ev),
        *_starved_workers(ev),
        *_layout_mismatches(ev),
        *_cross_version(ev),
        *_share(ev),
        *_availability(ev),
        *_ratio(ev),
        *_surge(ev),
        *_workers_before_frontend(ev),
        *_new_frontend_short(ev),
        *_sent_to_terminating(ev),
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
    return [
        f"{len(failed)} of {len(ev.sent)} requests failed ({dict(kinds)}; {_when(ev, failed)}; first: {str(first)[:300]})"
        + _steps_around(ev, min(s.started for s in failed), max(s.ended for s in failed))
    ]


def _when(ev: Evidence, failed: Sequence[Sent]) -> str:
    """When the failed requests were sent, relative to the spec change: a gap before it is no rollout's doing."""
    first, last = min(s.started for s in failed) - ev.changed_at, max(s.started for s in failed) - ev.changed_at
    return f"sent {first:+.2f}s..{last:+.2f}s from the change"


def _steps_around(ev: Evidence, start: float, end: float) -> str:
    """The implementation's own steps (its Events) from the one before ``start`` to ``end``: context, not judged.

    Events time their steps to the microsecond when they carry ``eventTime``, else to the second,
    hence the second of slack after ``end``.
    """
    before = [s for s in ev.steps if s[0] <= start]
    during = [s for s in ev.steps if start < s[0] <= end + 1.0]
    shown = [*before[-1:], *during][:4]
    return f"; the implementation's steps then: {[text[:400] for _, text in shown]}" if shown else ""


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
    """A worker Ready (and not terminating) for ``ev.starve_s`` of traffic that served nothing: its card was discarded.

    Only time while its version could serve counts: a serving worker of every worker component
    (seed 001 4.3.3 gives a set without one no traffic, e.g. a prefill whose decode never became
    ready before a rollback removed it).
    """
    served = _served_by(ev)
    start, end = ev.changed_at - ev.warm_s, ev.finished_at
    ready_for: dict[str, float] = defaultdict(float)
    previous: tuple[float, dict[str, kube_objects.Pod]] | None = None
    for t, state in ev.timeline.moments:
        if previous is not None:
            t0, before = previous
            span = max(0.0, min(t, end) - max(t0, start))
            for name in _could_serve(before, ev.scenario):
                ready_for[name] += span
        previous = (t, state)
    if previous is not None:
        t0, before = previous
        for name in _could_serve(before, ev.scenario):
            ready_for[name] += max(0.0, end - max(t0, start))
    starved = sorted(name for name, s in ready_for.items() if s >= ev.starve_s and served[name] == 0)
    if not starved:
        return []
    pods = ev.timeline.every_pod()
    detail = ", ".join(f"{n} ({'new' if ev.scenario.is_new(pods[n]) else 'old'}, ready {ready_for[n]:.1f}s)" for n in starved)
    return [f"workers ready while traffic ran served no request (their model card was discarded?): {detail}"]


def _could_serve(state: Mapping[str, kube_objects.Pod], scenario: Scenario) -> list[str]:
    """Serving workers whose version has a serving worker of every worker component at this moment."""
    workers = {name: pod for name, pod in state.items() if ctype(pod) in scenario.targets and serving(pod)}
    kinds: dict[bool | None, set[str]] = defaultdict(set)
    for pod in workers.values():
        kinds[scenario.version(pod)].add(str(ctype(pod)))
    return [name for name, pod in workers.items() if kinds[scenario.version(pod)] >= set(scenario.targets)]


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
    """Seed 001 3.3 and 4's "frontends and workers within each isolated namespace are always at the same version".

    No request crossed runtime protocol versions; no frontend sent to workers of both versions; a
    frontend with a version of its own (its spec changed, or a frontend-only change's new one) sent
    only to workers of that version.
    """
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


@dataclass(frozen=True)
class SplitPhase:
    """Consecutive requests for which the ready ratio (over each one's last ``follow_s``) allowed the same range."""

    lo: float
    hi: float
    start: float
    end: float
    new: int = 0
    served: int = 0

    @property
    def share(self) -> float:
        return self.new / self.served if self.served else 0.0

    def allowance(self, tolerance: float) -> float:
        """``tolerance`` plus ``SPLIT_SIGMAS`` binomial standard errors at the nearer end of the range."""
        p = self.lo if self.share < self.lo else self.hi
        return tolerance + SPLIT_SIGMAS * math.sqrt(p * (1 - p) / self.served)

    def strays(self, tolerance: float) -> bool:
        return not self.lo - self.allowance(tolerance) <= self.share <= self.hi + self.allowance(tolerance)


SPLIT_SIGMAS = 3.0
"""Standard errors of a weighted random choice allowed beyond the tolerance: a conforming proxy may pick at random."""
SPLIT_MIN_REQUESTS = 20
"""A phase is judged alone with this many requests; the shorter ones are judged together."""


def split_phases(ev: Evidence) -> list[SplitPhase]:
    """The rollout's served requests (decode or aggregated records, by arrival), grouped by the ratio range they allow."""
    pods = ev.timeline.every_pod()
    ratios = _ratio_series(ev)
    phases: list[SplitPhase] = []
    for arrival, pod in sorted((float(r.get("arrival") or 0.0), pod) for pod, r in ev.records if _judged(ev, pod, r, pods)):
        allowed = _ratio_range(ratios, arrival - ev.follow_s, arrival)
        if allowed is None:
            continue
        new = int(ev.scenario.is_new(pods[pod]))
        last = phases[-1] if phases else None
        if last is not None and (last.lo, last.hi) == allowed:
            phases[-1] = dataclasses.replace(last, end=arrival, new=last.new + new, served=last.served + 1)
        else:
            phases.append(SplitPhase(*allowed, start=arrival, end=arrival, new=new, served=1))
    return phases


def _judged(ev: Evidence, pod: str, r: Mapping[str, Any], pods: Mapping[str, kube_objects.Pod]) -> bool:
    if r.get("role") not in ("decode", "agg") or r.get("outcome") != groundtruth.OK or pod not in pods:
        return False
    return ev.changed_at <= float(r.get("arrival") or 0.0) <= ev.finished_at


def _ratio_series(ev: Evidence) -> list[tuple[float, float | None]]:
    series: list[tuple[float, float | None]] = []
    for t, state in ev.timeline.moments:
        ratio = new_share(state, ev.scenario)
        if not series or series[-1][1] != ratio:
            series.append((t, ratio))
    return series


def _ratio_range(series: Sequence[tuple[float, float | None]], start: float, end: float) -> tuple[float, float] | None:
    """Least and greatest ratio in force at any moment of [start, end], rounded to 1/1000."""
    seen = [ratio for i, (t, ratio) in enumerate(series) if t <= end and (i + 1 == len(series) or series[i + 1][0] > start)]
    known = [round(r, 3) for r in seen if r is not None]
    return (min(known), max(known)) if known else None


def _share(ev: Evidence) -> list[str]:
    """Seed 001 4.3, phase by phase: the new version's share of requests follows the ready ratio.

    Each request may be served in the share of any ratio in force during its last ``follow_s``
    (the weights follow readiness). Requests allowing the same range form a phase; a phase of at
    least ``SPLIT_MIN_REQUESTS`` strays when its share is outside the range by more than
    ``share_tolerance`` plus ``SPLIT_SIGMAS`` standard errors; the shorter phases are judged as one.
    Judged by phase, not on average: a fixed 50/50 split averages out over 0.25 and 0.75 phases,
    and so does a lagging one.
    """
    phases = split_phases(ev)
    served = sum(p.served for p in phases)
    if served < SPLIT_MIN_REQUESTS:
        return [f"only {served} requests were served during the rollout; too few to judge the traffic split"]
    judged = [p for p in phases if p.served >= SPLIT_MIN_REQUESTS]
    rest = [p for p in phases if p.served < SPLIT_MIN_REQUESTS]
    if sum(p.served for p in rest) >= SPLIT_MIN_REQUESTS:
        judged.append(_as_one(rest))
    strayed = [p for p in judged if p.strays(ev.share_tolerance)]
    if not strayed:
        return []
    detail = "; ".join(
        f"{p.start - ev.changed_at:+.1f}s..{p.end - ev.changed_at:+.1f}s: the new version served {p.share:.2f} of {p.served} "
        f"requests where the ready ratio called for {p.lo:.2f}..{p.hi:.2f} (allowance {p.allowance(ev.share_tolerance):.2f})"
        for p in strayed[:3]
    )
    head = (
        f"traffic split off the ready ratio in {len(strayed)} of {len(judged)} phases (weights may follow {ev.follow_s:g}s late; "
        f"pod changes timed by the API server's writes, received up to {ev.timeline.lag_s:.1f}s later)"
    )
    return [f"{head}: {detail}"]


def _as_one(phases: Sequence[SplitPhase]) -> SplitPhase:
    """Phases as one, its range the request-weighted mean of theirs (phases too short to judge alone)."""
    served = sum(p.served for p in phases)
    return SplitPhase(
        lo=sum(p.lo * p.served for p in phases) / served,
        hi=sum(p.hi * p.served for p in phases) / served,
        start=phases[0].start,
        end=phases[-1].end,
        new=sum(p.new for p in phases),
        served=served,
    )


def _availability(ev: Evidence) -> list[str]:
    """Seed 001 4.1.2: per worker component, ready workers never below target - maxUnavailable (the first moment)."""
    targets = ev.scenario.targets
    for t, state in ev.timeline.moments:
        if not ev.changed_at <= t <= ev.finished_at:
            continue
        ready = side_counts(state, ev.scenario, only_ready=True)
        for kind, n in targets.items():
            have = sum(count for (_, k), count in ready.items() if k == kind)
            if have < n - ev.scenario.max_unavailable:
                return [f"maxUnavailable {ev.scenario.max_unavailable} exceeded: {t - ev.changed_at:.1f}s in, {have} {kind} ready of {n}"]
    return []


def ratio_broken(counts: Mapping[str, int], targets: Mapping[str, int]) -> bool:
    """A role more than one worker ahead of the least advanced role's proportional share (seed 001: P/D ratio maintenance)."""
    least_share = min(counts[k] / n for k, n in targets.items())
    return any(counts[k] > math.floor(least_share * n + 1e-9) + 1 for k, n in targets.items())


def _ratio(ev: Evidence) -> list[str]:
    """On each side, the pods not terminating keep the prefill:decode ratio within one worker, except for under ``ratio_grace_s``.

    A controller creates or deletes one pod per API call, so a step that adds two prefill and one
    decode passes through a moment with the two prefill alone; that lasts a round trip, not a second.
    """
    targets = ev.scenario.targets
    moments = [(t, s) for t, s in ev.timeline.moments if ev.changed_at <= t <= ev.finished_at]
    for new in (True, False):
        since: tuple[float, dict[str, int]] | None = None
        for i, (t, state) in enumerate(moments):
            existing = side_counts(state, ev.scenario, only_ready=False)
            counts = {k: existing.get((new, k), 0) for k in targets}
            if not ratio_broken(counts, targets):
                since = None
                continue
            since = since or (t, counts)
            until = moments[i + 1][0] if i + 1 < len(moments) else ev.finished_at
            if until - since[0] >= ev.ratio_grace_s:
                side = "new" if new else "old"
                return [
                    f"prefill:decode ratio broken on the {side} side from {since[0] - ev.changed_at:.1f}s in for at least "
                    f"{until - since[0]:.1f}s: {since[1]} (targets {dict(targets)})"
                ]
    return []


def _surge(ev: Evidence) -> list[str]:
    """Seed 001 4.1.2: per worker component, pods not terminating never above target + maxSurge (the first moment that is)."""
    for t, state in ev.timeline.moments:
        if not ev.changed_at <= t <= ev.finished_at:
            continue
        existing = side_counts(state, ev.scenario, only_ready=False)
        for kind, n in ev.scenario.targets.items():
            have = sum(count for (_, k), count in existing.items() if k == kind)
            if have > n + ev.scenario.max_surge:
                sides = {"old" if not v else "new": c for (v, k), c in existing.items() if k == kind}
                return [
                    f"maxSurge {ev.scenario.max_surge} exceeded: {t - ev.changed_at:.1f}s in, {have} {kind} pods ({sides}) "
                    f"for a target of {n}"
                ]
    return []


def _workers_before_frontend(ev: Evidence) -> list[str]:
    """Seed 001 4.1.2 T1-T3: no worker of the new version exists before a frontend created for the rollout is Ready.

    One Ready replica of the new frontend is enough: 4.1.1, which 4.1.2 follows ("The same as Solution
    A"), says "Wait until at least one of, or all of, the new frontend replicas are ready", so an
    operator that waits for one replica of three is as conformant as one that waits for all three.

    A frontend created after the change is the new dynamo namespace's (the suite cannot read the
    namespace from the implementation's labels; when the frontend's own spec changes, its version
    says the same).
    """
    before = {name for name, pod in ev.timeline.at(ev.changed_at).items() if ctype(pod) == "frontend"}
    for t, state in ev.timeline.moments:
        if t < ev.changed_at:
            continue
        new_frontend_ready = any(ctype(p) == "frontend" and n not in before and serving(p) for n, p in state.items())
        if new_frontend_ready:
            return []
        early = sorted(n for n, p in state.items() if ctype(p) in ev.scenario.targets and ev.scenario.is_new(p))
        if early:
            return [f"new workers {early[:3]} were created {t - ev.changed_at:.1f}s in, before any new frontend was Ready"]
    return []


def _new_frontend_short(ev: Evidence) -> list[str]:
    """Seed 001 4.1 T1: the new frontend is created "matching the replica count of the old frontend resource".

    Judged when the first worker of the new version appears (T3, after T2's "new frontend ready"):
    by then every replica of the new frontend must exist (created, Ready or not), as many as the
    old frontend had just before the change. A new frontend started small and grown later leaves
    the new namespace with fewer frontends than the old one while traffic moves to it.
    """
    before = {n for n, p in ev.timeline.at(ev.changed_at).items() if ctype(p) == "frontend" and not _deleting(p)}
    for t, state in ev.timeline.moments:
        if t < ev.changed_at or not any(ctype(p) in ev.scenario.targets and ev.scenario.is_new(p) for p in state.values()):
            continue
        new = sorted(n for n, p in state.items() if ctype(p) == "frontend" and n not in before and not _deleting(p))
        if len(new) < len(before):
            return [
                f"T1: the new frontend had {len(new)} replica(s) {new} when the first new worker was created "
                f"{t - ev.changed_at:.1f}s in; the old frontend had {len(before)}"
            ]
        return []
    return []


def _deleting(pod: kube_objects.Pod) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _sent_to_terminating(ev: Evidence) -> list[str]:
    """Seed 001 4.1.2 T4: a worker being scaled down gets no new request once ``deleted_route_s`` has passed since its deletion.

    Its streams in flight may finish (a request routed just before the deletion reaches a decode
    worker after its prefill), and frontends learn of the deletion through discovery, so only
    arrivals later than ``deleted_route_s`` after the deletion count, until a new pod takes the
    name (a rollback re-creates the old revision's pods under their old names).
    """
    late = [
        (arrival - since, name)
        for name, r in ev.records
        for arrival in [float(r.get("arrival") or 0.0)]
        for since, until in _deletions(ev).get(name, [])
        if since + ev.deleted_route_s < arrival < until
    ]
    if not late:
        return []
    worst, latest = max(late)
    return [
        f"{len(late)} requests reached workers being deleted, more than {ev.deleted_route_s:g}s after their deletion "
        f"(latest: {latest}, {worst:.1f}s after)"
    ]


def _deletions(ev: Evidence) -> dict[str, list[tuple[float, float]]]:
    """Per worker pod name, when it was being deleted: from the first moment with its deletionTimestamp to a new pod of that name."""
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    since: dict[str, float] = {}
    for t, state in ev.timeline.moments:
        for name, pod in state.items():
            if ctype(pod) not in ev.scenario.targets:
                continue
            if pod["metadata"].get("deletionTimestamp"):
                since.setdefault(name, t)
            elif name in since:
                out[name].append((since.pop(name), t))
    for name, t in since.items():
        out[name].append((t, math.inf))
    return out


def _leftovers(ev: Evidence) -> list[str]:
    final = ev.timeline.moments[-1][1] if ev.timeline.moments else {}
    going = {n for n, p in final.items() if p["metadata"].get("deletionTimestamp")}  # NB: terminating, draining its streams
    stale = sorted(n for n, p in final.items() if ev.scenario.version(p) not in (None, ev.final_new) and n not in going)
    out = [f"pods of the abandoned version still there at the end: {stale}"] if stale else []
    frontends = sorted(n for n, p in final.items() if ctype(p) == "frontend" and not p["metadata"].get("deletionTimestamp"))
    if len(frontends) != ev.scenario.frontends:
        out.append(f"the DGD asks for {ev.scenario.frontends} frontend(s); at the end there are {frontends}")
    if ev.stale_metadata:
        out.append(f"WorkerMetadata of pods that are gone still published at the end: {ev.stale_metadata}")
    return out


def summary(ev: Evidence) -> str:
    """Requests sent and failed, duration, the new version's share of requests per second, the implementation's steps."""
    failed = sum(1 for s in ev.sent if not s.ok)
    head = (
        f"{len(ev.sent)} requests sent, {failed} failed, rollout {ev.finished_at - ev.changed_at:.1f}s, "
        f"{len(ev.records)} ground-truth records from {len({p for p, _ in ev.records})} engine pods, "
        f"pod changes received up to {ev.timeline.lag_s:.1f}s after the API server wrote them"
    )
    return "\n".join([head, f"observed share of the new version by second: {observed_shares(ev)}", *(text for _, text in ev.steps)])


def observed_shares(ev: Evidence) -> list[str]:
    """Per second since the change: requests served by the new version / requests served (decode or aggregated records)."""
    pods = ev.timeline.every_pod()
    bins: dict[int, list[bool]] = defaultdict(list)
    for pod, r in ev.records:
        if r.get("role") in ("decode", "agg") and r.get("outcome") == groundtruth.OK and pod in pods:
            bins[int(float(r.get("arrival") or 0.0) - ev.changed_at)].append(ev.scenario.is_new(pods[pod]))
    return [f"{t}s:{sum(v)}/{len(v)}" for t, v in sorted(bins.items()) if -2 <= t <= ev.finished_at - ev.changed_at + 1]


def pods_changed(before: Mapping[str, bool], after: Mapping[str, bool]) -> tuple[list[str], list[str]]:
    """(created, deleted) between two ``serving_pods`` views; a pod terminating before that is gone after is no change."""
    created = sorted(set(after) - set(before))
    deleted = sorted(n for n, terminating in after.items() if terminating and not before.get(n, False))
    deleted += sorted(n for n in set(before) - set(after) if not before[n])
    return created, deleted


def counts_must_hold(before: Mapping[str, bool], after: Mapping[str, bool], held_s: float, mode: str = PAUSE, why: str = "paused") -> None:
    """Nothing created or deleted between two ``serving_pods`` views ``held_s`` apart (``why``: what should have held them)."""
    created, deleted = pods_changed(before, after)
    if created or deleted:
        raise AssertionError(
            f"{mode}: {why}, yet within {held_s:.1f}s {created or 'nothing'} was created and {deleted or 'nothing'} deleted"
        )
