"""Soft network topology (seed 002): the tightest domain that fits, and otherwise spread rather than wait.

On each of the seed's two trees, with mode soft and highestTierAllowed 1:
* a gang the size of the largest tier-1 domain lands inside it (the only one that holds it);
* a gang the size of the largest tier-2 domain, larger than every tier-1 domain, lands inside it
  (the tightest, and only, domain that holds it);
* a gang larger than every tier-2 domain is still bound, whole, across domains (soft never waits
  for a domain that cannot exist).
Each gang is an InferenceService asking for ``schedulingStrategy.networkTopology``, deployed through
the implementation's operator (``_network_topology.service``), and removed before the next. The
domains differ in size, the largest last (``Tree.small``): with equal domains, a scheduler blind
to the tree that packs pods onto the first nodes lands in one by chance; the default scheduler
passed this test that way once in CI.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.gang_scheduling import _network_topology as nt
from servecert.conformance.utils import kube as kc


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    tree = nt.TREES[ctx.params["tree"]]
    installed = await nt.install(env, nt.tree_objects(env, tree), ready_s=t.gang_nodes_ready_s)
    steps = (
        ("tier1", installed.capacity(1, max), 1),
        ("tier2", installed.capacity(2, max), 2),
        ("spread", installed.capacity(2, max) + 1, None),
    )
    for name, pods, tightest in steps:
        where = f" (fit only {installed.holding(tightest, pods)})" if tightest else " (more than any tier-2 domain)"
        what = f"{tree.name}: soft, {pods} pods{where}"
        await nt.gang(env, name, pods, "soft", 1)
        placed = await nt.all_bound(env, name, pods, t.gang_bound_s, what)
        if tightest is not None:
            nt.placement_must_fit_tier(installed, placed, tightest, what)
        await nt.remove_gang(env, name, t.operator_reconcile_s)


TEST = ConformanceTest(
    short_name="NetworkTopologySoft",
    description="A soft networkTopology gang lands in the tightest HyperNode that holds it (tier 1, else tier 2) and is "
    "bound across domains when none does.",
    features=(features.NETWORK_TOPOLOGY_SOFT,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(tree, {"tree": tree}) for tree in nt.TREES),
    check=check,
    seed=SeedRef(
        "002",
        "Use Case 1",
        "Schedule the job, prefer scheduling all pods to one tier1 topology zone, if not enough nodes, "
        "try to schedule all the pods to one tier2 topology zone.",
        note="The API defines soft only as letting jobs 'cross network boundaries under certain conditions'; tightest "
        "domain first is this use case's, binding across domains when no tier-2 domain holds the gang is the suite's reading.",
    ),
)
