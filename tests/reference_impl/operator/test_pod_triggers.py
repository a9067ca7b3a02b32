"""Pod events that reconcile their DGD at once: readiness flips, termination begins, the pod goes — nothing else."""

from __future__ import annotations

from typing import Any

from servecert.protocol import kube_names as kn
from servecert.reference_impl.operator.pod_triggers import PodTriggers, dgd_owner


def pod(ready: bool, terminating: bool = False, uid: str = "u-1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "llm-decode-0", "uid": uid, "ownerReferences": [{"kind": kn.DGD_KIND, "name": "llm", "uid": "dgd-1"}]}
    if terminating:
        meta["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_pods_life_triggers_on_ready_terminating_and_gone_only() -> None:
    triggers = PodTriggers()
    life = [
        (pod(False), "ADDED", False),  # NB: the operator just created it: nothing new to weigh
        (pod(False), "MODIFIED", False),  # e.g. its IP arrived
        (pod(True), "MODIFIED", True),  # Ready: weights follow
        (pod(True), "MODIFIED", False),  # any other update
        (pod(True, terminating=True), "MODIFIED", True),
        (pod(False, terminating=True), "MODIFIED", True),  # no longer Ready while it drains
        (pod(False, terminating=True), "DELETED", True),
    ]
    assert [triggers.seen(p, kind) for p, kind, _ in life] == [want for _, _, want in life]


def test_a_pod_first_seen_ready_triggers_as_after_an_operator_restart() -> None:
    triggers = PodTriggers()
    assert triggers.seen(pod(True, uid="a"), None) is True
    assert triggers.seen(pod(True, uid="a"), "MODIFIED") is False
    assert triggers.seen(pod(True, uid="b"), "MODIFIED") is True


def test_the_owner_is_the_dgd_reference() -> None:
    assert dgd_owner(pod(True)) == ("llm", "dgd-1")
    other = {"metadata": {"ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "x"}]}}
    assert dgd_owner(other) is None
    assert dgd_owner({"metadata": {}}) is None
