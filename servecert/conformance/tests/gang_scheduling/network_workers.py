"""Task-level network topology (seed 002, use case 4): each replica's workers inside one HyperNode, its leader anywhere.

Seed 002's fourth use case is an inference service of "one leader Pod and multiple worker Pods":
"all worker Pods" within "the same network topology domain", while "the leader Pod can be
scheduled to any available node, without network topology constraints", gang-scheduled still.
The InferenceService asks for it with ``roles[].multinode.workerNetworkTopology {mode,
highestTierAllowed}`` (the suite's extension of seed 004's Multinode; seed 002's PodGroup spells
it ``podsNetworkTopology``, Volcano 1.15 a ``subGroupPolicy`` with a ``networkTopology``).

The tree tells the rule from both shortcuts. Four tier-1 HyperNodes (racks) under one tier-2, each
rack one 8-GPU node and one 4-GPU node: room for exactly three pods of 4 GPUs. The service: two
replicas of four pods (a leader and three workers), workers hard at tier 1. Then:

* the rule: each replica's three workers fill one rack, the leaders go elsewhere: every pod bound;
* the topology on the whole replica (leader included): four pods fit no rack, nothing binds;
* the topology ignored: the scheduler spreads the pods over the racks, and both replicas' workers
  each in one rack by chance is what the check would have to be unlucky to see.

Ground truth: the pods' ``spec.nodeName`` and the HyperNodes the suite created; leaders and
workers by seed 004's pod names (``{lws}-0``, ``{lws}-0-{w}``).
"""

from __future__ import annotations

from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.gang_scheduling import _checks as gc
from servecert.conformance.tests.gang_scheduling import _network_topology as nt
from servecert.conformance.utils import kube as kc
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_names as kn

RACKS = 4
REPLICAS = 2
NODE_COUNT = 4
ROLE = "inference"


def racks() -> nt.Tree:
    """Four racks of one 8-GPU and one 4-GPU node (three pods of 4 GPUs each) under one tier-2 HyperNode."""
    nodes = tuple(f"r{r}n{n}" for r in range(RACKS) for n in range(2))
    tree: dict[str, tuple[int, str, tuple[str, ...]]] = {f"rack{r}": (1, "Node", (f"r{r}n0", f"r{r}n1")) for r in range(RACKS)}
    tree["spine"] = (2, "HyperNode", tuple(f"rack{r}" for r in range(RACKS)))
    return nt.Tree("four-racks", nodes, tree, frozenset(f"r{r}n1" for r in range(RACKS)))


def service(env: ClusterEnvironment, name: str, mode: str, tier: int) -> dict[str, Any]:
    container = {"name": "engine", "image": nt.PAUSE_IMAGE, "resources": {"limits": {gc.GPU: str(nt.POD_GPUS)}}}
    role = {
        "name": ROLE,
        "componentType": "worker",
        "replicas": REPLICAS,
        "multinode": {"nodeCount": NODE_COUNT, "workerNetworkTopology": {"mode": mode, "highestTierAllowed": tier}},
        "template": {"spec": gc.place({"containers": [container]}, env)},
    }
    return {"apiVersion": f"{kn.IS_GROUP}/{kn.IS_VERSION}", "kind": kn.IS_KIND, "metadata": {"name": name}, "spec": {"roles": [role]}}


def workers_of(name: str, replica: int) -> set[str]:
    """Seed 004's worker pod names of one replica (``{lws}-0-{w}``, w from 1)."""
    return {f"{name}-{ROLE}-{replica}-0-{w}" for w in range(1, NODE_COUNT)}


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    mode, tier = str(ctx.params["mode"]), int(ctx.params["tier"])
    installed = await nt.install(env, nt.tree_objects(env, racks()), ready_s=t.gang_nodes_ready_s)
    name = "workers"
    what = f"{mode} workerNetworkTopology at tier {tier}: {REPLICAS} replicas of a leader and {NODE_COUNT - 1} workers, racks of 3"
    await kc.create(env, kc.ISVC, service(env, name, mode, tier))
    placed = await nt.all_bound(env, name, REPLICAS * NODE_COUNT, t.gang_bound_s, f"{what} (the leader may go to any node)")
    for replica in range(REPLICAS):
        workers = workers_of(name, replica)
        missing = workers - set(placed)
        if missing:
            raise AssertionError(f"{what}: no pods named {sorted(missing)} (seed 004's names) among {sorted(placed)}")
        nt.placement_must_fit_tier(installed, {p: placed[p] for p in workers}, tier, f"{what}: the workers of replica {replica}")


TEST = ConformanceTest(
    short_name="NetworkTopologyWorkers",
    description="A role's workerNetworkTopology puts each replica's workers inside one HyperNode of the tier while its leader "
    "goes anywhere: on racks with room for the workers but not the whole replica, every pod binds, workers together.",
    features=(features.NETWORK_TOPOLOGY_WORKERS,),
    environments=frozenset({"cluster"}),
    cases=(Case("hard-tier1", {"mode": "hard", "tier": 1}),),
    check=check,
    seed=SeedRef(
        "002",
        "Use Case 4",
        "5. The leader Pod can be scheduled to any available node, without network topology constraints",
        note="The seed names the use case and the PodGroup field (podsNetworkTopology); the InferenceService field is the "
        "suite's extension of seed 004's Multinode.",
    ),
)
