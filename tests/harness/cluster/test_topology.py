"""Topology spec -> nodes and ClusterTopology, and the kwok stage set (no cluster needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecert.harness.cluster import kwok_stages, topology


def test_a_spec_file_becomes_labelled_gpu_nodes_with_overrides(tmp_path: Path) -> None:
    path = tmp_path / "topo.yaml"
    path.write_text(
        "name: lab\nzones: 2\nracksPerZone: 1\nhostsPerRack: 3\ngpusPerNode: 4\n"
        "overrides:\n  node-1-0-2: {gpus: 2, labels: {nvidia.com/gpu.product: H100}}\n"
    )
    spec = topology.load_spec(path)
    nodes = {n["metadata"]["name"]: n for n in topology.node_manifests(spec)}
    assert len(nodes) == 6
    odd = nodes["node-1-0-2"]
    assert odd["status"]["capacity"][topology.GPU_RESOURCE] == "2"
    assert odd["metadata"]["labels"]["nvidia.com/gpu.product"] == "H100"
    assert odd["metadata"]["labels"][topology.ZONE_LABEL] == "zone-1"
    assert odd["metadata"]["labels"][topology.RACK_LABEL] == "rack-1-0"
    assert odd["metadata"]["labels"][topology.HOST_LABEL] == "node-1-0-2"
    assert nodes["node-0-0-0"]["status"]["allocatable"][topology.GPU_RESOURCE] == "4"
    assert all("taints" not in n["spec"] for n in nodes.values())
    assert topology.cluster_topology(spec)["spec"]["levels"] == [
        {"domain": "zone", "labelKey": "topology.kubernetes.io/zone"},
        {"domain": "rack", "labelKey": "nvidia.com/rack"},
        {"domain": "host", "labelKey": "kubernetes.io/hostname"},
    ]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"zones": 0}, "'zones' must be an integer >= 1"),
        ({"racks": 2}, "unknown topology field"),
        ({"overrides": {"n": {"gpus": -1}}}, "overrides['n'].gpus"),
    ],
    ids=["zero-zones", "unknown-field", "negative-gpus"],
)
def test_a_bad_spec_names_the_field(raw: dict[str, object], message: str) -> None:
    with pytest.raises(topology.TopologySpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        topology.parse_spec(raw)


def test_an_override_for_a_node_the_spec_does_not_create_is_refused() -> None:
    spec = topology.parse_spec({"zones": 1, "racksPerZone": 1, "hostsPerRack": 1, "overrides": {"ghost": {"gpus": 1}}})
    with pytest.raises(topology.TopologySpecError, match="ghost"):
        topology.node_manifests(spec)


def test_flat_spec_fills_racks_of_eight_and_zones_of_eight_racks() -> None:
    spec = topology.flat_spec(1000)
    places = topology.placements(spec)
    assert len(places) == 1000 and spec.node_count == 1000
    assert len({p.rack for p in places}) == 125 and len({p.zone for p in places}) == 16
    assert len({p.name for p in places}) == 1000


def test_kwok_pod_stages_skip_the_runner_images_and_node_stages_are_untouched() -> None:
    docs = kwok_stages.stages(["servecert/fake-engine:latest", "servecert/fake-engine@sha256:00"])
    by_name = {d["metadata"]["name"]: d for d in docs}
    assert sorted(by_name) == ["node-heartbeat-with-lease", "node-initialize", "pod-complete", "pod-delete", "pod-ready"]
    for name in ("pod-ready", "pod-complete", "pod-delete"):
        last = by_name[name]["spec"]["selector"]["matchExpressions"][-1]
        assert last == {"key": kwok_stages.IMAGE_EXPRESSION, "operator": "NotIn", "values": ["servecert/fake-engine"]}
    assert all(e["key"] != kwok_stages.IMAGE_EXPRESSION for e in by_name["node-initialize"]["spec"]["selector"]["matchExpressions"])
