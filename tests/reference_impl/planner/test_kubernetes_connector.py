"""The Kubernetes connector against a fake CustomObjectsApi: what it reads, what it patches, when it refuses."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from reference_impl.planner.connectors import kubernetes as connector_mod
from reference_impl.planner.connectors.kubernetes import KubernetesConnector
from reference_impl.planner.connectors.protocol import AWAITING_ACK, ISSUED, UNCHANGED


class FakeCustom:
    def __init__(self, dgd: dict[str, Any]) -> None:
        self.dgd = dgd
        self.patches: list[list[dict[str, Any]]] = []

    def get_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(self.dgd)

    def patch_namespaced_custom_object(self, *args: Any, **kwargs: Any) -> None:
        assert kwargs["_content_type"] == "application/json-patch+json"
        ops = args[5]
        self.patches.append(ops)
        for op in ops:
            if op["op"] == "replace":
                index = int(op["path"].split("/")[3])
                self.dgd["spec"]["components"][index]["replicas"] = op["value"]
        self.dgd["metadata"]["generation"] += 1


def dgd(prefill: int, decode: int, ready: tuple[int, int], observed: int = 1) -> dict[str, Any]:
    components = [{"name": "frontend", "replicas": 1}, {"name": "prefill", "replicas": prefill}, {"name": "decode", "replicas": decode}]
    status = {"observedGeneration": observed, "components": {"prefill": {"readyReplicas": ready[0]}, "decode": {"readyReplicas": ready[1]}}}
    return {"metadata": {"generation": 1}, "spec": {"components": components}, "status": status}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCustom:
    found = FakeCustom(dgd(1, 1, (1, 1)))
    monkeypatch.setattr(connector_mod.client, "CustomObjectsApi", lambda api: found)
    return found


def test_same_counts_are_unchanged_and_patch_nothing(fake: FakeCustom) -> None:
    assert asyncio.run(KubernetesConnector(None, "ns", "d").scale_to(1, 1)) == UNCHANGED
    assert fake.patches == []


def test_new_counts_patch_both_components_guarded_by_their_names(fake: FakeCustom) -> None:
    assert asyncio.run(KubernetesConnector(None, "ns", "d").scale_to(2, 3)) == ISSUED
    assert fake.patches == [
        [
            {"op": "test", "path": "/spec/components/1/name", "value": "prefill"},
            {"op": "replace", "path": "/spec/components/1/replicas", "value": 2},
            {"op": "test", "path": "/spec/components/2/name", "value": "decode"},
            {"op": "replace", "path": "/spec/components/2/replicas", "value": 3},
        ]
    ]


def test_a_decision_waits_while_the_operator_has_not_caught_up(fake: FakeCustom) -> None:
    connector = KubernetesConnector(None, "ns", "d")
    assert asyncio.run(connector.scale_to(2, 3)) == ISSUED
    assert asyncio.run(connector.in_progress())  # generation 2, observed 1
    assert asyncio.run(connector.scale_to(1, 1)) == AWAITING_ACK
    fake.dgd["status"] = {"observedGeneration": 2, "components": {"prefill": {"readyReplicas": 2}, "decode": {"readyReplicas": 2}}}
    assert asyncio.run(connector.in_progress()), "one decode replica is still not ready"
    fake.dgd["status"]["components"]["decode"]["readyReplicas"] = 3
    assert not asyncio.run(connector.in_progress())
    assert asyncio.run(connector.scale_to(1, 1)) == ISSUED


def test_a_dgd_without_the_components_is_a_clear_error(fake: FakeCustom) -> None:
    del fake.dgd["spec"]["components"][1]  # no prefill component
    with pytest.raises(LookupError, match=r"DGD ns/d has no component\(s\) \['prefill'\]"):
        asyncio.run(KubernetesConnector(None, "ns", "d").scale_to(0, 0))
