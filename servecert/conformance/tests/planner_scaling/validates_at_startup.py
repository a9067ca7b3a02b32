"""On a cluster, a planner whose DGD it cannot scale refuses at start-up: it never turns Ready and never patches the DGD.

Seed 003's KubernetesConnector "Validates deployment structure on startup: checks that prefill and
decode services exist and model names match". The suite writes the planned DGD
(``servecert.harness.cluster_planned``) broken one way per case:

* ``model-mismatch``: the decode component ``gen`` serves another model than the prefill
  component ``ctx`` (its ``--model``); both exist, so only the model check refuses it;
* ``no-decode``: no component of type decode (the decoys named ``prefill`` and ``decode``, of type
  worker, are dropped too, so the legacy-name fallback finds none either).

Judged from the API server (the suite's pod watch and the DGD): once the planner pod's container
has started, for ``planner_validation_s`` more no version of the planner pod is Ready, and the
DGD's ``metadata.generation`` is still 1 at the end (nothing patched its spec). The message says
whether the container exited (restarts, last exit code), as a planner that refuses would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.planner_scaling import _checks as planner_checks
from servecert.conformance.utils.kube import PodHistory
from servecert.harness.cluster import kube
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.harness.cluster_planned import DECODE_COMPONENT, DECOYS, PlannedClusterDeployment
from servecert.protocol import kube_names as kn
from servecert.protocol import kube_objects, waiting

OTHER_MODEL = "servecert-other-model"
POLL_S = 0.2


def _mismatch(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for component in components:
        if component["name"] == DECODE_COMPONENT:
            args = list(component["args"])
            args[args.index("--model") + 1] = OTHER_MODEL
            component["args"] = args
    return components


def _no_decode(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for c in components if c["name"] != DECODE_COMPONENT and c["name"] not in DECOYS]


CASES: dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]] = {"model-mismatch": _mismatch, "no-decode": _no_decode}


def _planner_pods(history: PodHistory, dgd: str) -> list[kube_objects.Pod]:
    return [
        p for p in history.versions
        if (p["metadata"].get("labels") or {}).get(kn.DGD_NAME_LABEL) == dgd
        and (p["metadata"].get("labels") or {}).get(kn.COMPONENT_TYPE_LABEL) == "planner"
    ]


def _started(pod: kube_objects.Pod) -> bool:
    return any(s.get("state", {}).get("running") or s.get("state", {}).get("terminated") or s.get("restartCount", 0)
               for s in (pod.get("status") or {}).get("containerStatuses") or [])  # fmt: skip


def _exits(pod: kube_objects.Pod) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    described = []
    for s in statuses:
        last = (s.get("lastState") or {}).get("terminated") or (s.get("state") or {}).get("terminated") or {}
        described.append(f"restarts {s.get('restartCount', 0)}, last exit code {last.get('exitCode', '-')}")
    return "; ".join(described) or "no container status"


async def check(ctx: TestContext) -> None:
    env = ctx.env
    if not isinstance(env, ClusterEnvironment):
        raise TypeError(f"{ctx.name} runs on a cluster, not in {env.name!r}")
    t = ctx.timeouts
    spec = planner_checks.deployment_spec(t, planner_checks.planner_spec(t), startup_s=t.planner_engine_startup_s)
    deployment = PlannedClusterDeployment(env, spec, t.pods_ready_s, implementation=ctx.implementation)
    ctx.add_cleanup(deployment.close)
    history = PodHistory(env).start()
    ctx.add_cleanup(lambda: asyncio.to_thread(history.stop))
    await deployment.create(CASES[ctx.params["case"]])
    await waiting.until_async(
        lambda: any(_started(p) for p in _planner_pods(history, deployment.name)),
        timeout_s=t.pods_ready_s,
        what=f"the planner pod of DGD {deployment.name} to start its container",
        interval_s=POLL_S,
    )
    await asyncio.sleep(t.planner_validation_s)
    pods = _planner_pods(history, deployment.name)
    dgd = await asyncio.to_thread(kube.get_dgd, env.api, env.namespace, deployment.name)
    planner_must_refuse(ctx.params["case"], pods, dgd, t.planner_validation_s)


def planner_must_refuse(case: str, pods: list[kube_objects.Pod], dgd: kube_objects.DynamoGraphDeployment | None, window_s: float) -> None:
    exits = _exits(pods[-1]) if pods else "no planner pod seen"
    ready = [p["metadata"]["name"] for p in pods if kube_objects.condition_true(p, "Ready")]
    assert not ready, (
        f"{case}: the planner pod {ready[0]} turned Ready on a DGD it cannot scale ({exits}); seed 003's planner validates "
        "the deployment's structure on start-up (prefill and decode services exist, model names match) and refuses it"
    )
    generation = dgd["metadata"].get("generation") if dgd else None
    assert generation == 1, (
        f"{case}: the DGD's spec was changed (generation {generation}) within {window_s:g} s of its planner's start on a "
        f"DGD it cannot scale ({exits}); it must refuse it at start-up and patch nothing"
    )


TEST = ConformanceTest(
    short_name="PlannerValidatesItsDgdAtStartUp",
    description="On a cluster, a planner whose DGD lacks a decode component or whose components serve different models "
    "never turns Ready and never patches the DGD.",
    features=(features.PLANNER_KUBERNETES_CONNECTOR,),
    environments=frozenset({"cluster"}),
    cases=tuple(Case(name, {"case": name}) for name in CASES),
    slow=True,
    check=check,
    seed=SeedRef(
        "003",
        "Connector Design",
        "- Validates deployment structure on startup: checks that prefill and decode services exist and model names match",
        note="Refusing is judged as: never Ready, nothing patched, for planner_validation_s after its container started (the "
        "suite's bound); exiting is reported, not required.",
    ),
)
