"""Seed 002's two trees as NetworkTopologySoft installs them: one domain per tier holds each soft gang, and a scheduler
blind to the tree that packs onto the first nodes (what the default scheduler was seen doing) lands outside it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from servecert.conformance.tests.gang_scheduling import _network_topology as nt


def installed(tree: nt.Tree) -> nt.Installed:
    env: Any = SimpleNamespace(namespace="ns")
    return nt.tree_objects(env, tree)


def packed_in_order(inst: nt.Installed, pods: int) -> set[str]:
    """Nodes a scheduler fills one after another, in name order, ignoring the tree."""
    used: set[str] = set()
    for node in sorted(inst.nodes, key=lambda n: int(n.rpartition("node")[2])):
        if pods <= 0:
            break
        used.add(node)
        pods -= inst.slots(node)
    return used


@pytest.mark.parametrize("tree", list(nt.TREES.values()), ids=list(nt.TREES))
def test_each_soft_gang_fits_one_domain_of_its_tier_and_first_nodes_packing_misses_it(tree: nt.Tree) -> None:
    inst = installed(tree)
    tier1, tier2 = inst.capacity(1, max), inst.capacity(2, max)
    assert len(inst.holding(1, tier1)) == 1 and tier2 > tier1 and len(inst.holding(2, tier2)) == 1
    for tier, pods in ((1, tier1), (2, tier2)):
        tightest = inst.tightest(packed_in_order(inst, pods))
        assert tightest is None or tightest[1] > tier, (tier, pods, tightest)  # NB: roce-nvlink has no root


def test_the_smaller_nodes_are_the_first_of_every_tier1_domain_but_the_last() -> None:
    assert nt.SPINE_LEAF.small == {"node0", "node2", "node4"}
    assert nt.ROCE_NVLINK.small == {"node1", "node5", "node9"}
    inst = installed(nt.SPINE_LEAF)
    assert (inst.capacity(1, min), inst.capacity(1, max), inst.capacity(2, min), inst.capacity(2, max)) == (3, 4, 6, 7)
