"""Seed 004: status.components counts replicas and pods per role, and reaches Running when the pods are Ready.

Every container also asks for an extended resource only a node the suite adds later offers, so
for ``inference_service_unbound_hold_s`` no pod can be bound: the status must then say so (no ready pods, not Running).
After the node appears, every role must reach Running with the counts the suite makes itself.
"""

from __future__ import annotations

from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, waiting


async def check(ctx: TestContext) -> None:
    env = kc.env_of(ctx)
    body = manifests.story(ctx.case.id)
    service = body["metadata"]["name"]
    resource = kc.hold_resource(env)
    for role in manifests.roles(body):
        for container in role["template"]["spec"]["containers"]:
            limits = container.setdefault("resources", {}).setdefault("limits", {})
            limits[resource] = "1"
    await kc.create(env, kc.ISVC, body)
    roles = {r["name"]: r for r in manifests.roles(body)}
    seen: list[dict[str, Any]] = []

    async def reported() -> dict[str, Any] | None:
        found = await kc.get(env, kc.ISVC, service)
        components = kube_objects.components(found)
        return components if set(components) == set(roles) else None

    await kc.wait_for(reported, ctx.timeouts.operator_reconcile_s, f"status.components of {service} for every role")
    async for _ in waiting.holding_async(ctx.timeouts.inference_service_unbound_hold_s, 0.25):
        components = await reported() or {}
        for name, comp in components.items():
            if comp.get("readyPods") or comp.get("readyReplicas") or comp.get("phase") == "Running":
                raise AssertionError(f"{service} role {name}: status {comp} while none of its pods can even be scheduled")
    await kc.add_node(env, kc.fake_node(f"{env.namespace}-node", resource))

    async def running() -> dict[str, Any] | None:
        found = await kc.get(env, kc.ISVC, service)
        components = kube_objects.components(found)
        if components:
            seen.append(components)
        done = set(components) == set(roles) and all(c.get("phase") == "Running" for c in components.values())
        return components if done else None

    components = await kc.wait_for(running, ctx.timeouts.pods_ready_s, f"every role of {service} Running in status.components")
    pods = await kc.pods(env, f"{kn.IS_SERVICE_LABEL}={service}")
    for name, role in roles.items():
        nodes = kube_objects.node_count(role)
        replicas = int(role.get("replicas", 1))
        ready = sum(1 for p in pods if p["metadata"]["labels"].get(kn.IS_ROLE_LABEL) == name and kc.pod_ready(p))
        expected = {
            "desiredReplicas": replicas,
            "nodesPerReplica": nodes,
            "totalPods": replicas * nodes,
            "readyReplicas": replicas,
            "readyPods": ready,
        }
        actual = {k: components[name].get(k) for k in expected}
        if actual != expected:
            raise AssertionError(f"{service} role {name}: status {actual}; the suite counts {expected}")
    for snapshot in seen:
        for name, comp in snapshot.items():
            if comp.get("readyPods", 0) > comp.get("totalPods", 0) or comp.get("readyReplicas", 0) > comp.get("desiredReplicas", 0):
                raise AssertionError(f"{service} role {name}: status counted more ready than desired: {comp}")


TEST = ConformanceTest(
    short_name="InferenceServiceStatus",
    description="status.components reports desired/ready replicas, nodes per replica and pod counts per role, and phase "
    "Running once every pod is Ready.",
    features=(features.INFERENCE_SERVICE_STATUS,),
    environments=frozenset({"cluster"}),
    slow=True,
    cases=(Case("story1"), Case("story2"), Case("story3")),
    check=check,
    seed=SeedRef(
        "004",
        "CRD Structure Overview",
        "// ComponentStatus captures the aggregated runtime state of a single inference component (role).",
        note="The seed lists the fields but not when phase is Running; the suite requires Running once every pod is Ready, "
        "and no ready counts or Running while no pod can be scheduled.",
    ),
)
