"""Seed 000's first admission row: with Grove's ClusterTopology CRD not installed, a DGD asking for topology is refused.

The shared cluster cannot lose the CRD under the other tests, so the case gets a cluster of its
own: an API server with every suite CRD but ``clustertopologies.grove.io``, and the
implementation's operator installed on it. A webhook that fails open when it cannot read the
ClusterTopology (it admits what it cannot check) is the plausible wrong implementation, and so is
one that fails open for ``fallback`` only: each mismatch policy is tried, and omitted. The
control, on the same cluster: a DGD without ``kvCacheTransferTopology`` needs no Grove and must be
admitted, which an operator refusing every DGD there would not do.
"""

from __future__ import annotations

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests

GROVE_CRD = "clustertopologies.grove.io"
POLICIES = (None, "fail", "fallback")
"""Every mismatchPolicy a DGD can carry (None: omitted). The row names none: a webhook that admits fallback because it
is best-effort fails open all the same, since the router's fallback still needs the ClusterTopology's level."""


async def check(ctx: TestContext) -> None:
    async with kc.cluster_without_crds(ctx, frozenset({GROVE_CRD})) as bare:
        for policy in POLICIES:
            refusal = await kc.try_create(bare, kc.DGD, manifests.dgd(f"refused-{policy or 'unset'}", level="zone", policy=policy))
            what = f"DGD with kvCacheTransferTopology (mismatchPolicy {policy or 'omitted'}) on a cluster without {GROVE_CRD}"
            kc.refusal_must_name(refusal, ("ClusterTopology",), what)
        accepted = await kc.try_create(bare, kc.DGD, manifests.dgd("accepted", level=None))
    if accepted is not None:
        raise AssertionError(
            f"a DGD without kvCacheTransferTopology was refused on a cluster without {GROVE_CRD}: {accepted.message}; "
            "only a DGD that asks for topology needs Grove"
        )


TEST = ConformanceTest(
    short_name="OperatorTopologyAdmissionWithoutGrove",
    description="With Grove's ClusterTopology CRD not installed, a DGD with kvCacheTransferTopology is refused at admission "
    "whatever its mismatchPolicy (fail, fallback, omitted); one without it is admitted.",
    features=(features.OPERATOR_TOPOLOGY_ADMISSION,),
    seed=SeedRef(
        "000",
        "Failure Handling",
        "Grove not installed and transferTopology specified |",
        note="The row's behaviour is 'Webhook rejects DGD', for any policy (the row names none). That the refusal names the "
        "ClusterTopology, and that a DGD without topology is still admitted there, are the suite's additions.",
    ),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
)
