"""The resources cluster-environment checks apply: DGDs on the fakes, and seed 004's InferenceService stories.

DGDs use the suite's images (``servecert/frontend``, ``servecert/fake-engine``) so every pod is
a real process whose view (its projected files) the suite can read. The InferenceService
stories are seed 004's YAML (``servecert/harness/seed_examples``) with every GPU limit lowered to 1 so
the stories fit beside each other on the test cluster; names, roles, replicas and node counts
are the seed's.
"""

from __future__ import annotations

import copy
from typing import Any

from servecert.harness import seed_examples
from servecert.protocol import kube_objects

MODEL = "servecert-model"
CLUSTER_TOPOLOGY = "servecert"  # the ClusterTopology the embedded cluster creates from its nodes
STORIES = ("story1", "story2", "story3", "story4")


EXTRA_COMPONENTS: dict[str, dict[str, Any]] = {
    # NB: an aggregated engine, and a planner whose image no runner knows (kwok plays it): what a DGD of those types runs
    "worker": {
        "name": "worker",
        "type": "worker",
        "replicas": 1,
        "image": "servecert/fake-engine",
        "args": ["--model", MODEL, "--time-scale", "0", "--role", "agg"],
    },
    "planner": {"name": "planner", "type": "planner", "replicas": 1, "image": "example.invalid/planner", "args": []},
}
"""Components ``dgd(on=...)`` adds beside frontend, prefill and decode, so a case can put topology on them."""


def dgd(
    name: str,
    *,
    level: str | None = "rack",
    policy: str | None = "fail",
    on: str = "frontend",
    prefill: int = 1,
    decode: int = 2,
    cluster_topology: str = CLUSTER_TOPOLOGY,
) -> dict[str, Any]:
    """A disaggregated DGD; ``level=None`` leaves kvCacheTransferTopology out (backward compatibility).

    ``policy=None`` leaves its mismatchPolicy out (the seed's default, fail). ``on``: the component that carries it;
    ``worker`` or ``planner`` adds a component of that type to carry it.
    """
    engine = ["--model", MODEL, "--time-scale", "0"]
    components: list[dict[str, Any]] = [
        {"name": "frontend", "type": "frontend", "replicas": 1, "image": "servecert/frontend", "args": []},
        {
            "name": "prefill",
            "type": "prefill",
            "replicas": prefill,
            "image": "servecert/fake-engine",
            "args": [*engine, "--role", "prefill"],
        },
        {"name": "decode", "type": "decode", "replicas": decode, "image": "servecert/fake-engine", "args": [*engine, "--role", "decode"]},
    ]
    if on in EXTRA_COMPONENTS:
        components.append(copy.deepcopy(EXTRA_COMPONENTS[on]))
    if level is not None:
        target = next(c for c in components if c["name"] == on)
        target["kvCacheTransferTopology"] = {"level": level} if policy is None else {"level": level, "mismatchPolicy": policy}
    spec: dict[str, Any] = {"components": components}
    if level is not None:
        spec["topologyConstraint"] = {"clusterTopologyName": cluster_topology}
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": name}, "spec": spec}


def story(name: str) -> dict[str, Any]:
    """Seed 004's story ``name`` with GPU limits lowered to 1 (see the module docstring)."""
    body = copy.deepcopy(seed_examples.load(f"inferenceservice-{name}"))
    for role in body["spec"]["roles"]:
        for container in ((role.get("template") or {}).get("spec") or {}).get("containers") or []:
            limits = (container.get("resources") or {}).get("limits") or {}
            if "nvidia.com/gpu" in limits:
                limits["nvidia.com/gpu"] = "1"
    return body


def roles(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body["spec"]["roles"])


def gang_scheduled(body: dict[str, Any]) -> bool:
    """Seed 004's table: multi-node roles or P/D disaggregation are gang-scheduled."""
    types = {r["componentType"] for r in roles(body)}
    return any(kube_objects.node_count(r) >= 2 for r in roles(body)) or {"prefiller", "decoder"} <= types
