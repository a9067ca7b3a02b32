"""The reference operator's admission checks, without a cluster: a DynamoGraphDeployment's and an
InferenceService's errors, each naming the field; invalid variants break one field of a seed example."""

from __future__ import annotations

from typing import Any

import pytest

from servecert.reference_impl.operator.admission import dgd_errors, inference_service_errors
from servecert.reference_impl.operator.behaviour import Behaviour
from tests.reference_impl.operator.seed_objects import CT_NAME, DOMAINS, STORIES, dgd, story


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


def dgd_with_policy(policy: str | None) -> dict[str, Any]:
    """The seed's DGD with its frontend's mismatchPolicy at ``policy`` (None: omitted)."""
    obj = dgd()
    topo = obj["spec"]["components"][0]["kvCacheTransferTopology"]
    if policy is None:
        del topo["mismatchPolicy"]
    else:
        topo["mismatchPolicy"] = policy
    return obj


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


@pytest.mark.parametrize("policy", ["fail", "fallback", None])
def test_transfer_topology_without_cluster_topology_crd_is_refused_whatever_the_policy(policy: str | None) -> None:
    lookup = FakeTopologies(crd=False)
    assert dgd_errors(dgd_with_policy(policy), lookup) == [
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


def test_a_behaviour_without_the_existence_check_accepts_a_missing_topology() -> None:
    obj = dgd()
    obj["spec"]["topologyConstraint"]["clusterTopologyName"] = "other-topology"
    assert dgd_errors(obj, FakeTopologies(), Behaviour(check_topology_exists=False)) == []


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


@pytest.mark.parametrize(("index", "ctype"), [(1, "prefill"), (2, "decode"), (1, "worker"), (2, "planner")])
def test_transfer_topology_on_a_non_frontend_component_is_refused(index: int, ctype: str) -> None:
    obj = dgd()
    components = obj["spec"]["components"]
    components[index]["kvCacheTransferTopology"] = components[0].pop("kvCacheTransferTopology")
    components[index]["type"] = ctype
    assert dgd_errors(obj, FakeTopologies()) == [
        f"spec.components[{index}].kvCacheTransferTopology: only valid on components of type frontend, not {ctype!r}; "
        "move it to the frontend component"
    ]


def test_a_behaviour_without_the_component_check_accepts_it_on_a_worker() -> None:
    obj = dgd()
    obj["spec"]["components"][2]["kvCacheTransferTopology"] = {"level": "zone"}
    assert dgd_errors(obj, FakeTopologies(), Behaviour(topology_refused_on=())) == []


@pytest.mark.parametrize("ctype", ["worker", "planner"])
def test_a_behaviour_refusing_topology_on_prefill_and_decode_only_accepts_it_on_other_types(ctype: str) -> None:
    obj = dgd()
    obj["spec"]["components"][1]["kvCacheTransferTopology"] = {"level": "zone"}
    obj["spec"]["components"][1]["type"] = ctype
    assert dgd_errors(obj, FakeTopologies(), Behaviour(topology_refused_on=("prefill", "decode"))) == []


def test_a_behaviour_requiring_the_crd_for_fail_only_admits_fallback_without_it() -> None:
    obj = dgd()
    obj["spec"]["components"][0]["kvCacheTransferTopology"]["mismatchPolicy"] = "fallback"
    assert dgd_errors(obj, FakeTopologies(crd=False), Behaviour(crd_required_for=("fail",))) == []


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
    assert dgd_errors(dgd_with_policy(policy), FakeTopologies()) == []


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
    assert dgd_errors(obj, FakeTopologies()) == [
        "spec.components[1].type: 'encoder' is not one of frontend, prefill, decode, worker, planner"
    ]


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


def test_multinode_without_node_count_is_refused_as_required() -> None:
    obj = story(3)
    obj["spec"]["roles"][0]["multinode"] = {}
    assert inference_service_errors(obj) == [
        "spec.roles[0].multinode.nodeCount: required when multinode is set (the number of nodes per replica, >= 1)"
    ]
