"""Seed 004: each replica is a leader/worker group with the seed's names, labels, gang annotations and commands."""

from __future__ import annotations

from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects


def expected_pods(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """pod name -> (role, replica, worker index) per seed 004's naming chain."""
    service = body["metadata"]["name"]
    out: dict[str, dict[str, Any]] = {}
    for role in manifests.roles(body):
        nodes = kube_objects.node_count(role)
        for replica in range(int(role.get("replicas", 1))):
            lws = f"{service}-{role['name']}-{replica}"
            for worker in range(nodes):
                name = f"{lws}-0" if worker == 0 else f"{lws}-0-{worker}"
                out[name] = {"role": role, "replica": replica, "worker": worker, "nodes": nodes}
    return out


async def check(ctx: TestContext) -> None:
    env = kc.env_of(ctx)
    body = manifests.story(ctx.case.id)
    service = body["metadata"]["name"]
    wanted = expected_pods(body)
    await kc.create(env, kc.ISVC, body)

    async def all_there() -> list[kube_objects.Pod]:
        found = await kc.pods(env, f"{kn.IS_SERVICE_LABEL}={service}")
        return found if len(found) >= len(wanted) else []

    found = await kc.wait_for(all_there, ctx.timeouts.operator_reconcile_s, f"{len(wanted)} pods of {service}")
    generation = kube_objects.generation_of(await kc.get(env, kc.ISVC, service))
    kc.pods_must_have_names(found, set(wanted), f"{ctx.case.id} pods")
    for pod in found:
        want = wanted[pod["metadata"]["name"]]
        role = want["role"]
        labels = {
            kn.IS_SERVICE_LABEL: service,
            kn.IS_COMPONENT_TYPE_LABEL: role["componentType"],
            kn.IS_ROLE_LABEL: role["name"],
            kn.IS_REVISION_LABEL: str(generation),  # NB: "InferenceService generation for update detection"
        }
        if manifests.gang_scheduled(body):  # NB: the seed's table: "Replica index (only in per-replica mode)"
            labels[kn.IS_REPLICA_LABEL] = str(want["replica"])
        kc.pod_must_carry(pod, "labels", labels, ctx.case.id)
        if manifests.gang_scheduled(body):
            annotations = {kn.GROUP_NAME_ANNOTATION: service, kn.TASK_SPEC_ANNOTATION: f"{role['name']}-{want['replica']}"}
            kc.pod_must_carry(pod, "annotations", annotations, ctx.case.id)
        if want["nodes"] >= 2:
            _command_must_match(pod, leader=want["worker"] == 0)


def _command_must_match(pod: kube_objects.Pod, *, leader: bool) -> None:
    container = pod["spec"]["containers"][0]
    line = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
    wanted = (
        ("ray start --head", "--distributed-executor-backend ray")
        if leader
        else ("ray start --address=$LWS_LEADER_ADDRESS:6379", "--block")
    )
    missing = [w for w in wanted if w not in line]
    if missing:
        raise AssertionError(f"{'leader' if leader else 'worker'} pod {pod['metadata']['name']}: command {line!r} lacks {missing}")


TEST = ConformanceTest(
    short_name="InferenceServiceObjects",
    description="Stories 1-4 become per-replica leader/worker groups named {service}-{role}-{replica}, with seed 004's "
    "labels, gang annotations and multinode commands.",
    features=(features.INFERENCE_SERVICE_OBJECTS,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(story) for story in manifests.STORIES),
    check=check,
    seed=SeedRef(
        "004",
        "Naming Convention",
        "| Worker Pod | {lws-name}-{lws-replica}-{worker} | qwen-inference-inference-0-0-1 |",
        note="Judged on the pods, not on LWS objects; the same test checks the seed's 'Labels injected by Controller' "
        "(revision = the service's generation; replica-index only in per-replica mode, i.e. gang-scheduled services), "
        "the group-name/task-spec annotations and the multinode Ray leader/worker commands.",
    ),
)
