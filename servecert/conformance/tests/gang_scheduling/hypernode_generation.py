"""HyperNodes generated from node labels (seed 002's topology generator) are accepted and honoured; bad selectors refused.

The case's 8 nodes carry zone, rack and host labels (2 zones x 2 racks x 2 hosts). The suite's
generator (``servecert.harness.cluster.hypernodes``, the one the embedded cluster uses) turns them into
the tier tree — racks tier 1, zones tier 2 — with members by exact name, by regex or by label,
one case each. The cluster must accept every object, and its scheduler must honour them: a
hard tier-1 gang the size of a rack lands on nodes sharing one rack label, a hard tier-2 gang the
size of a zone on nodes sharing one zone label (ground truth: the labels the suite set).

Seed 002's admission rules: a member selector with neither exactMatch nor regexMatch, or with
both, is refused by the cluster (on the embedded cluster: Volcano's own CRD validation rules,
enforced by the API server). The third rule — a regexMatch pattern must be a valid Go regular
expression — is Volcano's webhook's, which the embedded cluster does not run; the suite's
generator checks it (tests/harness/cluster), not this test.
"""

from __future__ import annotations

from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.gang_scheduling import _network_topology as nt
from servecert.conformance.utils import kube as kc
from servecert.harness.cluster import hypernodes, topology

ZONES, RACKS, HOSTS = 2, 2, 2
BAD_SELECTORS: dict[str, dict[str, Any]] = {
    "neither exactMatch nor regexMatch": {},
    "both exactMatch and regexMatch": {"exactMatch": {"name": "x"}, "regexMatch": {"pattern": "^x$"}},
}


def labelled_nodes(ns: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for z in range(ZONES):
        for r in range(RACKS):
            for h in range(HOSTS):
                name = f"{ns}-z{z}-r{r}-h{h}"
                out[name] = {topology.ZONE_LABEL: f"{ns}-z{z}", topology.RACK_LABEL: f"{ns}-z{z}-r{r}", topology.HOST_LABEL: name}
    return out


async def check(ctx: TestContext) -> None:
    env, t, mode = kc.env_of(ctx), ctx.timeouts, ctx.params["members"]
    labels = labelled_nodes(env.namespace)
    installed = nt.Installed(labels, hypernodes.generate(labels, topology.LEVELS, mode))
    await nt.install(env, installed, ready_s=t.gang_nodes_ready_s)
    for tier, key in ((1, topology.RACK_LABEL), (2, topology.ZONE_LABEL)):
        pods = installed.capacity(tier, min)
        what = f"generated tree ({mode} members): hard, highestTierAllowed {tier}, {pods} pods"
        await nt.gang(env, f"tier{tier}", pods, "hard", tier)
        placed = await nt.all_bound(env, f"tier{tier}", pods, t.gang_bound_s, what)
        values = {labels[node][key] for node in placed.values()}
        if len(values) != 1:
            raise AssertionError(f"{what}: pods on nodes of {key} {sorted(values)}; the generated tree puts them in one")
        await nt.remove_gang(env, f"tier{tier}", t.operator_reconcile_s)
    for reason, selector in BAD_SELECTORS.items():
        bad = {
            "apiVersion": f"{nt.HN_GROUP}/{nt.HN_VERSION}",
            "kind": "HyperNode",
            "metadata": {"name": f"{env.namespace}-bad-{len(selector)}"},
            "spec": {"tier": 1, "members": [{"type": "Node", "selector": selector}]},
        }
        refusal = await nt.try_create_hypernode(env, bad)
        kc.refusal_must_name(refusal, ("ExactMatch", "RegexMatch"), f"a HyperNode member with {reason}")


TEST = ConformanceTest(
    short_name="HyperNodeGeneration",
    description="HyperNodes generated from zone/rack/host labels (exact, regex or label members) are accepted and "
    "honoured by hard placement; member selectors with neither or both matches are refused.",
    features=(features.HYPERNODE_GENERATION,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(f"{mode}-members", {"members": mode}) for mode in ("exact", "regex", "label")),
    check=check,
    seed=SeedRef(
        "002",
        "network topology generation and update",
        "a tool to generate network topology CR by analyzing labels, system file or API of HW vendor. "
        "The community will offer a tool to generate CR by label.",
        note="Racks tier 1, zones tier 2 and exact/regex/label members are the suite's generator's choices; refusing "
        "selectors with neither or both matches is the Webhook section's rule (the Go-regex rule is not checked here).",
    ),
)
