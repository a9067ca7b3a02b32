"""Hard network topology (seed 002): a gang lands inside one HyperNode of tier <= highestTierAllowed, or waits whole.

On each of the seed's two trees (the 8-node spine-leaf tree; two RoCE networks of NVLink groups),
for highestTierAllowed 1 and 2: a gang exactly the size of the smallest domain of that tier
(and, for tier 2, larger than any tier-1 domain) must be bound inside one HyperNode of that tier
or lower; removed again, a gang one pod larger than the largest domain of that tier must stay
Pending, every pod of it, for ``gang_settle_s`` — though the case's nodes could hold it spread.
Each gang is an InferenceService asking for ``schedulingStrategy.networkTopology`` (``_network_topology.service``):
the implementation's operator must carry it to its PodGroup, so the verdict is the implementation's, not the
scheduler's alone. Ground truth: the pods' ``spec.nodeName`` and the HyperNodes the suite created.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.gang_scheduling import _network_topology as nt
from servecert.conformance.utils import kube as kc


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    tree, tier = nt.TREES[ctx.params["tree"]], int(ctx.params["tier"])
    installed = await nt.install(env, nt.tree_objects(env, tree), ready_s=t.gang_nodes_ready_s)

    fits = installed.capacity(tier, min)
    what = f"{tree.name}: hard, highestTierAllowed {tier}, {fits} pods (fills the smallest tier-{tier} domain)"
    await nt.gang(env, "fits", fits, "hard", tier)
    placed = await nt.all_bound(env, "fits", fits, t.gang_bound_s, what)
    nt.placement_must_fit_tier(installed, placed, tier, what)
    await nt.remove_gang(env, "fits", t.operator_reconcile_s)

    over = installed.capacity(tier, max) + 1
    what = f"{tree.name}: hard, highestTierAllowed {tier}, {over} pods (one more than any tier-{tier} domain holds)"
    await nt.gang(env, "over", over, "hard", tier)
    await nt.none_bound_for(env, "over", t.gang_settle_s, what)


TEST = ConformanceTest(
    short_name="NetworkTopologyHard",
    description="A hard networkTopology gang lands inside one HyperNode of tier <= highestTierAllowed (1 or 2) on seed "
    "002's two trees, and one too big for any such domain stays Pending whole.",
    features=(features.NETWORK_TOPOLOGY_HARD,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(f"{tree}-tier{tier}", {"tree": tree, "tier": tier}) for tree in nt.TREES for tier in (1, 2)),
    check=check,
    seed=SeedRef(
        "002",
        "Volcano Job sample",
        "example: hard, with highest-tier-allowed: 1, means for each job-foo, scheduler needs to find a tier1 to run all the job-foo pods.",
        note="The seed's example is tier 1; the suite also checks tier 2, and reads hard ('a strict network topology "
        "constraint that jobs must adhere to') as staying Pending whole when no such HyperNode holds the gang.",
    ),
)
