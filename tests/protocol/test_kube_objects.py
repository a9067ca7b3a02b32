"""The boundary's accessors: each optional field of an object read from the API server, with its default named once."""

from __future__ import annotations

from typing import Any

from servecert.protocol import kube_objects as ko

ISVC: dict[str, Any] = {
    "metadata": {"name": "svc", "generation": 3, "labels": {"a": "1"}, "annotations": {"b": "2"}},
    "spec": {"roles": [{"name": "w", "multinode": {"nodeCount": 4}}, {"name": "r"}], "schedulingStrategy": {"schedulerName": "volcano"}},
    "status": {"observedGeneration": 2, "components": {"w": {"readyReplicas": 1}}},
}
BARE = {"metadata": {"name": "new"}}


def test_set_fields_are_read_as_written() -> None:
    assert (ko.labels_of(ISVC), ko.annotations_of(ISVC), ko.generation_of(ISVC)) == ({"a": "1"}, {"b": "2"}, 3)
    assert ko.status_of(ISVC)["observedGeneration"] == 2 and ko.components(ISVC) == {"w": {"readyReplicas": 1}}
    assert ko.scheduling_strategy(ISVC) == {"schedulerName": "volcano"}
    assert [ko.node_count(r) for r in ko.spec_of(ISVC)["roles"]] == [4, 1]  # NB: a role without multinode is one node


def test_missing_null_or_absent_objects_read_as_empty() -> None:
    for obj in (BARE, None, {"metadata": {"name": "x", "labels": None}, "status": None, "spec": None}):
        assert (ko.labels_of(obj), ko.annotations_of(obj), ko.generation_of(obj)) == ({}, {}, 0)
        assert (ko.status_of(obj), ko.spec_of(obj), ko.components(obj)) == ({}, {}, {})
    assert ko.scheduling_strategy(BARE) == {} and ko.node_count({"name": "r", "multinode": None}) == 1


def test_the_accessors_hand_out_copies_the_caller_may_change() -> None:
    ko.labels_of(ISVC)["a"] = "changed"
    assert ISVC["metadata"]["labels"] == {"a": "1"}
