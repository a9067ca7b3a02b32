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

Racks of two (one 8-GPU node each) hold fewer pods than a replica has workers: there ``hard`` must
leave every worker Pending (for ``gang_bound_s``, the suite's number: as long as the soft case is
given to bind the same pods on the same racks) and ``soft`` must bind the
whole service across racks, so an operator that writes one mode whatever the spec says fails one
of the two. That soft binds across domains when none holds the workers is the suite's reading of
the API's "cross network boundaries under certain conditions", as in ``NetworkTopologySoft``.

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
from servecert.protocol import waiting

RACKS = 4
REPLICAS = 2
NODE_COUNT = 4
ROLE = "inference"


def racks(room: int) -> nt.Tree:
    """Four racks under one tier-2 HyperNode, each with room for ``room`` pods of 4 GPUs: 3 (an 8-GPU and a 4-GPU node, the
    workers of a replica) or 2 (one 8-GPU node, fewer than a replica's workers)."""
    if room not in (2, 3):
        raise ValueError(f"racks of room {room}: only 2 or 3")
    per_rack = room - 1  # NB: 3 = an 8-GPU node and a 4-GPU one; 2 = one 8-GPU node
    nodes = tuple(f"r{r}n{n}" for r in range(RACKS) for n in range(per_rack))
    tree: dict[str, tuple[int, str, tuple[str, ...]]] = {
        f"rack{r}": (1, "Node", tuple(f"r{r}n{n}" for n in range(per_rack))) for r in range(RACKS)
    }
    tree["spine"] = (2, "HyperNode", tuple(f"rack{r}" for r in range(RACKS)))
    small = frozenset(f"r{r}n1" for r in range(RACKS)) if room == 3 else frozenset()
    return nt.Tree(f"four-racks-of-{room}", nodes, tree, small)


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


async def workers_must_stay_pending(env: ClusterEnvironment, name: str, seconds: float, what: str) -> None:
    """For ``seconds``, no worker pod of any replica is bound: hard means they wait for a HyperNode that holds them."""
    workers = set().union(*(workers_of(name, r) for r in range(REPLICAS)))
    async for _ in waiting.holding_async(seconds, 0.25):
        placed = await nt.placement(env, name)
        bound = sorted(f"{p}->{n}" for p, n in placed.items() if n and p in workers)
        if bound:
            raise AssertionError(f"{what}: workers bound across racks ({', '.join(bound)}); hard must leave them Pending")


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    mode, tier, room = str(ctx.params["mode"]), int(ctx.params["tier"]), int(ctx.params["room"])
    installed = await nt.install(env, nt.tree_objects(env, racks(room)), ready_s=t.gang_nodes_ready_s)
    name = "workers"
    what = f"{mode} workerNetworkTopology at tier {tier}: {REPLICAS} replicas of a leader and {NODE_COUNT - 1} workers, racks of {room}"
    await kc.create(env, kc.ISVC, service(env, name, mode, tier))
    if room < NODE_COUNT - 1 and mode == "hard":
        # NB: watched as long as a gang that fits is given to bind (gang_bound_s), not gang_settle_s: a soft gang on these
        # racks must bind within that (the soft case), so a hard one left alone that long is one the scheduler held. Over
        # gang_settle_s (5 s) alone, a busy make test's Volcano had not yet bound an operator's soft-for-hard workers.
        await workers_must_stay_pending(env, name, max(t.gang_bound_s, t.gang_settle_s), f"{what} (no rack holds a replica's workers)")
        return
    placed = await nt.all_bound(env, name, REPLICAS * NODE_COUNT, t.gang_bound_s, f"{what} (the leader may go to any node)")
    if room < NODE_COUNT - 1:
        return  # NB: soft, and no rack holds the workers: bound across racks, as soft allows (any placement will do)
    for replica in range(REPLICAS):
        workers = workers_of(name, replica)
        missing = workers - set(placed)
        if missing:
            raise AssertionError(f"{what}: no pods named {sorted(missing)} (seed 004's names) among {sorted(placed)}")
        nt.placement_must_fit_tier(installed, {p: placed[p] for p in workers}, tier, f"{what}: the workers of replica {replica}")


TEST = ConformanceTest(
    short_name="NetworkTopologyWorkers",
    description="A role's workerNetworkTopology puts each replica's workers inside one HyperNode of the tier while its leader "
    "goes anywhere: on racks with room for the workers but not the whole replica, every pod binds, workers together; on "
    "racks too small for the workers, hard leaves them Pending and soft binds them across racks.",
    features=(features.NETWORK_TOPOLOGY_WORKERS,),
    environments=frozenset({"cluster"}),
    cases=(
        Case("hard-tier1", {"mode": "hard", "tier": 1, "room": 3}),
        # NB: racks too small for a replica's workers, where hard and soft decide differently
        Case("hard-tier1-no-rack-holds-them", {"mode": "hard", "tier": 1, "room": 2}),
        Case("soft-tier1-no-rack-holds-them", {"mode": "soft", "tier": 1, "room": 2}),
    ),
    check=check,
    seed=SeedRef(
        "002",
        "Use Case 4",
        "5. The leader Pod can be scheduled to any available node, without network topology constraints",
        note="The seed names the use case and the PodGroup field (podsNetworkTopology); the InferenceService field is the "
        "suite's extension of seed 004's Multinode.",
    ),
)
