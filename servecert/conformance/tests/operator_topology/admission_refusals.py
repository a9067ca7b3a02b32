"""Seed 000's admission table: a DGD whose kvCacheTransferTopology cannot be honoured is refused, naming the field.

Every refusal must come from the implementation: the suite's own copy of the DGD CRD carries no
rule for any of these cases (``tests/harness/cluster/test_crds.py`` checks it lets each through),
so an operator whose webhook lacks one of the checks is admitted and fails here.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests

CASES = (
    # id, DGD arguments, fragments the refusal must contain
    Case(
        "cluster-topology-not-found",
        {"dgd": {"cluster_topology": "no-such-topology"}, "names": ("clusterTopologyName", "no-such-topology", "not found")},
    ),
    Case("level-not-a-domain", {"dgd": {"level": "datacenter"}, "names": ("kvCacheTransferTopology.level", "datacenter")}),
    Case("on-a-prefill-component", {"dgd": {"on": "prefill"}, "names": ("kvCacheTransferTopology", "frontend")}),
    Case("on-a-decode-component", {"dgd": {"on": "decode"}, "names": ("kvCacheTransferTopology", "frontend")}),
    # NB: every other type the CRD allows: a webhook that refuses topology on the P/D roles only (the ones that transfer
    # KV) admits these
    Case("on-a-worker-component", {"dgd": {"on": "worker"}, "names": ("kvCacheTransferTopology", "frontend")}),
    Case("on-a-planner-component", {"dgd": {"on": "planner"}, "names": ("kvCacheTransferTopology", "frontend")}),
)


async def check(ctx: TestContext) -> None:
    env = kc.env_of(ctx)
    refusal = await kc.try_create(env, kc.DGD, manifests.dgd("refused", **ctx.params["dgd"]))
    kc.refusal_must_name(refusal, tuple(ctx.params["names"]), f"DGD with {ctx.case.id}")
    # The control: the same DGD, correct, is admitted (so the refusal was about the field).
    accepted = await kc.try_create(env, kc.DGD, manifests.dgd("accepted", level="zone"))
    if accepted is not None:
        raise AssertionError(f"a valid DGD (level zone of ClusterTopology {manifests.CLUSTER_TOPOLOGY}) was refused: {accepted.message}")


TEST = ConformanceTest(
    short_name="OperatorTopologyAdmission",
    description="A DGD naming a missing ClusterTopology, a level outside it, or kvCacheTransferTopology on a non-frontend "
    "component is refused with a message naming the field.",
    features=(features.OPERATOR_TOPOLOGY_ADMISSION,),
    seed=SeedRef(
        "000",
        "4. DGD Spec Extension (v1beta1)",
        "ClusterTopology CR exists and the specified level is a valid domain in the hierarchy",
        note="Also the next bullet (kvCacheTransferTopology only on type: frontend; its cases cover every other type the "
        "CRD allows: prefill, decode, worker, planner) and the admission table under Failure Handling; that the refusal "
        "names the field is the suite's addition.",
    ),
    environments=frozenset({"cluster"}),
    cases=CASES,
    check=check,
)
