"""The reference operator's pure modules, without a cluster: admission, DGD pods, InferenceService plan and status,
topology injection and the replaceable ``Behaviour``.

Inputs are the seeds' examples (``fixtures.seed_examples``) given the namespace and uid the API
server would add; invalid variants break one field of them.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from fixtures import seed_examples
from protocol import kube_names as kn
from reference_impl.operator import behaviour as behaviour_mod
from reference_impl.operator import dgd_pods, inference_service, topology_injection
from reference_impl.operator.admission import dgd_errors, inference_service_errors
from reference_impl.operator.behaviour import REFERENCE, Behaviour
from reference_impl.operator.topology_injection import Level

NS = "team-a"
DGD_EXAMPLE = "dgd-my-llm-disagg"
CT_EXAMPLE = "clustertopology-my-cluster-topology"
CT_NAME = "my-cluster-topology"
DOMAINS = ["zone", "rack", "host"]
STORIES = (1, 2, 3, 4)
TOPOLOGY_ENV = {kn.ENV_TOPOLOGY_ENABLED, kn.ENV_TRANSFER_LEVEL, kn.ENV_MISMATCH_POLICY}


# -- helpers -------------------------------------------------------------------------------------


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


class FakeTopologies:
    """A ``TopologyLookup`` over a dict, recording what it was asked."""

    def __init__(self, topologies: dict[str, list[str]] | None = None, *, crd: bool = True) -> None:
        self.topologies = {CT_NAME: DOMAINS} if topologies is None else topologies
        self.crd = crd
        self.calls: list[str] = []

    def crd_installed(self) -> bool:
        self.calls.append("crd_installed")
        return self.crd

    def domains(self, name: str) -> list[str] | None:
        self.calls.append(f"domains({name})")
        return self.topologies.get(name)


class UnusableLookup:
    """A ``TopologyLookup`` that must not be consulted."""

    def crd_installed(self) -> bool:
        raise AssertionError("crd_installed() called for a DGD without kvCacheTransferTopology")

    def domains(self, name: str) -> list[str] | None:
        raise AssertionError(f"domains({name!r}) called for a DGD without kvCacheTransferTopology")


def short_named(pods: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``<dgd>-<component>-<index>``: the pods keyed without their revision tag (tested once, below)."""
    out = {}
    for pod in pods.values():
        labels = pod["metadata"]["labels"]
        index = pod["metadata"]["name"].rsplit("-", 1)[1]
        out[f"{labels[kn.DGD_NAME_LABEL]}-{labels[kn.COMPONENT_LABEL]}-{index}"] = pod
    return out


def env_of(pod: dict[str, Any]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = pod["spec"]["containers"][0]["env"]
    return env


def env_values(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in env_of(pod) if "value" in e}


def with_state(pod: dict[str, Any], *, ready: bool = False, node: str | None = None, phase: str = "Running") -> dict[str, Any]:
    out = copy.deepcopy(pod)
    if node is not None:
        out["spec"]["nodeName"] = node
    out["status"] = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return out


# -- admission: DynamoGraphDeployment ------------------------------------------------------------


def test_seed_dgd_is_valid_after_consulting_the_lookup() -> None:
    lookup = FakeTopologies()
    assert dgd_errors(dgd(), lookup) == []
    assert lookup.calls == ["crd_installed", f"domains({CT_NAME})"]


def test_weighted_seed_dgd_is_valid() -> None:
    assert dgd_errors(dgd("dgd-with-weight"), FakeTopologies()) == []


def test_transfer_topology_without_cluster_topology_name_is_refused() -> None:
    obj = dgd()
    del obj["spec"]["topologyConstraint"]
    lookup = FakeTopologies()
    assert dgd_errors(obj, lookup) == [
        "spec.topologyConstraint.clusterTopologyName: required when spec.components[0].kvCacheTransferTopology is set; "
        "name the ClusterTopology to resolve its level"
    ]
    assert lookup.calls == []


def test_transfer_topology_without_cluster_topology_crd_is_refused() -> None:
    lookup = FakeTopologies(crd=False)
    assert dgd_errors(dgd(), lookup) == [
        "spec.components[0].kvCacheTransferTopology: the ClusterTopology CRD (clustertopologies.grove.io) is not installed, "
        "so ClusterTopology 'my-cluster-topology' cannot be read; install Grove's ClusterTopology or remove kvCacheTransferTopology"
    ]
    assert lookup.calls == ["crd_installed"]


def test_missing_cluster_topology_is_refused() -> None:
    obj = dgd()
    obj["spec"]["topologyConstraint"]["clusterTopologyName"] = "other-topology"
    assert dgd_errors(obj, FakeTopologies()) == [
        "spec.topologyConstraint.clusterTopologyName: ClusterTopology 'other-topology' not found; create it or correct the name"
    ]


def test_level_that_is_not_a_domain_is_refused() -> None:
    obj = dgd()
    obj["spec"]["components"][0]["kvCacheTransferTopology"]["level"] = "datacenter"
    assert dgd_errors(obj, FakeTopologies()) == [
        "spec.components[0].kvCacheTransferTopology.level: 'datacenter' is not a domain of ClusterTopology "
        "'my-cluster-topology' (its domains: zone, rack, host)"
    ]


def test_level_is_checked_against_the_named_topology_domains() -> None:
    obj = dgd()
    obj["spec"]["components"][0]["kvCacheTransferTopology"]["level"] = "block"
    assert dgd_errors(obj, FakeTopologies({CT_NAME: ["block", "host"]})) == []


def test_behaviour_without_level_check_accepts_a_bad_level() -> None:
    obj = dgd()
    obj["spec"]["components"][0]["kvCacheTransferTopology"]["level"] = "datacenter"
    assert dgd_errors(obj, FakeTopologies(), Behaviour(check_level=False)) == []


@pytest.mark.parametrize(("index", "ctype"), [(1, "prefill"), (2, "decode"), (1, "worker")])
def test_transfer_topology_on_a_non_frontend_component_is_refused(index: int, ctype: str) -> None:
    obj = dgd()
    components = obj["spec"]["components"]
    components[index]["kvCacheTransferTopology"] = components[0].pop("kvCacheTransferTopology")
    components[index]["type"] = ctype
    assert dgd_errors(obj, FakeTopologies()) == [
        f"spec.components[{index}].kvCacheTransferTopology: only valid on components of type frontend, not {ctype!r}; "
        "move it to the frontend component"
    ]


def test_transfer_topology_on_frontend_and_worker_refuses_only_the_worker() -> None:
    obj = dgd()
    obj["spec"]["components"][2]["kvCacheTransferTopology"] = {"level": "zone"}
    assert dgd_errors(obj, FakeTopologies()) == [
        "spec.components[2].kvCacheTransferTopology: only valid on components of type frontend, not 'decode'; "
        "move it to the frontend component"
    ]


@pytest.mark.parametrize("policy", ["Fail", "strict", ""])
def test_bad_mismatch_policy_is_refused(policy: str) -> None:
    obj = dgd()
    obj["spec"]["components"][0]["kvCacheTransferTopology"]["mismatchPolicy"] = policy
    assert dgd_errors(obj, FakeTopologies()) == [
        f"spec.components[0].kvCacheTransferTopology.mismatchPolicy: {policy!r} is not fail or fallback"
    ]


@pytest.mark.parametrize("policy", ["fail", "fallback", None])
def test_mismatch_policy_fail_fallback_or_absent_is_accepted(policy: str | None) -> None:
    obj = dgd()
    topo = obj["spec"]["components"][0]["kvCacheTransferTopology"]
    if policy is None:
        del topo["mismatchPolicy"]
    else:
        topo["mismatchPolicy"] = policy
    assert dgd_errors(obj, FakeTopologies()) == []


def test_bad_level_and_bad_policy_are_both_reported() -> None:
    obj = dgd()
    obj["spec"]["components"][0]["kvCacheTransferTopology"] = {"level": "pod", "mismatchPolicy": "ignore"}
    assert dgd_errors(obj, FakeTopologies()) == [
        "spec.components[0].kvCacheTransferTopology.level: 'pod' is not a domain of ClusterTopology "
        "'my-cluster-topology' (its domains: zone, rack, host)",
        "spec.components[0].kvCacheTransferTopology.mismatchPolicy: 'ignore' is not fail or fallback",
    ]


def test_dgd_without_transfer_topology_never_consults_the_lookup() -> None:
    obj = dgd()
    del obj["spec"]["components"][0]["kvCacheTransferTopology"]
    del obj["spec"]["topologyConstraint"]
    assert dgd_errors(obj, UnusableLookup()) == []


def test_unknown_component_type_is_refused() -> None:
    obj = dgd()
    obj["spec"]["components"][1]["type"] = "encoder"
    assert dgd_errors(obj, FakeTopologies()) == ["spec.components[1].type: 'encoder' is not one of frontend, prefill, decode, worker"]


# -- admission: InferenceService -----------------------------------------------------------------


@pytest.mark.parametrize("n", STORIES)
def test_seed_stories_are_valid(n: int) -> None:
    assert inference_service_errors(story(n)) == []


def test_duplicate_role_names_are_refused() -> None:
    obj = story(2)
    obj["spec"]["roles"][1]["name"] = "prefill"
    assert inference_service_errors(obj) == ["spec.roles[1].name: 'prefill' is used by an earlier role; role names must be unique"]


def test_unknown_component_type_of_a_role_is_refused() -> None:
    obj = story(1)
    obj["spec"]["roles"][0]["componentType"] = "gateway"
    assert inference_service_errors(obj) == ["spec.roles[0].componentType: 'gateway' is not one of router, prefiller, decoder, worker"]


ROUTER_FIELDS: list[tuple[str, Any]] = [
    ("strategy", {"type": "prefix-cache"}),
    ("httproute", {"spec": {"parentRefs": [{"name": "gw"}]}}),
    ("endpointPickerConfig", "plugins: []"),
]


@pytest.mark.parametrize(("key", "value"), ROUTER_FIELDS)
@pytest.mark.parametrize(("n", "index", "ctype"), [(1, 0, "worker"), (2, 0, "prefiller"), (2, 1, "decoder")])
def test_router_only_field_on_a_non_router_role_is_refused(key: str, value: Any, n: int, index: int, ctype: str) -> None:
    obj = story(n)
    obj["spec"]["roles"][index][key] = value
    assert inference_service_errors(obj) == [f"spec.roles[{index}].{key}: only valid on roles with componentType router, not {ctype!r}"]


@pytest.mark.parametrize(("key", "value"), ROUTER_FIELDS)
def test_router_only_field_on_a_router_role_is_accepted(key: str, value: Any) -> None:
    obj = story(2)
    obj["spec"]["roles"].append({"name": "router", "componentType": "router", key: value})
    assert inference_service_errors(obj) == []


def test_node_count_zero_is_refused() -> None:
    obj = story(3)
    obj["spec"]["roles"][0]["multinode"]["nodeCount"] = 0
    assert inference_service_errors(obj) == ["spec.roles[0].multinode.nodeCount: 0 must be >= 1"]


def test_negative_replicas_are_refused() -> None:
    obj = story(2)
    obj["spec"]["roles"][1]["replicas"] = -1
    assert inference_service_errors(obj) == ["spec.roles[1].replicas: -1 must be >= 0"]


def test_zero_replicas_are_accepted() -> None:
    obj = story(2)
    obj["spec"]["roles"][1]["replicas"] = 0
    assert inference_service_errors(obj) == []


@pytest.mark.parametrize("spec", [{"roles": []}, {}, None])
def test_service_without_roles_is_refused(spec: dict[str, Any] | None) -> None:
    obj = story(1)
    obj["spec"] = spec
    assert inference_service_errors(obj) == ["spec.roles: at least one role is required"]


# -- DGD pods --------------------------------------------------------------------------------------


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
    assert pod["metadata"]["annotations"] == {}
    assert "schedulerName" not in pod["spec"]


@pytest.mark.parametrize("n", [2, 3, 4])
def test_gang_scheduled_stories_annotate_every_pod_with_group_and_task(n: int) -> None:
    obj = story(n)
    service = obj["metadata"]["name"]
    for pod in inference_service.plan(obj, REFERENCE).pods.values():
        labels = pod["metadata"]["labels"]
        task = f"{labels['fusioninfer.io/role-name']}-{labels['fusioninfer.io/replica-index']}"
        assert pod["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": service, "volcano.sh/task-spec": task}
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
        assert router["metadata"]["annotations"] == {}
        assert "schedulerName" not in router["spec"]
        assert router["metadata"]["labels"]["fusioninfer.io/component-type"] == "router"
    assert plan.pods["qwen-inference-service-prefill-0-0"]["spec"]["schedulerName"] == "volcano"


def test_multinode_router_does_not_make_a_service_gang_scheduled() -> None:
    obj = _with_router(story(1))
    obj["spec"]["roles"][0]["multinode"] = {"nodeCount": 2}
    plan = inference_service.plan(obj, REFERENCE)
    assert plan.pod_group is None
    assert plan.pods["qwen-inference-inference-0-0"]["metadata"]["annotations"] == {}


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


# -- topology injection --------------------------------------------------------------------------


def test_levels_of_the_seed_cluster_topology_in_order() -> None:
    assert topology_injection.levels_of(seed_examples.load(CT_EXAMPLE)) == [
        Level("zone", "topology.kubernetes.io/zone"),
        Level("rack", "nvidia.com/rack"),
        Level("host", "kubernetes.io/hostname"),
    ]


@pytest.mark.parametrize("obj", [{}, {"spec": None}, {"spec": {}}, {"spec": {"levels": []}}])
def test_levels_of_a_topology_without_levels_is_empty(obj: dict[str, Any]) -> None:
    assert topology_injection.levels_of(obj) == []


def test_domains_of_node_skips_a_level_the_node_lacks() -> None:
    levels = topology_injection.levels_of(seed_examples.load(CT_EXAMPLE))
    node_labels = {"topology.kubernetes.io/zone": "zone-a", "kubernetes.io/hostname": "node-7", "unrelated": "x"}
    assert topology_injection.domains_of_node(levels, node_labels) == {"zone": "zone-a", "host": "node-7"}


def test_missing_labels_returns_only_absent_or_wrong_labels() -> None:
    pod_labels = {"grove.io/topology.zone": "zone-a", "grove.io/topology.rack": "rack-1", "app": "w"}
    domains = {"zone": "zone-a", "rack": "rack-2", "host": "node-7"}
    assert topology_injection.missing_labels(pod_labels, domains) == {
        "grove.io/topology.rack": "rack-2",
        "grove.io/topology.host": "node-7",
    }


def test_missing_labels_is_empty_when_the_pod_is_labelled() -> None:
    pod_labels = {"grove.io/topology.zone": "zone-a", "grove.io/topology.host": "node-7"}
    assert topology_injection.missing_labels(pod_labels, {"zone": "zone-a", "host": "node-7"}) == {}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        ({"metadata": {"annotations": {"servecert.io/cluster-topology": CT_NAME}}}, CT_NAME),
        ({"metadata": {"annotations": {"servecert.io/cluster-topology": ""}}}, None),
        ({"metadata": {"annotations": {"other": CT_NAME}}}, None),
        ({"metadata": {"annotations": None}}, None),
        ({"metadata": {}}, None),
        ({}, None),
    ],
)
def test_wants_injection_reads_the_cluster_topology_annotation(pod: dict[str, Any], expected: str | None) -> None:
    assert topology_injection.wants_injection(pod) == expected


def test_dgd_workers_ask_for_injection_and_the_frontend_does_not() -> None:
    pods = short_named(dgd_pods.desired_pods(dgd(), DOMAINS))
    assert topology_injection.wants_injection(pods["my-llm-disagg-prefill-worker-0"]) == CT_NAME
    assert topology_injection.wants_injection(pods["my-llm-disagg-frontend-0"]) is None


# -- behaviour -----------------------------------------------------------------------------------


def test_load_returns_the_named_behaviour() -> None:
    assert behaviour_mod.load("reference_impl.operator.behaviour:REFERENCE") is REFERENCE


def test_reference_behaviour_uses_the_seed_task_key_and_the_bound_node() -> None:
    assert REFERENCE.task_key("decode", 1) == "decode-1"
    assert REFERENCE.label_node("node-b", ["node-a", "node-b", "node-c"]) == "node-b"
    assert (REFERENCE.inject_before_binding, REFERENCE.check_level) == (False, True)


@pytest.mark.parametrize(
    "spec",
    [
        "reference_impl.operator.behaviour",
        ":REFERENCE",
        "reference_impl.operator.behaviour:",
        "",
        "reference_impl.operator.behaviour.REFERENCE",
    ],
)
def test_load_refuses_a_malformed_spec(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        behaviour_mod.load(spec)
    assert str(info.value) == f"--behaviour {spec!r} must look like package.module:ATTRIBUTE"


@pytest.mark.parametrize("spec", ["reference_impl.operator.behaviour:seed_task_key", "reference_impl.operator.behaviour:NO_SUCH_ATTRIBUTE"])
def test_load_refuses_an_attribute_that_is_not_a_behaviour(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        behaviour_mod.load(spec)
    assert str(info.value) == f"--behaviour {spec!r} is not a reference_impl.operator.behaviour.Behaviour"


def test_status_ignores_pods_of_replicas_no_longer_desired() -> None:
    obj = story(3)
    pods = [with_state(p, ready=True, node="n") for p in inference_service.plan(obj, REFERENCE).pods.values()]
    obj["spec"]["roles"][0]["replicas"] = 1
    role = inference_service.status(obj, pods, "t")["components"]["inference"]
    assert (role["totalPods"], role["readyPods"], role["readyReplicas"], role["phase"]) == (4, 4, 1, "Running")


def test_multinode_without_node_count_is_refused_as_required() -> None:
    obj = story(3)
    obj["spec"]["roles"][0]["multinode"] = {}
    assert inference_service_errors(obj) == [
        "spec.roles[0].multinode.nodeCount: required when multinode is set (the number of nodes per replica, >= 1)"
    ]
