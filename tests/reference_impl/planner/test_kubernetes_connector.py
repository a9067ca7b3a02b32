"""The Kubernetes connector against a fake CustomObjectsApi: what it reads, what it patches, when it refuses."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from servecert.reference_impl.planner.connectors import kubernetes as connector_mod
from servecert.reference_impl.planner.connectors.kubernetes import DeploymentShapeError, KubernetesConnector
from servecert.reference_impl.planner.connectors.protocol import AWAITING_ACK, ISSUED, UNCHANGED


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
    """Legacy names and no types: the fallback of seed 003's resolution."""
    components = [{"name": "frontend", "replicas": 1}, {"name": "prefill", "replicas": prefill}, {"name": "decode", "replicas": decode}]
    status = {"observedGeneration": observed, "components": {"prefill": {"readyReplicas": ready[0]}, "decode": {"readyReplicas": ready[1]}}}
    return {"metadata": {"generation": 1}, "spec": {"components": components}, "status": status}


def connector(mode: str = "disagg") -> KubernetesConnector:
    made = KubernetesConnector(None, "ns", "d", mode)
    asyncio.run(made.validate())
    return made


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeCustom:
    found = FakeCustom(dgd(1, 1, (1, 1)))
    monkeypatch.setattr(connector_mod.client, "CustomObjectsApi", lambda api: found)
    return found


def test_same_counts_are_unchanged_and_patch_nothing(fake: FakeCustom) -> None:
    assert asyncio.run(connector().scale_to(1, 1)) == UNCHANGED
    assert fake.patches == []


def test_new_counts_patch_both_components_guarded_by_their_names(fake: FakeCustom) -> None:
    assert asyncio.run(connector().scale_to(2, 3)) == ISSUED
    assert fake.patches == [
        [
            {"op": "test", "path": "/spec/components/1/name", "value": "prefill"},
            {"op": "replace", "path": "/spec/components/1/replicas", "value": 2},
            {"op": "test", "path": "/spec/components/2/name", "value": "decode"},
            {"op": "replace", "path": "/spec/components/2/replicas", "value": 3},
        ]
    ]


def test_a_decision_waits_while_the_operator_has_not_caught_up(fake: FakeCustom) -> None:
    made = connector()
    assert asyncio.run(made.scale_to(2, 3)) == ISSUED
    assert asyncio.run(made.in_progress())  # generation 2, observed 1
    assert asyncio.run(made.scale_to(1, 1)) == AWAITING_ACK
    fake.dgd["status"] = {"observedGeneration": 2, "components": {"prefill": {"readyReplicas": 2}, "decode": {"readyReplicas": 2}}}
    assert asyncio.run(made.in_progress()), "one decode replica is still not ready"
    fake.dgd["status"]["components"]["decode"]["readyReplicas"] = 3
    assert not asyncio.run(made.in_progress())
    assert asyncio.run(made.scale_to(1, 1)) == ISSUED


def test_a_dgd_without_the_components_is_a_clear_error_at_start_up(fake: FakeCustom) -> None:
    del fake.dgd["spec"]["components"][1]  # no prefill component
    with pytest.raises(DeploymentShapeError, match=r"no component\(s\) of type 'prefill' \(or, lacking one, named 'prefill'\)"):
        connector()


def test_components_are_found_by_type_before_their_names(fake: FakeCustom) -> None:
    # NB: seed 003: "Resolves services by subComponentType field (prefill/decode), with fallback to legacy component names".
    # The component named "prefill" is a decoy of type worker: a planner going by names would scale it.
    fake.dgd["spec"]["components"] = [
        {"name": "frontend", "type": "frontend"},
        {"name": "prefill", "type": "worker", "replicas": 1},
        {"name": "ctx", "type": "prefill", "replicas": 1},
        {"name": "gen", "type": "decode", "replicas": 1},
    ]
    made = connector()
    assert made.components == {"prefill": "ctx", "decode": "gen"}
    fake.dgd["status"] = {"observedGeneration": 1, "components": {"ctx": {"readyReplicas": 1}, "gen": {"readyReplicas": 1}}}
    assert asyncio.run(made.scale_to(2, 3)) == ISSUED
    assert [op["path"] for op in fake.patches[0] if op["op"] == "replace"] == ["/spec/components/2/replicas", "/spec/components/3/replicas"]


def test_aggregated_mode_scales_the_worker_set_as_decode(fake: FakeCustom) -> None:
    fake.dgd["spec"]["components"] = [{"name": "frontend", "type": "frontend"}, {"name": "agg", "type": "worker", "replicas": 1}]
    fake.dgd["status"] = {"observedGeneration": 1, "components": {"agg": {"readyReplicas": 1}}}
    made = connector("agg")
    assert asyncio.run(made.scale_to(0, 2)) == ISSUED
    assert fake.patches[0][-1] == {"op": "replace", "path": "/spec/components/1/replicas", "value": 2}


@pytest.mark.parametrize(
    ("components", "message"),
    [
        ([{"name": "a", "type": "prefill"}, {"name": "b", "type": "prefill"}, {"name": "c", "type": "decode"}], "several component"),
        (
            [{"name": "p", "type": "prefill", "args": ["--model", "m1"]}, {"name": "d", "type": "decode", "args": ["--model=m2"]}],
            "serve different models",
        ),
    ],
)
def test_an_ambiguous_or_mixed_model_graph_is_refused_at_start_up(fake: FakeCustom, components: list[dict[str, Any]], message: str) -> None:
    fake.dgd["spec"]["components"] = components
    with pytest.raises(DeploymentShapeError, match=message):
        connector()


def test_what_the_dgd_asks_for_is_read_from_its_replicas(fake: FakeCustom) -> None:
    # NB: a planner pod starts beside workers still loading; it plans from these counts, not from the few registered yet.
    made = connector()
    assert asyncio.run(made.asked()) == (1, 1)
    assert asyncio.run(made.scale_to(2, 3)) == ISSUED
    assert asyncio.run(made.asked()) == (2, 3)
