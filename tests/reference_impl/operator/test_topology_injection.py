"""The reference operator's topology injection, without a cluster: a ClusterTopology's levels, a node's
domains, the labels a pod lacks, which pods ask for injection."""

from __future__ import annotations

from typing import Any

import pytest

from servecert.harness import seed_examples
from servecert.reference_impl.operator import dgd_pods, topology_injection
from servecert.reference_impl.operator.topology_injection import Level
from tests.reference_impl.operator.seed_objects import CT_NAME, DOMAINS, dgd, short_named

CT_EXAMPLE = "clustertopology-my-cluster-topology"


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
