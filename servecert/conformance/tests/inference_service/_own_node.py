"""What INFERENCESERVICE-API cases share: one of seed 004's stories deployed on a node of the case's own.

Every container asks for an extended resource only that node offers (``kc.hold_resource``), so the
story's pods land there and nowhere else, whatever other cases run beside it.
"""

from __future__ import annotations

from typing import Any

from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_objects


def total_pods(body: dict[str, Any]) -> int:
    return sum(int(r.get("replicas", 1)) * kube_objects.node_count(r) for r in manifests.roles(body))


async def deploy(env: ClusterEnvironment, story: str) -> dict[str, Any]:
    """Create the case's node and the story's InferenceService on it; returns the body applied."""
    body = manifests.story(story)
    resource = kc.hold_resource(env)
    for role in manifests.roles(body):
        for container in role["template"]["spec"]["containers"]:
            container.setdefault("resources", {}).setdefault("limits", {})[resource] = "1"
    await kc.add_node(env, kc.fake_node(f"{env.namespace}-node", resource))
    await kc.create(env, kc.ISVC, body)
    return body


async def every_pod_ready(env: ClusterEnvironment, body: dict[str, Any]) -> bool:
    """The case's namespace holds the story's pods, none terminating, every one Ready."""
    pods = [p for p in await kc.pods(env) if not p["metadata"].get("deletionTimestamp")]
    return len(pods) == total_pods(body) and all(kc.pod_ready(p) for p in pods)
