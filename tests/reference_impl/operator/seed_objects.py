"""The seeds' examples as the reference operator's unit tests use them, and what those tests share.

Inputs are the seeds' examples (``servecert.harness.seed_examples``) given the namespace and uid the API
server would add; invalid variants break one field of them.
"""

from __future__ import annotations

from typing import Any

from servecert.harness import seed_examples
from servecert.protocol import kube_names as kn

NS = "team-a"
DGD_EXAMPLE = "dgd-my-llm-disagg"
CT_NAME = "my-cluster-topology"
DOMAINS = ["zone", "rack", "host"]
STORIES = (1, 2, 3, 4)


def dgd(name: str = DGD_EXAMPLE) -> dict[str, Any]:
    obj = seed_examples.load(name)
    obj["metadata"].update(namespace=NS, uid="dgd-uid")
    return obj


def story(n: int, generation: int | None = None) -> dict[str, Any]:
    obj = seed_examples.load(f"inferenceservice-story{n}")
    obj["metadata"].update(namespace=NS, uid=f"isvc-uid-{n}")
    if generation is not None:
        obj["metadata"]["generation"] = generation
    return obj


def short_named(pods: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``<dgd>-<component>-<index>``: the pods keyed without their revision tag (tested once, in test_dgd_pods.py)."""
    out = {}
    for pod in pods.values():
        labels = pod["metadata"]["labels"]
        index = pod["metadata"]["name"].rsplit("-", 1)[1]
        out[f"{labels[kn.DGD_NAME_LABEL]}-{labels[kn.COMPONENT_LABEL]}-{index}"] = pod
    return out
