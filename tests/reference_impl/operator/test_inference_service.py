"""The reference operator's InferenceService plan (pods, PodGroup) and status, without a cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from servecert.reference_impl.operator import inference_service
from servecert.reference_impl.operator.behaviour import REFERENCE, Behaviour
from tests.reference_impl.operator.seed_objects import NS, STORIES, story


def with_state(pod: dict[str, Any], *, ready: bool = False, node: str | None = None, phase: str = "Running") -> dict[str, Any]:
    out = copy.deepcopy(pod)
    if node is not None:
        out["spec"]["nodeName"] = node
    out["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return out


def gang_annotations(pod: dict[str, Any]) -> dict[str, str]:
    """The pod's annotations but the update's template hash (``inference_service.TEMPLATE_HASH``, on every pod)."""
    annotations = dict(pod["metadata"]["annotations"])
    assert annotations.pop(inference_service.TEMPLATE_HASH)
    return annotations


# -- InferenceService plan -----------------------------------------------------------------------

EXPECTED_PODS: dict[int, list[str]] = {
    1: ["qwen-inference-inference-0-0"],
    2: [
        "qwen-inference-service-prefill-0-0",
        "qwen-inference-service-prefill-1-0",
        "qwen-inference-service-decode-0-0",
        "qwen-inference-service-decode-1-0",
        "qwen-inference-service-decode-2-0",
        "qwen-inference-service-decode-3-0",
    ],
    3: [
        "deepseek-r1-inference-inference-0-0",
        "deepseek-r1-inference-inference-0-0-1",
        "deepseek-r1-inference-inference-0-0-2",
        "deepseek-r1-inference-inference-0-0-3",
        "deepseek-r1-inference-inference-1-0",
        "deepseek-r1-inference-inference-1-0-1",
        "deepseek-r1-inference-inference-1-0-2",
        "deepseek-r1-inference-inference-1-0-3",
    ],
    4: [
        "deepseek-r1-disagg-prefill-0-0",
        "deepseek-r1-disagg-prefill-0-0-1",
        "deepseek-r1-disagg-decode-0-0",
        "deepseek-r1-disagg-decode-0-0-1",
        "deepseek-r1-disagg-decode-0-0-2",
        "deepseek-r1-disagg-decode-0-0-3",
        "deepseek-r1-disagg-decode-1-0",
        "deepseek-r1-disagg-decode-1-0-1",
        "deepseek-r1-disagg-decode-1-0-2",
        "deepseek-r1-disagg-decode-1-0-3",
    ],
}


@pytest.mark.parametrize("n", STORIES)
def test_pod_names_follow_the_seed_naming_chain(n: int) -> None:
    pods = inference_service.plan(story(n), REFERENCE).pods
    assert list(pods) == EXPECTED_PODS[n]
    assert [p["metadata"]["name"] for p in pods.values()] == EXPECTED_PODS[n]
    assert {p["metadata"]["namespace"] for p in pods.values()} == {NS}


@pytest.mark.parametrize(
    ("n", "pod", "service", "ctype", "role", "replica"),
    [
        (1, "qwen-inference-inference-0-0", "qwen-inference", "worker", "inference", "0"),
        (2, "qwen-inference-service-prefill-1-0", "qwen-inference-service", "prefiller", "prefill", "1"),
        (2, "qwen-inference-service-decode-3-0", "qwen-inference-service", "decoder", "decode", "3"),
        (3, "deepseek-r1-inference-inference-1-0-2", "deepseek-r1-inference", "worker", "inference", "1"),
        (4, "deepseek-r1-disagg-prefill-0-0-1", "deepseek-r1-disagg", "prefiller", "prefill", "0"),
        (4, "deepseek-r1-disagg-decode-1-0", "deepseek-r1-disagg", "decoder", "decode", "1"),
    ],
)
def test_pod_labels_name_service_type_role_replica_and_revision(
    n: int, pod: str, service: str, ctype: str, role: str, replica: str
) -> None:
    labels = inference_service.plan(story(n), REFERENCE).pods[pod]["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k.startswith("fusioninfer.io/")} == {
        "fusioninfer.io/service": service,
        "fusioninfer.io/component-type": ctype,
        "fusioninfer.io/role-name": role,
        "fusioninfer.io/replica-index": replica,
        "fusioninfer.io/revision": "1",
    }


def test_revision_label_is_the_generation() -> None:
    pods = inference_service.plan(story(2, generation=7), REFERENCE).pods
    assert {p["metadata"]["labels"]["fusioninfer.io/revision"] for p in pods.values()} == {"7"}


def test_pods_are_owned_by_the_service() -> None:
    for pod in inference_service.plan(story(4), REFERENCE).pods.values():
        assert pod["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "fusioninfer.io/v1alpha1",
                "kind": "InferenceService",
                "name": "deepseek-r1-disagg",
                "uid": "isvc-uid-4",
                "controller": True,
            }
        ]


def test_monolithic_single_node_story_is_not_gang_scheduled() -> None:
    plan = inference_service.plan(story(1), REFERENCE)
    assert plan.pod_group is None
    pod = plan.pods["qwen-inference-inference-0-0"]
    assert gang_annotations(pod) == {}
    assert "schedulerName" not in pod["spec"]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_gang_scheduled_stories_annotate_every_pod_with_group_and_task(n: int) -> None:
    obj = story(n)
    service = obj["metadata"]["name"]
    for pod in inference_service.plan(obj, REFERENCE).pods.values():
        labels = pod["metadata"]["labels"]
        task = f"{labels['fusioninfer.io/role-name']}-{labels['fusioninfer.io/replica-index']}"
        assert gang_annotations(pod) == {"scheduling.k8s.io/group-name": service, "volcano.sh/task-spec": task}
        assert pod["spec"]["schedulerName"] == "volcano"


def _sub_groups(service: str, sizes: dict[str, int]) -> list[dict[str, Any]]:
    return [
        {
            "name": role,
            "subGroupSize": size,
            "minSubGroups": 1,
            "labelSelector": {"matchLabels": {"fusioninfer.io/service": service, "fusioninfer.io/role-name": role}},
            "matchLabelKeys": ["fusioninfer.io/replica-index"],
        }
        for role, size in sizes.items()
    ]


@pytest.mark.parametrize(
    ("n", "min_member", "tasks", "sizes"),
    [
        (2, 2, {"prefill-0": 1, "prefill-1": 1, "decode-0": 1, "decode-1": 1, "decode-2": 1, "decode-3": 1}, {"prefill": 1, "decode": 1}),
        (3, 4, {"inference-0": 4, "inference-1": 4}, {"inference": 4}),
        (4, 6, {"prefill-0": 2, "decode-0": 4, "decode-1": 4}, {"prefill": 2, "decode": 4}),
    ],
)
def test_pod_group_has_one_task_per_replica_and_one_replica_per_role_as_minimum(
    n: int, min_member: int, tasks: dict[str, int], sizes: dict[str, int]
) -> None:
    obj = story(n)
    group = inference_service.plan(obj, REFERENCE).pod_group
    assert group is not None
    assert group["spec"] == {"minMember": min_member, "minTaskMember": tasks, "subGroupPolicy": _sub_groups(obj["metadata"]["name"], sizes)}
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["kind"] == "PodGroup"
    assert group["metadata"]["name"] == obj["metadata"]["name"]
    assert group["metadata"]["namespace"] == NS
    assert group["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "fusioninfer.io/v1alpha1",
            "kind": "InferenceService",
            "name": obj["metadata"]["name"],
            "uid": f"isvc-uid-{n}",
            "controller": True,
        }
    ]


def test_another_task_key_changes_pod_group_keys_and_pod_annotations() -> None:
    behaviour = Behaviour(task_key=lambda role, replica: f"{role}.r{replica}")
    plan = inference_service.plan(story(4), behaviour)
    assert plan.pod_group is not None
    assert plan.pod_group["spec"]["minTaskMember"] == {"prefill.r0": 2, "decode.r0": 4, "decode.r1": 4}
    assert plan.pods["deepseek-r1-disagg-decode-1-0-3"]["metadata"]["annotations"]["volcano.sh/task-spec"] == "decode.r1"


def test_scheduling_strategy_scheduler_name_replaces_volcano() -> None:
    obj = story(2)
    obj["spec"]["schedulingStrategy"] = {"schedulerName": "volcano-custom"}
    pods = inference_service.plan(obj, REFERENCE).pods
    assert {p["spec"]["schedulerName"] for p in pods.values()} == {"volcano-custom"}


def test_single_node_containers_are_left_as_the_template_says() -> None:
    obj = story(1)
    pod = inference_service.plan(obj, REFERENCE).pods["qwen-inference-inference-0-0"]
    assert pod["spec"]["containers"] == obj["spec"]["roles"][0]["template"]["spec"]["containers"]
    assert pod["spec"]["restartPolicy"] == "Always"


def test_multinode_leader_starts_ray_head_then_the_engine() -> None:
    container = inference_service.plan(story(3), REFERENCE).pods["deepseek-r1-inference-inference-1-0"]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    assert container["args"] == [
        "ray start --head --port=6379 && vllm serve --model deepseek-ai/DeepSeek-R1 --tensor-parallel-size 32 "
        "--distributed-executor-backend ray"
    ]
    assert container["env"] == [
        {"name": "LWS_LEADER_ADDRESS", "value": f"deepseek-r1-inference-inference-1-0.deepseek-r1-inference-inference-1.{NS}"}
    ]
    assert container["ports"] == [{"containerPort": 8000, "name": "http"}, {"containerPort": 6379}]  # the Ray head, as seed 004 shows
    assert container["image"] == "vllm/vllm-openai:v0.11.0"


@pytest.mark.parametrize("pod", ["deepseek-r1-inference-inference-1-0-1", "deepseek-r1-inference-inference-1-0-3"])
def test_multinode_workers_join_the_leaders_ray_cluster(pod: str) -> None:
    container = inference_service.plan(story(3), REFERENCE).pods[pod]["spec"]["containers"][0]
    assert container["command"] == ["/bin/sh", "-c"]
    assert container["args"] == ["ray start --address=$LWS_LEADER_ADDRESS:6379 --block"]
    assert container["env"] == [
        {"name": "LWS_LEADER_ADDRESS", "value": f"deepseek-r1-inference-inference-1-0.deepseek-r1-inference-inference-1.{NS}"}
    ]
    assert "ports" not in container
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "8"}}


def test_multinode_leader_keeps_a_quoted_json_argument_and_a_template_command() -> None:
    obj = story(4)
    obj["spec"]["roles"][1]["template"]["spec"]["containers"][0]["command"] = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    obj["spec"]["roles"][1]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "LWS_LEADER_ADDRESS", "value": "stale"},
        {"name": "HF_HOME", "value": "/cache"},
    ]
    pods = inference_service.plan(obj, REFERENCE).pods
    prefill = pods["deepseek-r1-disagg-prefill-0-0"]["spec"]["containers"][0]
    assert prefill["args"] == [
        "ray start --head --port=6379 && vllm serve --model deepseek-ai/DeepSeek-R1 --tensor-parallel-size 16 "
        '--kv-transfer-config \'{"kv_connector":"PyNcclConnector","kv_role":"kv_producer"}\' --distributed-executor-backend ray'
    ]
    decode = pods["deepseek-r1-disagg-decode-0-0"]["spec"]["containers"][0]
    assert decode["args"] == [
        "ray start --head --port=6379 && python3 -m vllm.entrypoints.openai.api_server --model deepseek-ai/DeepSeek-R1 "
        '--tensor-parallel-size 32 --kv-transfer-config \'{"kv_connector":"PyNcclConnector","kv_role":"kv_consumer"}\' '
        "--distributed-executor-backend ray"
    ]
    assert decode["env"] == [
        {"name": "HF_HOME", "value": "/cache"},
        {"name": "LWS_LEADER_ADDRESS", "value": f"deepseek-r1-disagg-decode-0-0.deepseek-r1-disagg-decode-0.{NS}"},
    ]


def test_plan_does_not_mutate_the_service() -> None:
    obj = story(4)
    before = copy.deepcopy(obj)
    inference_service.plan(obj, REFERENCE)
    assert obj == before


def _with_router(obj: dict[str, Any]) -> dict[str, Any]:
    router = {"name": "router", "componentType": "router", "replicas": 2, "strategy": {"type": "prefix-cache"}}
    router["template"] = {"spec": {"containers": [{"name": "epp", "image": "epp:1"}]}}
    obj["spec"]["roles"].insert(0, router)
    return obj


def test_router_roles_are_not_in_the_gang() -> None:
    plan = inference_service.plan(_with_router(story(2)), REFERENCE)
    assert plan.pod_group is not None
    assert plan.pod_group["spec"] == {
        "minMember": 2,
        "minTaskMember": {"prefill-0": 1, "prefill-1": 1, "decode-0": 1, "decode-1": 1, "decode-2": 1, "decode-3": 1},
        "subGroupPolicy": _sub_groups("qwen-inference-service", {"prefill": 1, "decode": 1}),
    }
    for name in ("qwen-inference-service-router-0-0", "qwen-inference-service-router-1-0"):
        router = plan.pods[name]
        assert gang_annotations(router) == {}
        assert "schedulerName" not in router["spec"]
        assert router["metadata"]["labels"]["fusioninfer.io/component-type"] == "router"
    assert plan.pods["qwen-inference-service-prefill-0-0"]["spec"]["schedulerName"] == "volcano"


def test_multinode_router_does_not_make_a_service_gang_scheduled() -> None:
    obj = _with_router(story(1))
    obj["spec"]["roles"][0]["multinode"] = {"nodeCount": 2}
    plan = inference_service.plan(obj, REFERENCE)
    assert plan.pod_group is None
    assert gang_annotations(plan.pods["qwen-inference-inference-0-0"]) == {}


@pytest.mark.parametrize(("n", "gang"), [(1, False), (2, True), (3, True), (4, True)])
def test_gang_scheduling_applies_to_multinode_or_disaggregated_services(n: int, gang: bool) -> None:
    assert inference_service.gang_scheduled(story(n)) is gang


# -- InferenceService status ---------------------------------------------------------------------

NOW = "2025-01-02T03:04:05Z"


def _story3_pods(ready: set[str], nodes: bool = True, failed: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    pods = inference_service.plan(story(3), REFERENCE).pods
    return [
        with_state(pod, ready=name in ready, node="node-0" if nodes else None, phase="Failed" if name in failed else "Running")
        for name, pod in pods.items()
    ]


def test_a_replica_is_ready_only_when_all_its_pods_are_ready() -> None:
    ready = set(EXPECTED_PODS[3][:4]) | set(EXPECTED_PODS[3][4:7])
    result = inference_service.status(story(3), _story3_pods(ready), NOW)
    assert result["components"] == {
        "inference": {
            "desiredReplicas": 2,
            "readyReplicas": 1,
            "nodesPerReplica": 4,
            "totalPods": 8,
            "readyPods": 7,
            "phase": "Deploying",
            "lastUpdateTime": NOW,
        }
    }
    assert result["conditions"] == [
        {"type": "Ready", "status": "False", "reason": "RolesNotReady", "message": "waiting for replicas to become ready"}
    ]


def test_a_replica_missing_a_pod_is_not_ready() -> None:
    pods = [p for p in _story3_pods(set(EXPECTED_PODS[3])) if p["metadata"]["name"] != "deepseek-r1-inference-inference-1-0-3"]
    component = inference_service.status(story(3), pods, NOW)["components"]["inference"]
    assert (component["readyReplicas"], component["readyPods"], component["phase"]) == (1, 7, "Deploying")


def test_all_pods_ready_is_running_and_ready() -> None:
    result = inference_service.status(story(3, generation=4), _story3_pods(set(EXPECTED_PODS[3])), NOW)
    component = result["components"]["inference"]
    assert (component["readyReplicas"], component["readyPods"], component["phase"]) == (2, 8, "Running")
    assert result["observedGeneration"] == 4
    assert result["conditions"] == [
        {"type": "Ready", "status": "True", "reason": "AllRolesRunning", "message": "every role has all its replicas ready"}
    ]


def test_no_pods_is_pending() -> None:
    component = inference_service.status(story(3), [], NOW)["components"]["inference"]
    assert component == {
        "desiredReplicas": 2,
        "readyReplicas": 0,
        "nodesPerReplica": 4,
        "totalPods": 8,
        "readyPods": 0,
        "phase": "Pending",
        "lastUpdateTime": NOW,
    }


def test_unbound_pods_are_pending_and_bound_ones_deploying() -> None:
    assert inference_service.status(story(3), _story3_pods(set(), nodes=False), NOW)["components"]["inference"]["phase"] == "Pending"
    assert inference_service.status(story(3), _story3_pods(set(), nodes=True), NOW)["components"]["inference"]["phase"] == "Deploying"


def test_a_failed_pod_makes_the_role_failed() -> None:
    failed = "deepseek-r1-inference-inference-0-0-2"
    pods = _story3_pods(set(EXPECTED_PODS[3]) - {failed}, failed=frozenset({failed}))
    component = inference_service.status(story(3), pods, NOW)["components"]["inference"]
    assert (component["readyReplicas"], component["readyPods"], component["phase"]) == (1, 7, "Failed")


def test_status_is_per_role() -> None:
    plan = inference_service.plan(story(4), REFERENCE)
    pods = [with_state(p, ready=name.startswith("deepseek-r1-disagg-prefill-"), node="n") for name, p in plan.pods.items()]
    result = inference_service.status(story(4), pods, NOW)
    assert result["components"] == {
        "prefill": {
            "desiredReplicas": 1,
            "readyReplicas": 1,
            "nodesPerReplica": 2,
            "totalPods": 2,
            "readyPods": 2,
            "phase": "Running",
            "lastUpdateTime": NOW,
        },
        "decode": {
            "desiredReplicas": 2,
            "readyReplicas": 0,
            "nodesPerReplica": 4,
            "totalPods": 8,
            "readyPods": 0,
            "phase": "Deploying",
            "lastUpdateTime": NOW,
        },
    }
    assert result["conditions"][0]["status"] == "False"


def test_status_ignores_pods_of_replicas_no_longer_desired() -> None:
    obj = story(3)
    pods = [with_state(p, ready=True, node="n") for p in inference_service.plan(obj, REFERENCE).pods.values()]
    obj["spec"]["roles"][0]["replicas"] = 1
    role = inference_service.status(obj, pods, "t")["components"]["inference"]
    assert (role["totalPods"], role["readyPods"], role["readyReplicas"], role["phase"]) == (4, 4, 1, "Running")


# -- updates (inference_service.replace) -----------------------------------------------------------


def changed(obj: dict[str, Any], generation: int) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["generation"] = generation
    for role in out["spec"]["roles"]:
        container = role["template"]["spec"]["containers"][0]
        container["env"] = [*(container.get("env") or []), {"name": "CHANGED", "value": "1"}]
    return out


def running(pods: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [with_state(p, ready=True, node="n") for p in pods.values()]


def test_a_generation_alone_replaces_nothing() -> None:
    old = inference_service.plan(story(3), REFERENCE).pods
    new = inference_service.plan(story(3, generation=5), REFERENCE).pods
    assert inference_service.replace(new, running(old)) == inference_service.Roll([], set())


def test_a_template_change_replaces_one_whole_replica_of_each_role_at_a_time() -> None:
    old = inference_service.plan(story(3), REFERENCE).pods
    new = inference_service.plan(changed(story(3), 2), REFERENCE).pods
    roll = inference_service.replace(new, running(old))
    assert roll.delete == [n for n in EXPECTED_PODS[3] if n.startswith("deepseek-r1-inference-inference-0-")]
    assert roll.hold == {"deepseek-r1-inference-inference-0"}
    terminating = running(old)
    for pod in terminating[:4]:
        pod["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z"
    assert inference_service.replace(new, terminating) == inference_service.Roll([], {"deepseek-r1-inference-inference-0"})
    # replica 0 gone and created again, not Ready yet: replica 1 waits
    coming_up = [with_state(p, ready=False) for name, p in new.items() if "-inference-0-" in name] + terminating[4:]
    assert inference_service.replace(new, coming_up).delete == []
    ready = [with_state(p, ready=True, node="n") for name, p in new.items() if "-inference-0-" in name] + terminating[4:]
    assert inference_service.replace(new, ready).delete == [n for n in EXPECTED_PODS[3] if "-inference-1-" in n]


def test_roles_roll_side_by_side_and_the_broken_variant_takes_one_pod() -> None:
    old = inference_service.plan(story(2), REFERENCE).pods
    new = inference_service.plan(changed(story(2), 2), REFERENCE).pods
    assert inference_service.replace(new, running(old)).delete == [
        "qwen-inference-service-decode-0-0",
        "qwen-inference-service-prefill-0-0",
    ]
    old3 = inference_service.plan(story(3), REFERENCE).pods
    new3 = inference_service.plan(changed(story(3), 2), REFERENCE).pods
    assert inference_service.replace(new3, running(old3), whole_replicas=False) == inference_service.Roll(
        ["deepseek-r1-inference-inference-0-0"], set()
    )
