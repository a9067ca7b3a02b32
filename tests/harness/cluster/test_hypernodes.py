"""HyperNodes generated from node labels, and the admission rules they must pass (no cluster needed)."""

from __future__ import annotations

from typing import Any

import pytest

from servecert.harness.cluster import hypernodes, topology

LEVELS = topology.LEVELS


def labels_of(spec: topology.TopologySpec) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in topology.node_manifests(spec)}


def member(**selector: Any) -> dict[str, Any]:
    return {"type": "Node", "selector": selector}


def hypernode(name: str, tier: int, *members: dict[str, Any]) -> dict[str, Any]:
    spec = {"tier": tier, "members": list(members)}
    return {"apiVersion": hypernodes.API_VERSION, "kind": "HyperNode", "metadata": {"name": name}, "spec": spec}


def test_racks_become_tier_one_and_zones_tier_two_covering_exactly_their_nodes() -> None:
    nodes = labels_of(topology.TopologySpec(zones=2, racks_per_zone=2, hosts_per_rack=2))
    objects = hypernodes.generate(nodes, LEVELS)
    assert hypernodes.validate_tree(objects, nodes) == []
    by_name = {o["metadata"]["name"]: o for o in objects}
    assert sorted(by_name) == ["rack-0-0", "rack-0-1", "rack-1-0", "rack-1-1", "zone-0", "zone-1"]
    assert {o["spec"]["tier"] for o in objects if o["metadata"]["name"].startswith("rack")} == {1}
    covered = hypernodes.leaves(objects, nodes)
    assert covered["rack-1-0"] == {"node-1-0-0", "node-1-0-1"}
    assert covered["zone-0"] == {"node-0-0-0", "node-0-0-1", "node-0-1-0", "node-0-1-1"}
    assert by_name["zone-1"]["spec"]["members"] == [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-1-0"}}},
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-1-1"}}},
    ]


def test_a_rack_value_repeated_in_two_zones_gets_two_hypernodes_matched_on_zone_too() -> None:
    nodes = {
        "a": {topology.ZONE_LABEL: "z1", topology.RACK_LABEL: "r1", topology.HOST_LABEL: "a"},
        "b": {topology.ZONE_LABEL: "z2", topology.RACK_LABEL: "r1", topology.HOST_LABEL: "b"},
    }
    objects = hypernodes.generate(nodes, LEVELS)
    assert hypernodes.validate_tree(objects, nodes) == []
    covered = hypernodes.leaves(objects, nodes)
    assert covered == {"z1-r1": {"a"}, "z2-r1": {"b"}, "z1": {"a"}, "z2": {"b"}}
    selector = next(o for o in objects if o["metadata"]["name"] == "z1-r1")["spec"]["members"][0]["selector"]
    assert selector == {"labelMatch": {"matchLabels": {topology.ZONE_LABEL: "z1", topology.RACK_LABEL: "r1"}}}


@pytest.mark.parametrize("mode", ["label", "exact", "regex"], ids=["labelMatch", "exactMatch", "regexMatch"])
def test_every_member_mode_covers_the_same_nodes(mode: hypernodes.MemberMode) -> None:
    nodes = labels_of(topology.TopologySpec(zones=1, racks_per_zone=3, hosts_per_rack=3))
    objects = hypernodes.generate(nodes, LEVELS, mode=mode)
    assert hypernodes.validate_tree(objects, nodes) == []
    assert hypernodes.leaves(objects, nodes)["rack-0-2"] == {"node-0-2-0", "node-0-2-1", "node-0-2-2"}


def test_a_node_missing_a_grouping_label_is_left_out_of_the_whole_tree() -> None:
    nodes = {"a": {topology.ZONE_LABEL: "z", topology.RACK_LABEL: "r"}, "b": {topology.ZONE_LABEL: "z"}}
    groups = hypernodes.groups(nodes, LEVELS)
    assert [(g.tier, g.nodes) for g in groups] == [(1, ("a",)), (2, ("a",))]
    assert hypernodes.leaves(hypernodes.generate(nodes, LEVELS), nodes) == {"r": {"a"}, "z": {"a"}}


def test_a_valid_hypernode_has_no_errors() -> None:
    assert hypernodes.validate(hypernode("h", 1, member(exactMatch={"name": "n1"}), member(regexMatch={"pattern": "^n[0-9]+$"}))) == []


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({"exactMatch": {"name": "n"}, "regexMatch": {"pattern": "n"}}, "exactMatch and regexMatch cannot both be set"),
        ({}, "both exactMatch and regexMatch are empty"),
        ({"exactMatch": {}, "regexMatch": {}}, "both exactMatch and regexMatch are empty"),
        ({"regexMatch": {"pattern": "n[0-9"}}, "is not a valid regex"),
        ({"regexMatch": {"pattern": "^node(?!-gpu)"}}, "is not a valid regex in Go"),
        ({"exactMatch": {"name": "n"}, "labelMatch": {"matchLabels": {"a": "b"}}}, "set only one of"),
    ],
    ids=["both-set", "both-empty", "both-empty-objects", "bad-regex", "go-rejects-lookahead", "exact-and-label"],
)
def test_invalid_selectors_are_refused_with_the_reason(selector: dict[str, Any], message: str) -> None:
    errors = hypernodes.validate(hypernode("h", 1, member(**selector)))
    assert len(errors) == 1 and message in errors[0], errors


def test_label_match_is_refused_for_hypernode_members_and_tier_must_be_a_non_negative_int() -> None:
    obj = hypernode("h", -1, {"type": "HyperNode", "selector": {"labelMatch": {"matchLabels": {"a": "b"}}}})
    errors = hypernodes.validate(obj)
    assert any("tier" in e for e in errors) and any("only allowed for Node members" in e for e in errors)
    assert hypernodes.validate(hypernode("empty", 1)) == ["HyperNode empty: spec.members must not be empty"]


def test_tree_errors_name_the_missing_child_the_tier_order_and_a_node_in_two_racks() -> None:
    nodes = {"n1": {}}
    missing = [hypernode("top", 2, {"type": "HyperNode", "selector": {"exactMatch": {"name": "nope"}}})]
    assert "member HyperNode 'nope' does not exist" in hypernodes.validate_tree(missing, nodes)[0]
    inverted = [
        hypernode("a", 1, {"type": "HyperNode", "selector": {"exactMatch": {"name": "b"}}}),
        hypernode("b", 2, member(exactMatch={"name": "n1"})),
    ]
    assert "not lower" in hypernodes.validate_tree(inverted, nodes)[0]
    twice = [hypernode("a", 1, member(exactMatch={"name": "n1"})), hypernode("b", 1, member(regexMatch={"pattern": "n"}))]
    assert hypernodes.validate_tree(twice, nodes) == ["node n1 is in two tier-1 HyperNodes: a and b"]


def test_a_cycle_is_reported() -> None:
    loop = [
        hypernode("a", 2, {"type": "HyperNode", "selector": {"exactMatch": {"name": "b"}}}),
        hypernode("b", 2, {"type": "HyperNode", "selector": {"exactMatch": {"name": "a"}}}),
    ]
    with pytest.raises(ValueError, match="cycle"):
        hypernodes.leaves(loop, {})
