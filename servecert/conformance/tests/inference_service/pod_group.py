"""Seed 004: one PodGroup per gang-scheduled service, named after it, with minTaskMember {role}-{replica} per replica.

The PodGroup's other fields are the implementation's: the suite judges what the scheduler then
does with the service (GANG-SCHEDULING: the seed's table, each replica all-or-nothing, prefill and
decode together), not how ``minMember`` is written. Seed 004's own example writes ``minMember``
as every pod of the service (10), yet its scheduling table runs 1 prefill + 1 decode replica of
story 4 on 64 GPUs, which that PodGroup forbids on Volcano 1.15 (docs/gang-scheduling.md has the
measurement). So a vendor writing the example's letter passes here and is judged by
``GangSchedulingTable`` (``tests/nonconforming/gang.py:SeedExamplePodGroup``), and the
reference's ``minMember`` = one replica of every gang role with a ``subGroupPolicy`` per role
passes both.
"""

from __future__ import annotations

from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.protocol import kube_objects


def expected_tasks(body: dict[str, Any]) -> dict[str, int]:
    return {
        f"{role['name']}-{replica}": kube_objects.node_count(role)
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
    tasks = expected_tasks(body)

    async def matching() -> dict[str, Any] | None:
        group = await kc.get(env, kc.PODGROUP, service)
        spec = (group or {}).get("spec") or {}
        return group if spec.get("minTaskMember") == tasks else None

    try:
        await kc.wait_for(matching, ctx.timeouts.operator_reconcile_s, f"{what}: PodGroup {service}")
    except AssertionError:
        group = await kc.get(env, kc.PODGROUP, service)
        raise AssertionError(
            f"{what}: PodGroup {service} spec {None if group is None else group.get('spec')}; expected minTaskMember {tasks} "
            "(seed 004: one key {roleName}-{replicaIndex} per replica, its pod count as the value)"
        ) from None


TEST = ConformanceTest(
    short_name="InferenceServicePodGroup",
    description="Gang-scheduled stories get one PodGroup named after the service with minTaskMember {role}-{replica} "
    "per replica; it follows a replica change. minMember is the implementation's: GANG-SCHEDULING judges what the "
    "scheduler does with it (the seed's example value forbids the seed's own table on Volcano).",
    features=(features.INFERENCE_SERVICE_POD_GROUP,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(story) for story in manifests.STORIES),
    check=check,
    seed=SeedRef(
        "004",
        "PodGroup Management",
        "The InferenceService Controller creates one PodGroup per InferenceService. The minTaskMember keys use the format "
        "{roleName}-{replicaIndex} to identify each replica's task:",
        note="minMember is not judged here: the seed's examples (all pods) contradict its scheduling table on Volcano "
        "(docs/gang-scheduling.md), so GangSchedulingTable judges the behaviour any minMember gives. Single-node "
        "monolithic gets no PodGroup.",
    ),
)
