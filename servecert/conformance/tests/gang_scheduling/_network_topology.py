"""Seed 002's network trees as data, made real per case, and gangs asking for a place inside them.

Data flow::

    Tree (SPINE_LEAF, ROCE_NVLINK: the seed's two examples; or generated from node labels)
        -> install(env, tree)    the case's nodes (8 GPUs; the tree's ``small`` ones 4)
                                 + HyperNodes named <namespace>-<name>
        -> Installed.leaves      HyperNode -> the nodes it covers (the suite's own resolution)
    gang(env, ...)               an InferenceService: one replica of N pods of 4 GPUs, schedulingStrategy.networkTopology
        -> the implementation's operator: its PodGroup (networkTopology) and pods; its gang scheduler places them
        -> placement             pod -> node, read from the pods (spec.nodeName)
        -> tightest(...)         the lowest-tier HyperNode holding every placed pod

Why 4-GPU pods on 8-GPU nodes: each node holds two pods, so a scheduler that spreads pods across
nodes is caught as easily as one that ignores the tree. Why one 4-GPU node in every tier-1
domain but the last: the domains differ in size, so a gang the size of the largest fits only
it. HyperNodes are cluster-scoped; each case's carry the namespace in their names and are
deleted with the case.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.rest import ApiException

from servecert.conformance.tests.gang_scheduling import _checks as gc
from servecert.conformance.utils import kube as kc
from servecert.harness.cluster import hypernodes, kube
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_names as kn
from servecert.protocol import waiting

POD_GPUS = 4
SMALL_NODE_GPUS = 4
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
GONE_PROBES = 4  # looks 0.25 s apart with no pod of a removed gang: a reconcile in flight has had its say
HN_GROUP, HN_VERSION, HN_PLURAL = hypernodes.GROUP, hypernodes.VERSION, hypernodes.PLURAL


@dataclass(frozen=True)
class Tree:
    """Local node names and HyperNodes: name -> (tier, member type, member names); nodes with fewer GPUs than 8."""

    name: str
    nodes: tuple[str, ...]
    hypernodes: Mapping[str, tuple[int, str, tuple[str, ...]]]
    small: frozenset[str] = frozenset()
    """Nodes of ``SMALL_NODE_GPUS`` (one pod): every tier-1 domain but the last has one, so one domain is largest."""


def _pairs(prefix: str, nodes: Sequence[str], size: int) -> dict[str, tuple[str, ...]]:
    return {f"{prefix}{i}": tuple(nodes[i * size : (i + 1) * size]) for i in range(len(nodes) // size)}


def _spine_leaf() -> Tree:
    """Seed 002, example 1: 8 nodes, four tier-1 switches of 2, two tier-2 of 2 switches, one tier-3."""
    nodes = tuple(f"node{i}" for i in range(8))
    tree: dict[str, tuple[int, str, tuple[str, ...]]] = {s: (1, "Node", ns) for s, ns in _pairs("s", nodes, 2).items()}
    tree |= {"s4": (2, "HyperNode", ("s0", "s1")), "s5": (2, "HyperNode", ("s2", "s3")), "s6": (3, "HyperNode", ("s4", "s5"))}
    return Tree("spine-leaf", nodes, tree, _first_of_each_but_last(tree))


def _roce_nvlink() -> Tree:
    """Seed 002, example 2: two RoCE networks (tier 2) of two NVLink networks (tier 1) of 4 hosts, no common root.

    The seed's prose gives each NVLink network 4 hosts (its YAML lists fewer, in a broken list).
    """
    nodes = tuple(f"node{i}" for i in range(1, 17))
    tree: dict[str, tuple[int, str, tuple[str, ...]]] = {
        n: (1, "Node", ns) for n, ns in _pairs("nvlink-network", nodes, 4).items()
    }
    tree |= {
        "roce-network0": (2, "HyperNode", ("nvlink-network0", "nvlink-network1")),
        "roce-network1": (2, "HyperNode", ("nvlink-network2", "nvlink-network3")),
    }
    return Tree("roce-nvlink", nodes, tree, _first_of_each_but_last(tree))


def _first_of_each_but_last(tree: Mapping[str, tuple[int, str, tuple[str, ...]]]) -> frozenset[str]:
    """The first node of every tier-1 HyperNode but the last: those get ``SMALL_NODE_GPUS``.

    With every node alike, any tier-1 domain holds a gang of its size, and a scheduler blind to
    the tree that packs pods onto the first nodes lands in one by chance (seen: the default
    scheduler passed NetworkTopologySoft in a CI run). With one domain larger than the others,
    and the larger domains of each tier last, a gang that only fits the largest one is placed
    there by the tree, not by luck.
    """
    tier1 = [members for tier, kind, members in tree.values() if tier == 1 and kind == "Node"]
    return frozenset(members[0] for members in tier1[:-1])


SPINE_LEAF = _spine_leaf()
ROCE_NVLINK = _roce_nvlink()
TREES: dict[str, Tree] = {t.name: t for t in (SPINE_LEAF, ROCE_NVLINK)}


@dataclass
class Installed:
    """A tree made real for one case: global names, what each HyperNode covers, and each one's tier."""

    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    objects: list[dict[str, Any]] = field(default_factory=list)
    gpus: dict[str, int] = field(default_factory=dict)
    """GPUs of the nodes that do not have ``gc.GPUS_PER_NODE``."""

    @property
    def leaves(self) -> dict[str, set[str]]:
        return hypernodes.leaves(self.objects, self.nodes)

    @property
    def tiers(self) -> dict[str, int]:
        return {h["metadata"]["name"]: int(h["spec"]["tier"]) for h in self.objects}

    def slots(self, node: str) -> int:
        """Pods (of POD_GPUS) that fit on ``node``."""
        return self.gpus.get(node, gc.GPUS_PER_NODE) // POD_GPUS

    def capacity(self, tier: int, pick: Any = min) -> int:
        """Pods (of POD_GPUS) that fit in the smallest (``pick=min``) or largest HyperNode of ``tier``."""
        leaves = self.leaves
        return int(pick(sum(self.slots(n) for n in leaves[h]) for h, t in self.tiers.items() if t == tier))

    def holding(self, tier: int, pods: int) -> list[str]:
        """The HyperNodes of ``tier`` with room for ``pods``."""
        leaves = self.leaves
        return sorted(h for h, t in self.tiers.items() if t == tier and sum(self.slots(n) for n in leaves[h]) >= pods)

    def tightest(self, placed: set[str]) -> tuple[str, int] | None:
        """The lowest-tier HyperNode covering every node in ``placed`` (None: no HyperNode does)."""
        covering = [(t, h) for h, t in self.tiers.items() if placed <= self.leaves[h]]
        return (min(covering)[1], min(covering)[0]) if covering else None


def tree_objects(env: ClusterEnvironment, tree: Tree) -> Installed:
    prefix = env.namespace
    out = Installed({f"{prefix}-{n}": {} for n in tree.nodes}, gpus={f"{prefix}-{n}": SMALL_NODE_GPUS for n in tree.small})
    for name, (tier, kind, members) in tree.hypernodes.items():
        selectors = [{"type": kind, "selector": {"exactMatch": {"name": f"{prefix}-{m}"}}} for m in members]
        out.objects.append(
            {
                "apiVersion": f"{HN_GROUP}/{HN_VERSION}",
                "kind": "HyperNode",
                "metadata": {"name": f"{prefix}-{name}"},
                "spec": {"tier": tier, "members": selectors},
            }
        )
    return out


async def install(env: ClusterEnvironment, installed: Installed, *, ready_s: float) -> Installed:
    """Create the nodes (with their labels; Ready within ``ready_s``) and then the HyperNodes; all deleted when the case closes."""
    nodes = [gc.case_node(env, n, labels, installed.gpus.get(n, gc.GPUS_PER_NODE)) for n, labels in installed.nodes.items()]
    await asyncio.gather(*(kc.add_node(env, node) for node in nodes))
    await gc.nodes_ready(env, list(installed.nodes), ready_s)
    for obj in installed.objects:
        await create_hypernode(env, obj)
    return installed


async def create_hypernode(env: ClusterEnvironment, obj: Mapping[str, Any]) -> None:
    name = obj["metadata"]["name"]
    await asyncio.to_thread(kube.create_cluster_object, env.api, kube.HYPERNODE, obj)
    env.cleanups.append(lambda: kube.delete_cluster_object(env.api, kube.HYPERNODE, name))


async def try_create_hypernode(env: ClusterEnvironment, obj: Mapping[str, Any]) -> kc.Refusal | None:
    try:
        await create_hypernode(env, obj)
    except ApiException as exc:
        if exc.status is None or not 400 <= exc.status < 500:
            raise
        return kc.Refusal(int(exc.status), str(exc.body))
    return None


def service(env: ClusterEnvironment, name: str, pods: int, mode: str, tier: int) -> dict[str, Any]:
    """An InferenceService asking for a gang of ``pods`` inside the tree: one worker role, one replica of ``pods`` nodes
    (``POD_GPUS`` a pod, on the case's nodes), with ``schedulingStrategy.networkTopology {mode, highestTierAllowed: tier}``.

    The implementation turns it into a PodGroup and pods itself; the suite judges where the pods land. No scheduler is
    named: the implementation's gang scheduler decides.
    """
    container = {"name": "worker", "image": PAUSE_IMAGE, "resources": {"limits": {gc.GPU: str(POD_GPUS)}}}
    role = {
        "name": "worker",
        "componentType": "worker",
        "replicas": 1,
        "multinode": {"nodeCount": pods},
        "template": {"spec": gc.place({"containers": [container]}, env)},
    }
    strategy = {"networkTopology": {"mode": mode, "highestTierAllowed": tier}}
    return {
        "apiVersion": f"{kn.IS_GROUP}/{kn.IS_VERSION}",
        "kind": kn.IS_KIND,
        "metadata": {"name": name},
        "spec": {"roles": [role], "schedulingStrategy": strategy},
    }


async def gang(env: ClusterEnvironment, name: str, pods: int, mode: str, tier: int) -> None:
    """Deploy ``service(...)`` through the implementation's operator."""
    await kc.create(env, kc.ISVC, service(env, name, pods, mode, tier))


async def placement(env: ClusterEnvironment, gang_name: str) -> dict[str, str]:
    """pod -> node ('' when unbound) for the gang's pods."""
    found = await kc.pods(env, f"{kn.IS_SERVICE_LABEL}={gang_name}")
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "" for p in found}


async def all_bound(env: ClusterEnvironment, gang_name: str, count: int, timeout_s: float, what: str) -> dict[str, str]:
    async def probe() -> dict[str, str] | None:
        placed = await placement(env, gang_name)
        return placed if len(placed) == count and all(placed.values()) else None

    try:
        found: dict[str, str] = await kc.wait_for(probe, timeout_s, what)
    except AssertionError:
        placed = await placement(env, gang_name)
        raise AssertionError(
            f"{what}: {sum(1 for n in placed.values() if n)}/{count} pods bound after {timeout_s:g}s; the gang fits and must be placed"
        ) from None
    return found


async def none_bound_for(env: ClusterEnvironment, gang_name: str, seconds: float, what: str) -> None:
    """For ``seconds``, no pod of the gang is bound (it must wait whole)."""
    async for _ in waiting.holding_async(seconds, 0.25):
        placed = await placement(env, gang_name)
        bound = sorted(f"{p}->{n}" for p, n in placed.items() if n)
        if bound:
            raise AssertionError(f"{what}: {len(bound)}/{len(placed)} pods bound ({', '.join(bound)}); the gang must stay Pending whole")


async def remove_gang(env: ClusterEnvironment, gang_name: str, timeout_s: float) -> None:
    """Delete the gang's InferenceService and its pods, and wait until no pod of the gang is left (their room is free).

    Pods still there are deleted again at each look, and none must be seen for ``GONE_PROBES``
    looks in a row: a reconcile the operator began before the InferenceService was deleted may
    make them anew after the suite's delete, and those would otherwise wait for the garbage
    collector, that is for the operator to drop its finalizer: the reference's kept it 60 s when
    its timer was mid-reconcile (kopf's cancellation polling, ``servecert.reference_impl.operator.run``), and
    CI failed here twice. The InferenceService itself need not be gone: this is the suite's cleanup
    between steps, not a rule.
    """
    await asyncio.to_thread(kube.delete_object, env.api, kc.ISVC, env.namespace, gang_name)
    selector = f"{kn.IS_SERVICE_LABEL}={gang_name}"

    async def gone() -> bool:
        if await placement(env, gang_name):
            await asyncio.to_thread(kube.delete_pods, env.api, env.namespace, selector, grace_period_seconds=0)
            return False
        return True

    await waiting.until_async(gone, timeout_s=timeout_s, what=f"pods of gang {gang_name} deleted", interval_s=0.25, consecutive=GONE_PROBES)


def placement_must_fit_tier(installed: Installed, placed: Mapping[str, str], tier: int, what: str) -> tuple[str, int]:
    """Every pod inside one HyperNode of tier <= ``tier``; returns that HyperNode and its tier."""
    nodes = set(placed.values())
    found = installed.tightest(nodes)
    if found is None or found[1] > tier:
        where = "no common HyperNode" if found is None else f"only {found[0]} (tier {found[1]}) holds them all"
        raise AssertionError(f"{what}: pods on {sorted(nodes)}: {where}; they must share one HyperNode of tier <= {tier}")
    return found
