"""On a cluster the planner scales its own DGD's prefill and decode components, found by type, and nothing else.

Seed 003's KubernetesConnector "Directly PATCHes the DGD resource to update replica counts", "Uses
DYN_PARENT_DGD_K8S_NAME to find its parent DGD (injected by operator)" and "Resolves services by
subComponentType field (prefill/decode), with fallback to legacy component names". The scenario is
the x4 step, which needs more workers of both components. Two shortcuts would scale something:

* the DGD's worker components are named ``ctx`` (type prefill) and ``gen`` (type decode), and
  beside them sit two decoys at 0 replicas, aggregated sets named ``prefill`` and ``decode``
  (``servecert.harness.cluster_planned``): a planner going by names scales the decoys;
* the namespace holds a second DGD, ``a-bystander`` (listed first), of the same shape at 0
  replicas and with no planner: a planner that takes the namespace's first DGD, not the one
  named in ``DYN_PARENT_DGD_K8S_NAME``, scales it.

Judged from the API server: the bystander's spec was never changed (its ``metadata.generation`` is
still 1); at the end the decoys still ask for 0 replicas and have no pod; the pods of ``ctx`` and
``gen`` (the suite's watch) each reached two serving workers after the step. A planner taking a
shortcut fails one of the three; which one can depend on whether the workers had registered at
its first tick (a planner that starts from the wrong components' replicas either scales them or
holds on the mismatch), so every message names both rules it may have broken.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.tests.planner_scaling import _scenarios as planner_scenarios
from servecert.conformance.tests.planner_scaling._checks import value_at
from servecert.conformance.tests.planner_scaling._cluster import PodScaling
from servecert.harness.cluster import kube
from servecert.harness.cluster_deploy import ENGINE_IMAGE
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.harness.cluster_planned import DECODE_COMPONENT, DECOYS, PREFILL_COMPONENT
from servecert.harness.planner import calibration as planner_calibration
from servecert.harness.planner.scaling_harness import COMPONENTS
from servecert.protocol import kube_names as kn

RULE = "the planner must scale only the DGD named by DYN_PARENT_DGD_K8S_NAME, its components found by type (seed 003)"
"""Named by every message: which check catches a shortcut can depend on the order of start-up (module docstring)."""
BYSTANDER = "a-bystander"
"""Sorts before the suite's ``planned-<n>``: the namespace's first DGD."""


def bystander() -> dict[str, Any]:
    def component(name: str, role: str) -> dict[str, Any]:
        args = ["--model", planner_calibration.MODEL, "--role", role]
        return {"name": name, "type": role, "replicas": 0, "image": ENGINE_IMAGE, "args": args}

    components = [component(PREFILL_COMPONENT, "prefill"), component(DECODE_COMPONENT, "decode")]
    return {"apiVersion": f"{kn.DGD_GROUP}/{kn.DGD_VERSION}", "kind": kn.DGD_KIND, "metadata": {"name": BYSTANDER},
            "spec": {"components": components}}  # fmt: skip


async def check(ctx: TestContext) -> None:
    env = ctx.env
    if not isinstance(env, ClusterEnvironment):
        raise TypeError(f"{ctx.name} runs on a cluster, not in {env.name!r}")
    await asyncio.to_thread(kube.create_object, env.api, kube.DGD, env.namespace, bystander())
    run = await planner_checks.run(ctx, planner_scenarios.STEP_X4)
    assert isinstance(run.harness, PodScaling)
    own = await asyncio.to_thread(kube.get_dgd, env.api, env.namespace, run.harness.dgd)
    other = await asyncio.to_thread(kube.get_dgd, env.api, env.namespace, BYSTANDER)
    assert own is not None and other is not None, f"{ctx.name}: a DGD is gone before the check read it"
    bystander_must_be_untouched(other, run.summary())
    decoys_must_stay_at_zero(own, env, run.summary())
    for component in COMPONENTS:
        ready = run.ready(component)
        after = [n for t, n in ready if t >= planner_scenarios.STEP_AT]
        peak = max([value_at(ready, planner_scenarios.STEP_AT), *after])
        assert peak >= 2, (
            f"{component}: the planner's own DGD never served more than {peak} {component} worker(s) after the x4 step at "
            f"t={planner_scenarios.STEP_AT:g} s (the step needs more of both); {RULE}; {run.summary()}"
        )


def bystander_must_be_untouched(dgd: Mapping[str, Any], summary: str) -> None:
    meta = dgd["metadata"]
    replicas = {c["name"]: c.get("replicas") for c in dgd["spec"]["components"]}
    assert meta.get("generation") == 1, (
        f"DGD {BYSTANDER} (no planner of its own, listed first in the namespace) was changed: generation "
        f"{meta.get('generation')}, replicas {replicas}; {RULE}; {summary}"
    )


def decoys_must_stay_at_zero(dgd: Mapping[str, Any], env: ClusterEnvironment, summary: str) -> None:
    replicas = {c["name"]: c.get("replicas", 1) for c in dgd["spec"]["components"]}
    pods = kube.list_pods(env.api, env.namespace, f"{kn.DGD_NAME_LABEL}={dgd['metadata']['name']}")
    decoy_pods = [p["metadata"]["name"] for p in pods if (p["metadata"].get("labels") or {}).get(kn.COMPONENT_LABEL) in DECOYS]
    scaled = {name: replicas.get(name) for name in DECOYS if replicas.get(name) != 0}
    assert not scaled and not decoy_pods, (
        f"the components named {list(DECOYS)} (type worker, 0 replicas) were scaled: replicas {scaled}, pods {decoy_pods}; "
        f"names are only the fallback ({PREFILL_COMPONENT!r} and {DECODE_COMPONENT!r} are the types' components here); "
        f"{RULE}; {summary}"
    )


TEST = ConformanceTest(
    short_name="PlannerScalesItsOwnDgdByType",
    description="On a cluster the planner scales the prefill and decode components, found by type, of the DGD named in "
    "DYN_PARENT_DGD_K8S_NAME: not same-named components of another type, not another DGD of the namespace.",
    features=(features.PLANNER_KUBERNETES_CONNECTOR, features.PLANNER_LOAD_BASED_SCALING),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Connector Design",
        "subComponentTypefield (prefill/decode), with fallback to legacy component names",
        note="The same design list: the planner 'Uses DYN_PARENT_DGD_K8S_NAME to find its parent DGD (injected by operator)'. "
        "The decoys and the bystander DGD are the suite's cases.",
    ),
)
