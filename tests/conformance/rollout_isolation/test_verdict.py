"""Each ROLLOUT-ISOLATION rule fails on evidence that breaks it, and only that rule.

The evidence is synthetic: a timeline of pod states (what the suite's pod watch records), the
engines' ground-truth records and the client's outcomes, for a clean block-size rollout of the
suite's DGD (old 2P+2D until t=5, new 2P+2D from t=5). ``clean()`` passes every rule; each test
breaks one thing the way a broken operator would and checks the verdict names it. The live
counterpart — the in-place operator failed on all three seed modes — is
tests/certify/test_rollout_isolation.py.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict
from servecert.conformance.tests.rollout_isolation._traffic import Sent
from servecert.harness.traffic import Outcome

SWITCH = 5.0
END = 10.0


def pod(name: str, kind: str, new: bool, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    if kind == "frontend":
        container = {"image": "servecert/frontend:1.6.1", "args": []}
    else:
        container = {"image": "servecert/fake-engine:1.6.1", "args": ["--block-size", "32" if new else "16", "--role", kind]}
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"containers": [container]},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def side(new: bool) -> dict[str, dict[str, Any]]:
    tag = "new" if new else "old"
    pods = {f"fe-{tag}": pod(f"fe-{tag}", "frontend", new)}
    for kind in ("prefill", "decode"):
        for i in range(2):
            pods[f"{kind}-{tag}-{i}"] = pod(f"{kind}-{tag}-{i}", kind, new)
    return pods


def record(engine_pod: str, frontend: str, arrival: float, role: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    body = {
        "role": role,
        "frontend": frontend,
        "outcome": "ok" if role == "decode" else "prefilled",
        "mdc_checksum": "card-new" if "new" in engine_pod else "card-old",
        "engine_mdc_checksum": "card-new" if "new" in engine_pod else "card-old",
        "protocol_version": "1",
        "engine_protocol_version": "1",
        "arrival": arrival,
        "transfer": None,
    }
    return engine_pod, {**body, **extra}


def clean() -> verdict.Evidence:
    moments = [(0.0, side(False)), (SWITCH, side(True))]
    records = []
    for i in range(20):
        for new, t in ((False, 0.2 + i * 0.24), (True, SWITCH + 0.2 + i * 0.24)):
            tag = "new" if new else "old"
            records.append(record(f"decode-{tag}-{i % 2}", f"fe-{tag}", t, "decode"))
            records.append(record(f"prefill-{tag}-{i % 2}", f"fe-{tag}", t, "prefill"))
    sent = [Sent(0.0, 1.0, Outcome("p", 200, tokens=4, done=True)) for _ in range(40)]
    return verdict.Evidence(scenarios.BLOCK_SIZE, sent, records, verdict.Timeline(moments), 0.0, END)


def must_name(evidence: verdict.Evidence, *fragments: str) -> None:
    problems = verdict.verdict(evidence)
    assert problems, "the verdict found nothing"
    for fragment in fragments:
        assert any(fragment in p for p in problems), (fragment, problems)
    with pytest.raises(AssertionError, match=rf"^{re.escape(evidence.scenario.mode)}: "):
        verdict.rollout_must_be_clean(evidence)


def test_a_clean_rollout_breaks_no_rule() -> None:
    assert verdict.verdict(clean()) == []


def test_a_failed_request_is_named_with_its_error() -> None:
    ev = clean()
    ev.sent.append(Sent(1.0, 2.0, Outcome("p", 200, tokens=2, done=True, error={"code": "upstream_cut", "message": "cut"})))
    must_name(ev, "1 of 41 requests failed", "upstream_cut")


def test_failed_requests_are_placed_in_time_from_the_change() -> None:
    ev = clean()
    ev.changed_at = 3.0
    for started in (1.25, 1.5, 4.0):
        ev.sent.append(Sent(started, started + 0.01, Outcome("p", 503, error={"code": "http_503", "message": "no server"})))
    must_name(ev, "3 of 43 requests failed ({'http_503': 3}; sent -1.75s..+1.00s from the change")


def test_failed_requests_quote_the_implementations_steps_around_them() -> None:
    ev = clean()
    ev.steps = [(t, f"step at {t:g}") for t in (0.0, 2.0, 4.0, 8.0)]
    ev.sent.append(Sent(2.5, 3.0, Outcome("p", 503, error={"code": "http_503", "message": "no server"})))
    must_name(ev, "the implementation's steps then: ['step at 2', 'step at 4']")


def test_a_stream_that_just_stops_counts_as_failed() -> None:
    ev = clean()
    ev.sent.append(Sent(1.0, 2.0, Outcome("p", 200, tokens=2, done=False)))
    must_name(ev, "requests failed ({'cut': 1}")


def test_a_request_preprocessed_with_another_card_is_named() -> None:
    ev = clean()
    name, body = ev.records[-2]
    ev.records[-2] = (name, {**body, "mdc_checksum": "card-old"})
    must_name(ev, "preprocessed with another model card")


def test_a_ready_worker_that_served_nothing_is_starved() -> None:
    ev = clean()
    ev.records = [(p, r) for p, r in ev.records if p != "decode-new-1"]
    must_name(ev, "served no request", "decode-new-1 (new")


def test_a_ready_worker_whose_version_cannot_serve_is_not_starved() -> None:
    """A rollback: a new prefill Ready whose decode never was gets no traffic (its set's weight is 0)."""
    old_only = side(False)
    with_prefill = {**old_only, "fe-new": pod("fe-new", "frontend", True), "prefill-new-0": pod("prefill-new-0", "prefill", True)}
    ev = clean()
    ev.timeline = verdict.Timeline([(0.0, with_prefill)])
    ev.records = [(p, r) for p, r in ev.records if "new" not in p]
    assert not any("served no request" in p for p in verdict.verdict(ev))
    with_decode = {**with_prefill, "decode-new-0": pod("decode-new-0", "decode", True)}
    ev.timeline = verdict.Timeline([(0.0, with_decode)])
    must_name(ev, "served no request", "prefill-new-0 (new", "decode-new-0 (new")


def test_a_kv_transfer_across_layouts_is_named() -> None:
    ev = clean()
    name, body = ev.records[-2]
    transfer = {"source_layout": {"tensor_parallel_size": 2}, "dest_layout": {"tensor_parallel_size": 1}}
    ev.records[-2] = (name, {**body, "transfer": transfer})
    must_name(ev, "KV transfers between different layouts")


def test_a_protocol_mismatch_is_named() -> None:
    ev = clean()
    name, body = ev.records[0]
    ev.records[0] = (name, {**body, "protocol_version": "2", "outcome": "runtime_protocol_mismatch"})
    must_name(ev, "crossed runtime protocol versions")


def test_a_frontend_using_workers_of_both_versions_is_named() -> None:
    ev = clean()
    name, body = ev.records[-2]
    ev.records[-2] = (name, {**body, "frontend": "fe-old"})
    must_name(ev, "frontend fe-old sent requests to workers of versions ['new', 'old']")


def frontend_image(state: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``state`` as RolloutFrontendImage sees it: the new frontend runs 1.7.0 (its workers' spec is the old one's)."""
    if "fe-new" in state:
        state["fe-new"]["spec"]["containers"][0]["image"] = "servecert/frontend:1.7.0"
    return state


def test_a_frontend_only_change_is_judged_by_the_workers_it_created() -> None:
    """Seed 001 4.1: the new frontend and the workers move to namespace B together; a new frontend serving through the
    workers of before the change (beside them in their namespace) is named, and so are those workers left at the end."""
    existing = frozenset(p["metadata"]["uid"] for p in side(False).values())
    with pytest.raises(ValueError, match=r"Scenario\.after"):
        verdict.Evidence(scenarios.FRONTEND_IMAGE, [], [], verdict.Timeline([]), 0.0, END)
    ev = clean()
    ev.scenario = scenarios.FRONTEND_IMAGE.after(existing)
    ev.timeline = verdict.Timeline([(t, frontend_image(state)) for t, state in ev.timeline.moments])
    assert verdict.verdict(ev) == []
    kept = frontend_image({**side(False), "fe-new": pod("fe-new", "frontend", True)})
    del kept["fe-old"]
    ev.timeline = verdict.Timeline([(0.0, side(False)), (SWITCH, kept)])
    ev.records = [(p.replace("new", "old"), r) for p, r in ev.records]
    must_name(
        ev,
        "frontend fe-new (itself new) sent requests to workers of versions ['old']",
        "pods of the abandoned version still there at the end",
    )


def test_traffic_that_ignores_the_ready_ratio_is_named() -> None:
    ev = clean()
    ev.records = [(p.replace("new", "old"), {**r, "frontend": "fe-old"}) for p, r in ev.records]
    must_name(ev, "traffic split off the ready ratio", "the new version served 0.00")


def test_a_dip_below_target_minus_max_unavailable_is_named() -> None:
    ev = clean()
    dip = copy.deepcopy(side(False))
    del dip["decode-old-1"]
    ev.timeline.moments.insert(1, (SWITCH - 1, dip))
    must_name(ev, "maxUnavailable 0 exceeded", "1 decode ready of 2")


def test_a_side_running_ahead_on_one_role_breaks_the_ratio() -> None:
    ev = clean()
    lopsided = {**side(False), **{n: p for n, p in side(True).items() if n.startswith("prefill")}}
    ev.timeline.moments.insert(1, (SWITCH - 1, lopsided))
    must_name(ev, "prefill:decode ratio broken on the new side from 4.0s in for at least 1.0s: {'prefill': 2, 'decode': 0}")


def test_a_ratio_off_for_a_round_trip_is_a_step_not_a_broken_ratio() -> None:
    ev = clean()
    lopsided = {**side(False), **{n: p for n, p in side(True).items() if n.startswith("prefill")}}
    ev.timeline.moments.insert(1, (SWITCH - 0.2, lopsided))
    assert not any("ratio broken" in p for p in verdict.verdict(ev))


def test_more_pods_than_target_plus_max_surge_is_named() -> None:
    ev = clean()
    surged = {**side(False), "fe-new": pod("fe-new", "frontend", True)}
    surged |= {f"prefill-new-{i}": pod(f"prefill-new-{i}", "prefill", True, ready=False) for i in range(2)}
    ev.timeline.moments.insert(1, (SWITCH - 1, surged))
    must_name(ev, "maxSurge 1 exceeded: 4.0s in, 4 prefill pods ({'old': 2, 'new': 2}) for a target of 2")


def test_a_new_worker_before_any_new_frontend_is_ready_is_named() -> None:
    ev = clean()
    early = {**side(False), "prefill-new-0": pod("prefill-new-0", "prefill", True, ready=False)}
    ev.timeline.moments.insert(1, (SWITCH - 1, early))
    must_name(ev, "new workers ['prefill-new-0'] were created 4.0s in, before any new frontend was Ready")
    early["fe-new"] = pod("fe-new", "frontend", True, ready=False)
    must_name(ev, "before any new frontend was Ready")
    early["fe-new"] = pod("fe-new", "frontend", True)
    assert not any("before any new frontend" in p for p in verdict.verdict(ev))


def test_a_new_frontend_with_fewer_replicas_than_the_old_when_new_workers_come_is_named() -> None:
    ev = clean()
    three_old = {**side(False), **{f"fe-old-{i}": pod(f"fe-old-{i}", "frontend", False) for i in (1, 2)}}
    ev.timeline.moments[0] = (0.0, three_old)
    ev.timeline.moments.insert(1, (SWITCH - 1, {**three_old, "fe-new": pod("fe-new", "frontend", True)}))
    must_name(ev, "T1: the new frontend had 1 replica(s) ['fe-new'] when the first new worker was created 5.0s in; the old frontend had 3")
    grown = {**side(True), **{f"fe-new-{i}": pod(f"fe-new-{i}", "frontend", True, ready=False) for i in (1, 2)}}
    ev.timeline.moments[2] = (SWITCH, grown)  # NB: created, not yet Ready: T1 asks for the replicas, T2 for one Ready
    assert not any("T1:" in p for p in verdict.verdict(ev))


def test_requests_reaching_a_worker_long_after_its_deletion_are_named() -> None:
    ev = clean()
    ev.deleted_route_s = 2.0
    going = {**side(False), "decode-old-0": pod("decode-old-0", "decode", False, deleting=True)}
    ev.timeline.moments.insert(1, (1.0, going))
    must_name(ev, "requests reached workers being deleted, more than 2s after their deletion (latest: decode-old-0, 3.5s after)")
    ev.timeline.moments[1] = (2.9, going)
    assert not any("being deleted" in p for p in verdict.verdict(ev))


def test_a_pod_recreated_under_a_deleted_pods_name_is_a_new_pod() -> None:
    ev = clean()
    ev.deleted_route_s = 2.0
    going = {**side(False), "decode-old-0": pod("decode-old-0", "decode", False, deleting=True)}
    ev.timeline.moments[1:1] = [(0.5, going), (1.0, side(False))]  # NB: as a rollback re-creates the old revision's pods
    assert not any("being deleted" in p for p in verdict.verdict(ev))


def test_old_pods_left_at_the_end_are_named_but_terminating_ones_are_not() -> None:
    ev = clean()
    final = {**side(True), "decode-old-0": pod("decode-old-0", "decode", False)}
    ev.timeline.moments.append((END, final))
    must_name(ev, "pods of the abandoned version still there at the end: ['decode-old-0']")
    final["decode-old-0"] = pod("decode-old-0", "decode", False, deleting=True)
    assert not any("abandoned" in p for p in verdict.verdict(ev))


def test_an_old_frontend_left_at_the_end_is_named() -> None:
    ev = clean()
    ev.timeline.moments.append((END, {**side(True), "fe-old": pod("fe-old", "frontend", False)}))
    must_name(ev, "the DGD asks for 1 frontend")


def test_worker_metadata_of_gone_pods_is_named() -> None:
    ev = clean()
    ev.stale_metadata = ["decode-old-0"]
    must_name(ev, "WorkerMetadata of pods that are gone")


def test_pause_counts_must_hold() -> None:
    before = {"a": False, "b": False, "c": True}
    assert verdict.pods_changed(before, {"a": False, "b": False}) == ([], [])
    assert verdict.pods_changed(before, {"a": False, "b": True, "d": False}) == (["d"], ["b"])
    with pytest.raises(AssertionError, match="pause and resume: paused, yet"):
        verdict.counts_must_hold(before, {"a": False}, 5.0)
