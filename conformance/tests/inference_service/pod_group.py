"""Seed 004: one PodGroup per gang-scheduled service, minTaskMember per replica, minMember = the smallest runnable service.

``minMember`` is the pods of one replica of every gang role, not the seed's literal "all pods":
the seed's own scheduling table runs 1 prefill + 1 decode replica of story 4 at 64 GPUs, which a
PodGroup demanding all 10 pods forbids (docs/gang-scheduling.md has the measurement). Whether
the placement really is all-or-nothing per replica is the GANG-SCHEDULING profile's question.
"""

from __future__ import annotations

from typing import Any

from conformance.suite import features
from conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from conformance.utils import kube as kc
from conformance.utils import manifests


def expected_min_member(body: dict[str, Any]) -> int:
    gang = [r for r in manifests.roles(body) if r["componentType"] != "router" and int(r.get("replicas", 1)) > 0]
    return sum(manifests.node_count(r) for r in gang)


def expected_tasks(body: dict[str, Any]) -> dict[str, int]:
    return {
        f"{role['name']}-{replica}": int((role.get("multinode") or {}).get("nodeCount", 1))
        for role in manifests.roles(body)
        if role["componentType"] != "router"
        for replica in range(int(role.get("replicas", 1)))
    }


async def check(ctx: TestContext) -> None:
    env = kc.env_of(ctx)
    body = manifests.story(ctx.case.id)
    service = body["metadata"]["name"]
    await kc.create(env, kc.ISVC, body)
    if not manifests.gang_scheduled(body):
        await kc.wait_for(lambda: kc.pods(env, ""), ctx.timeouts.operator_reconcile_s, f"pods of {service}")
        if await kc.get(env, kc.PODGROUP, service) is not None:
            raise AssertionError(f"{ctx.case.id} (single-node, monolithic) must not get a PodGroup")
        return
    await _pod_group_must_match(ctx, service, body, ctx.case.id)
    # Scale the last role down to 1 replica: the PodGroup must follow.
    roles = manifests.roles(body)
    roles[-1]["replicas"] = 1
    await kc.patch(env, kc.ISVC, service, {"spec": {"roles": roles}})
    await _pod_group_must_match(ctx, service, body, f"{ctx.case.id} after {roles[-1]['name']} -> 1 replica")


async def _pod_group_must_match(ctx: TestContext, service: str, body: dict[str, Any], what: str) -> None:
    env = kc.env_of(ctx)
    tasks, least = expected_tasks(body), expected_min_member(body)

    async def matching() -> dict[str, Any] | None:
        group = await kc.get(env, kc.PODGROUP, service)
        spec = (group or {}).get("spec") or {}
        return group if spec.get("minTaskMember") == tasks and spec.get("minMember") == least else None

    try:
        await kc.wait_for(matching, ctx.timeouts.operator_reconcile_s, f"{what}: PodGroup {service}")
    except AssertionError:
        group = await kc.get(env, kc.PODGROUP, service)
        raise AssertionError(
            f"{what}: PodGroup {service} spec {None if group is None else group.get('spec')}; "
            f"expected minMember {least} (one replica of every gang role), minTaskMember {tasks}"
        ) from None


TEST = ConformanceTest(
    short_name="InferenceServicePodGroup",
    description="Gang-scheduled stories get one PodGroup named after the service with minTaskMember {role}-{replica} "
    "and minMember = one replica of every gang role; it follows a replica change.",
    features=(features.INFERENCE_SERVICE_POD_GROUP,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(story) for story in manifests.STORIES),
    check=check,
    seed=SeedRef(
        "004",
        "PodGroup Management",
        "The InferenceService Controller creates one PodGroup per InferenceService. The minTaskMember keys use the format "
        "{roleName}-{replicaIndex} to identify each replica's task:",
        note="minMember differs from the seed's examples (all pods): the suite requires one replica of every gang role, "
        "which the seed's scheduling table needs (docs/gang-scheduling.md). Single-node monolithic gets no PodGroup.",
    ),
)
