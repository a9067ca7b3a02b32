"""Seed 000: topology labels are patched onto worker pods after binding, from their node, and reach the engine.

The workers ask for an extended resource only a node the suite creates later has, so they stay
unbound for ``operator_unbound_hold_s``: an operator labelling pods before binding is seen doing
it. The new node's zone and rack are the test's own, so labels copied from any other node are wrong.
"""

from __future__ import annotations

import asyncio

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects


async def check(ctx: TestContext) -> None:
    env = kc.env_of(ctx)
    levels = await kc.cluster_topology_levels(env, manifests.CLUSTER_TOPOLOGY)
    node_name = f"{env.namespace}-node"
    resource = kc.hold_resource(env)
    dgd = manifests.dgd("labels", level="zone", prefill=2, decode=2)
    for component in dgd["spec"]["components"][1:]:
        component["resources"] = {"limits": {resource: "1"}, "requests": {resource: "1"}}
    selector = f"{kn.DGD_NAME_LABEL}=labels,{kn.COMPONENT_TYPE_LABEL} in (prefill,decode)"
    history = kc.PodHistory(env).start()
    try:
        await kc.create(env, kc.DGD, dgd)
        await kc.wait_for(lambda: _count(env, selector, 4), ctx.timeouts.operator_reconcile_s, "the DGD's 4 worker pods")
        await asyncio.sleep(ctx.timeouts.operator_unbound_hold_s)  # the workers cannot be bound yet: no node has the resource
        await kc.add_node(env, kc.fake_node(node_name, resource))

        async def labelled() -> list[kube_objects.Pod]:
            found = await kc.pods(env, selector)
            done = len(found) == 4 and all(p["spec"].get("nodeName") and len(kc.topology_labels(p)) == len(levels) for p in found)
            return found if done else []

        workers = await kc.wait_for(
            labelled, ctx.timeouts.operator_reconcile_s, "4 worker pods bound and labelled with every topology level"
        )

        async def started() -> bool:  # NB: the pod runner publishes a pod's IP when it starts it
            return all(kube_objects.status_of(p).get("podIP") for p in await kc.pods(env, selector))

        # NB: projecting the labels into the engines' files is the kubelet's part (here the suite's pod runner), and a
        # loaded machine delays it: the pod runner once started these pods 30 s after the operator had labelled them
        # (make test of 59534ad). Pod start-up is paced by pods_ready_s, never by the operator's bound.
        await kc.wait_for(started, ctx.timeouts.pods_ready_s, "the kubelet (the suite's pod runner) to start the 4 worker pods")

        async def files_written() -> bool:
            return all(kc.runner_files(env, p, kn.TOPOLOGY_VOLUME) == kc.topology_labels(p) for p in await kc.pods(env, selector))

        await kc.wait_for(files_written, ctx.timeouts.operator_reconcile_s, "the engines' projected topology files equal to their labels")
    finally:
        history.stop()
    early = [v["metadata"]["name"] for v in history.versions if kc.topology_labels(v) and not (v.get("spec") or {}).get("nodeName")]
    if early:
        raise AssertionError(f"topology labels were set before the pod was bound (seen on {sorted(set(early))})")
    if not history.versions:
        raise AssertionError("the suite's watch saw no pod versions; cannot judge when labels appeared")
    node_labels = await kc.nodes(env)
    for pod in workers:
        expected = {
            domain: node_labels[pod["spec"]["nodeName"]][key] for domain, key in levels if key in node_labels[pod["spec"]["nodeName"]]
        }
        if kc.topology_labels(pod) != expected:
            raise AssertionError(
                f"pod {pod['metadata']['name']} on {pod['spec']['nodeName']}: labels {kc.topology_labels(pod)}; its node's "
                f"domains are {expected}"
            )


TEST = ConformanceTest(
    short_name="OperatorTopologyLabelsAfterBinding",
    description="grove.io/topology.* labels appear on worker pods only once bound, equal their node's domains, and the "
    "engine's files carry the same values.",
    features=(features.OPERATOR_TOPOLOGY_LABELS,),
    seed=SeedRef(
        "000",
        "1a. Grove controller patches pod labels post-scheduling",
        "After a pod is scheduled to a node, the Grove controller observes the pod, reads the scheduled node's labels, "
        "resolves topology domains from the referenced ClusterTopology CR, and patches the pod with labels for each topology level:",
        note="The seed gives this to Grove; the suite asks it of the operator under test, and checks the engine's files carry "
        "the same values.",
    ),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
)


async def _count(env: ClusterEnvironment, selector: str, n: int) -> bool:
    return len(await kc.pods(env, selector)) == n
