"""The pods the reference operator wants for a DGD, without a cluster: names, labels, owner, env,
the topology volume and annotation, images."""

from __future__ import annotations

from typing import Any

import pytest

from servecert.reference_impl.operator import dgd_pods
from tests.reference_impl.operator.seed_objects import CT_NAME, DOMAINS, NS, dgd, short_named


def env_of(pod: dict[str, Any]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = pod["spec"]["containers"][0]["env"]
    return env


def env_values(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in env_of(pod) if "value" in e}


def test_one_pod_per_component_replica_named_dgd_component_index() -> None:
    pods = short_named(dgd_pods.desired_pods(dgd(), DOMAINS))
    expected = (
        [f"my-llm-disagg-frontend-{i}" for i in range(4)]
        + [f"my-llm-disagg-prefill-worker-{i}" for i in range(8)]
        + [f"my-llm-disagg-decode-worker-{i}" for i in range(8)]
    )
    assert list(pods) == expected
    revs = dgd_pods.revisions(dgd())
    tags = {"frontend": f"{revs.workers[:6]}-{revs.frontend[:4]}"}
    names = [p["metadata"]["name"] for p in pods.values()]
    assert names == [
        f"my-llm-disagg-{c}-{tags.get(c, revs.workers[:6])}-{i}" for n in expected for c, i in [n[len("my-llm-disagg-") :].rsplit("-", 1)]
    ]
    assert {p["metadata"]["namespace"] for p in pods.values()} == {NS}


def test_component_without_replicas_gets_one_pod() -> None:
    pods = short_named(dgd_pods.desired_pods(dgd("dgd-with-weight"), DOMAINS))
    assert [name for name in pods if "frontend" in name] == ["my-llm-disagg-weighted-frontend-0"]


@pytest.mark.parametrize(
    ("name", "component", "ctype"),
    [("my-llm-disagg-frontend-3", "frontend", "frontend"), ("my-llm-disagg-decode-worker-7", "decode-worker", "decode")],
)
def test_pod_labels_name_the_dgd_and_component(name: str, component: str, ctype: str) -> None:
    pod = short_named(dgd_pods.desired_pods(dgd(), DOMAINS))[name]
    revs = dgd_pods.revisions(dgd())
    assert pod["metadata"]["labels"] == {
        "nvidia.com/dynamo-namespace": f"{NS}-my-llm-disagg-{revs.workers[:6]}",
        "nvidia.com/dynamo-graph-deployment-name": "my-llm-disagg",
        "nvidia.com/dynamo-component": component,
        "nvidia.com/dynamo-component-type": ctype,
        "servecert.io/workers-revision": revs.workers,
        **({"servecert.io/frontend-revision": revs.frontend} if ctype == "frontend" else {}),
    }


def test_every_pod_is_owned_by_the_dgd() -> None:
    for pod in short_named(dgd_pods.desired_pods(dgd(), DOMAINS)).values():
        assert pod["metadata"]["ownerReferences"] == [
            {
                "apiVersion": "nvidia.com/v1beta1",
                "kind": "DynamoGraphDeployment",
                "name": "my-llm-disagg",
                "uid": "dgd-uid",
                "controller": True,
            }
        ]


@pytest.mark.parametrize("levels", [DOMAINS, None])
def test_every_pod_gets_dynamo_namespace_and_downward_api_identity(levels: list[str] | None) -> None:
    for pod in short_named(dgd_pods.desired_pods(dgd(), levels)).values():
        assert env_of(pod)[:5] == [
            {"name": "DYN_NAMESPACE", "value": f"{NS}-my-llm-disagg-{dgd_pods.revisions(dgd()).workers[:6]}"},
            {"name": "DYN_DISCOVERY_BACKEND", "value": "kubernetes"},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        ]


def test_frontend_gets_router_level_and_policy_and_nothing_worker_side() -> None:
    pod = short_named(dgd_pods.desired_pods(dgd(), DOMAINS))["my-llm-disagg-frontend-0"]
    assert env_of(pod)[5:] == [
        {"name": "DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL", "value": "zone"},
        {"name": "DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY", "value": "fail"},
    ]
    assert pod["metadata"]["annotations"] == {}
    assert pod["spec"]["volumes"] == []
    assert pod["spec"]["containers"][0]["volumeMounts"] == []


@pytest.mark.parametrize(("policy", "expected"), [(None, "fail"), ("fail", "fail"), ("fallback", "fallback")])
def test_frontend_mismatch_policy_defaults_to_fail(policy: str | None, expected: str) -> None:
    obj = dgd()
    topo = obj["spec"]["components"][0]["kvCacheTransferTopology"]
    del topo["mismatchPolicy"]
    if policy is not None:
        topo["mismatchPolicy"] = policy
    pod = short_named(dgd_pods.desired_pods(obj, DOMAINS))["my-llm-disagg-frontend-0"]
    assert env_values(pod)["DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY"] == expected


@pytest.mark.parametrize("name", ["my-llm-disagg-prefill-worker-0", "my-llm-disagg-decode-worker-7"])
def test_workers_get_topology_env_volume_mount_and_annotation(name: str) -> None:
    pod = short_named(dgd_pods.desired_pods(dgd(), DOMAINS))[name]
    assert env_of(pod)[5:] == [
        {"name": "DYN_TOPOLOGY_ENABLED", "value": "true"},
        {"name": "DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL", "value": "zone"},
    ]
    assert pod["spec"]["volumes"] == [
        {
            "name": "topology",
            "downwardAPI": {
                "items": [
                    {"path": "zone", "fieldRef": {"fieldPath": "metadata.labels['grove.io/topology.zone']"}},
                    {"path": "rack", "fieldRef": {"fieldPath": "metadata.labels['grove.io/topology.rack']"}},
                    {"path": "host", "fieldRef": {"fieldPath": "metadata.labels['grove.io/topology.host']"}},
                ]
            },
        }
    ]
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"name": "topology", "mountPath": "/etc/podinfo/topology", "readOnly": True}]
    assert pod["metadata"]["annotations"] == {"servecert.io/cluster-topology": CT_NAME}


def test_worker_type_worker_is_treated_like_prefill_and_decode() -> None:
    obj = dgd()
    obj["spec"]["components"][1]["type"] = "worker"
    pod = short_named(dgd_pods.desired_pods(obj, ["block"]))["my-llm-disagg-prefill-worker-0"]
    assert env_values(pod)["DYN_TOPOLOGY_ENABLED"] == "true"
    assert pod["spec"]["volumes"][0]["downwardAPI"]["items"] == [
        {"path": "block", "fieldRef": {"fieldPath": "metadata.labels['grove.io/topology.block']"}}
    ]
    assert pod["metadata"]["annotations"] == {"servecert.io/cluster-topology": CT_NAME}


def _assert_nothing_topology_related(pods: dict[str, dict[str, Any]]) -> None:
    assert len(pods) == 20
    for pod in pods.values():
        assert [e["name"] for e in env_of(pod)] == ["DYN_NAMESPACE", "DYN_DISCOVERY_BACKEND", "POD_NAME", "POD_NAMESPACE", "POD_UID"]
        assert pod["metadata"]["annotations"] == {}
        assert pod["spec"]["volumes"] == []
        assert pod["spec"]["containers"][0]["volumeMounts"] == []


def test_without_levels_nothing_topology_related_is_added() -> None:
    _assert_nothing_topology_related(short_named(dgd_pods.desired_pods(dgd(), None)))


def test_without_transfer_topology_nothing_topology_related_is_added() -> None:
    obj = dgd()
    del obj["spec"]["components"][0]["kvCacheTransferTopology"]
    assert dgd_pods.transfer_topology(obj) is None
    _assert_nothing_topology_related(short_named(dgd_pods.desired_pods(obj, DOMAINS)))


@pytest.mark.parametrize(
    ("name", "index"),
    [("my-llm-disagg-frontend-0", 0), ("my-llm-disagg-prefill-worker-0", 1)],
)
def test_user_env_cannot_override_the_operators_variables(name: str, index: int) -> None:
    obj = dgd()
    obj["spec"]["components"][index]["env"] = [
        {"name": "DYN_NAMESPACE", "value": "elsewhere"},
        {"name": "USER_SETTING", "value": "42"},
        {"name": "POD_NAME", "value": "fixed"},
        {"name": "DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL", "value": "host"},
        {"name": "DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY", "value": "fallback"},
        {"name": "DYN_TOPOLOGY_ENABLED", "value": "false"},
    ]
    pod = short_named(dgd_pods.desired_pods(obj, DOMAINS))[name]
    env = env_of(pod)
    assert env[0] == {"name": "USER_SETTING", "value": "42"}
    names = [e["name"] for e in env]
    assert len(names) == len(set(names))
    values = env_values(pod)
    assert values["DYN_NAMESPACE"] == dgd_pods.dynamo_namespace(obj)
    assert values["DYN_NAMESPACE"].startswith(f"{NS}-my-llm-disagg-")
    assert values["DYN_ROUTER_KV_TRANSFER_TOPOLOGY_LEVEL"] == "zone"
    assert "POD_NAME" not in values
    if index == 0:
        assert values["DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY"] == "fail"
    else:
        assert values["DYN_TOPOLOGY_ENABLED"] == "true"


def test_user_env_is_kept_when_no_operator_variable_clashes() -> None:
    obj = dgd()
    obj["spec"]["components"][0]["env"] = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    pod = short_named(dgd_pods.desired_pods(obj, None))["my-llm-disagg-frontend-0"]
    assert [e["name"] for e in env_of(pod)] == ["A", "B", "DYN_NAMESPACE", "DYN_DISCOVERY_BACKEND", "POD_NAME", "POD_NAMESPACE", "POD_UID"]


def test_default_images_per_component_type() -> None:
    pods = short_named(dgd_pods.desired_pods(dgd(), DOMAINS))
    images = {name: pod["spec"]["containers"][0]["image"] for name, pod in pods.items()}
    assert images["my-llm-disagg-frontend-0"] == "servecert/frontend"
    assert images["my-llm-disagg-prefill-worker-0"] == "servecert/fake-engine"
    assert images["my-llm-disagg-decode-worker-0"] == "servecert/fake-engine"


def test_images_can_be_replaced_and_a_component_image_wins() -> None:
    obj = dgd()
    obj["spec"]["components"][2]["image"] = "vllm/vllm-openai:v0.11.0"
    pods = short_named(dgd_pods.desired_pods(obj, DOMAINS, dgd_pods.Images(frontend="fe:1", worker="engine:1")))
    assert pods["my-llm-disagg-frontend-0"]["spec"]["containers"][0]["image"] == "fe:1"
    assert pods["my-llm-disagg-prefill-worker-0"]["spec"]["containers"][0]["image"] == "engine:1"
    assert pods["my-llm-disagg-decode-worker-0"]["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.11.0"


def test_extra_pod_spec_scheduling_reaches_the_components_pods_only() -> None:
    obj = dgd()
    selector, toleration = {"servecert.io/case": "n0"}, {"key": "servecert.io/case", "operator": "Equal", "value": "n0"}
    prefill = next(c for c in obj["spec"]["components"] if c["type"] == "prefill")
    prefill["extraPodSpec"] = {"nodeSelector": selector, "tolerations": [toleration]}
    pods = short_named(dgd_pods.desired_pods(obj, DOMAINS))
    assert pods["my-llm-disagg-prefill-worker-0"]["spec"]["nodeSelector"] == selector
    assert pods["my-llm-disagg-prefill-worker-0"]["spec"]["tolerations"] == [toleration]
    assert "nodeSelector" not in pods["my-llm-disagg-decode-worker-0"]["spec"]
    assert "tolerations" not in pods["my-llm-disagg-frontend-0"]["spec"]


def test_the_default_policy_is_the_behaviours_when_the_dgd_omits_it() -> None:
    obj = dgd()
    del obj["spec"]["components"][0]["kvCacheTransferTopology"]["mismatchPolicy"]
    pod = short_named(dgd_pods.desired_pods(obj, DOMAINS, default_policy="fallback"))["my-llm-disagg-frontend-0"]
    assert env_values(pod)["DYN_ROUTER_KV_TRANSFER_MISMATCH_POLICY"] == "fallback"


def test_a_command_reaches_the_container_and_rolls_the_workers_but_its_absence_changes_no_revision() -> None:
    """Seed 001 2: "Changing command, args, or environment variables passed to workers" is a worker change."""
    before = dgd_pods.revisions(dgd())
    obj = dgd()
    obj["spec"]["components"][2]["command"] = ["servecert", "engine", "serve", "--block-size", "32"]
    pods = short_named(dgd_pods.desired_pods(obj, DOMAINS))
    assert pods["my-llm-disagg-decode-worker-0"]["spec"]["containers"][0]["command"] == obj["spec"]["components"][2]["command"]
    assert "command" not in pods["my-llm-disagg-prefill-worker-0"]["spec"]["containers"][0]
    after = dgd_pods.revisions(obj)
    assert after.workers != before.workers and after.frontend == before.frontend
    plain = dgd()["spec"]["components"][2]
    assert dgd_pods._template(plain) == {key: plain.get(key) for key in dgd_pods.TEMPLATE_KEYS}, "no command: the old template"
