"""Seed 004: a multi-node replica is ready only when all its pods are, and a role whose pod's state is unknown is Unknown.

The seed's ComponentStatus: "ReadyReplicas is the number of replicas that are fully ready. For
multi-node replicas, a replica is ready only when all its nodes are ready", and a phase among
"Pending, Deploying, Running, Failed, Unknown". Once every role is Running, the suite itself
reports pods of one multi-node role (two replicas of four pods) not ready, as their kubelet would
after a failed readiness probe, and reads what the status makes of it (ground truth: the pod states
the suite wrote, read back from the API server):

1. one worker (never the leader) unready in each of the two replicas: readyReplicas 0, readyPods
   two fewer, the role not Running. The placement is chosen so that the two shortcuts give other
   answers: counting a replica ready when its leader is gives 2, dividing the ready pods by the
   pods of a replica gives 6 // 4 = 1. (Two unready pods in one replica, or one alone, would let
   the second shortcut through: 7 // 4 = 1 is right there.)
2. those two Ready again, and one worker of replica 1 in phase Unknown (the state Kubernetes could
   not obtain, as for a node gone silent): the role's phase Unknown, readyReplicas 1, one pod fewer;
3. every pod Ready again: the role Running with every replica and pod counted;
4. one worker of replica 0 deleted but held Terminating by a finalizer of the suite's, its Ready
   condition still True (as a pod whose container ignores SIGTERM stays): readyReplicas 1, one pod
   fewer, the role not Running. Counting the pods that exist and are Ready per replica (not the
   replica's size) gives 2 here, and so does counting a terminating pod as serving; then the
   finalizer goes, the operator makes the replica whole again, and every count comes back.

Every other role must keep its full counts and Running throughout (story 4's prefill role).
The pods are kwok's (no runner image), whose stages act on Pending pods alone, so nothing but
the suite rewrites these states. Cases: story 3 (one role, 2 x 4) and story 4 (P/D: decode 2 x 4,
prefill 1 x 2), each on a node of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.inference_service import _own_node as own_node
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.protocol import kube_objects

UNREADY = ((0, 1), (1, 3))
"""(replica, worker) made unready in step 1: a worker in each of two replicas, never a leader (worker 0)."""
UNKNOWN = (1, 2)
"""(replica, worker) put in phase Unknown in step 2."""
TERMINATING = (0, 3)
"""(replica, worker) deleted and held Terminating in step 4, its Ready condition left True: the replica lost it."""
FULL = "full"
"""Expected phase of a role the suite leaves alone: Running with every replica and pod counted."""


@dataclass(frozen=True)
class Expected:
    """What status.components must say of the degraded role; ``phase`` None: anything but Running."""

    ready_replicas: int
    ready_pods: int
    phase: str | None

    def holds(self, comp: Mapping[str, Any]) -> bool:
        counts = comp.get("readyReplicas") == self.ready_replicas and comp.get("readyPods") == self.ready_pods
        phase = comp.get("phase")
        return counts and (phase == self.phase if self.phase else phase != "Running")

    def text(self) -> str:
        phase = f"phase {self.phase}" if self.phase else "a phase other than Running"
        return f"readyReplicas {self.ready_replicas}, readyPods {self.ready_pods}, {phase}"


def pod_name(service: str, role: str, replica: int, worker: int) -> str:
    """Seed 004's naming: LWS ``{service}-{role}-{replica}``, its leader ``{lws}-0``, workers ``{lws}-0-{w}`` (w from 1)."""
    return f"{service}-{role}-{replica}-0-{worker}"


def degraded_role(body: dict[str, Any]) -> dict[str, Any]:
    """The first role of two or more replicas of four pods or more: where every step above tells the shortcuts apart."""
    for role in manifests.roles(body):
        if int(role.get("replicas", 1)) >= 2 and kube_objects.node_count(role) >= 4:
            return role
    raise ValueError(f"{body['metadata']['name']} has no role of two replicas of four pods or more")


def full(role: dict[str, Any]) -> Expected:
    replicas = int(role.get("replicas", 1))
    return Expected(replicas, replicas * kube_objects.node_count(role), "Running")


READY_RULE = "seed 004: a replica is ready only when all its nodes are ready"
TERMINATING_RULE = (
    "seed 004: a replica is ready only when all its nodes are ready; a pod being deleted serves no more (the suite's "
    "reading, as Kubernetes' EndpointSlices mark a terminating pod not ready), so its replica is short of a pod"
)
UNKNOWN_RULE = "seed 004's phases include Unknown; Kubernetes could not obtain this pod's state, so nor its role's"


async def components_must_reach(ctx: TestContext, service: str, expected: Mapping[str, Expected], what: str, rule: str) -> None:
    """Wait (``operator_reconcile_s``) until status.components says ``expected`` of every role; fail naming what it said."""
    env = kc.env_of(ctx)
    last: dict[str, Any] = {}

    async def reached() -> bool:
        nonlocal last
        found = await kc.get(env, kc.ISVC, service)
        last = kube_objects.components(found)
        return all(name in last and e.holds(last[name]) for name, e in expected.items())

    try:
        await kc.wait_for(reached, ctx.timeouts.operator_reconcile_s, what)
    except AssertionError:
        said = {name: {k: last.get(name, {}).get(k) for k in ("readyReplicas", "readyPods", "phase")} for name in expected}
        wanted = {name: e.text() for name, e in expected.items()}
        raise AssertionError(
            f"{ctx.case.id}: {what}: within {ctx.timeouts.operator_reconcile_s:g}s status.components of {service} did not say "
            f"{wanted}; it said {said} ({rule})"
        ) from None


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    body = await own_node.deploy(env, ctx.case.id)
    service = body["metadata"]["name"]
    role = degraded_role(body)
    name, replicas, size = role["name"], int(role.get("replicas", 1)), kube_objects.node_count(role)
    others = {r["name"]: full(r) for r in manifests.roles(body) if r["name"] != name}
    every = {name: full(role), **others}
    await kc.wait_for(lambda: own_node.every_pod_ready(env, body), t.pods_ready_s, f"{ctx.case.id}: every pod of {service} Ready")
    await components_must_reach(ctx, service, every, "every pod Ready", READY_RULE)

    unready = [pod_name(service, name, r, w) for r, w in UNREADY]
    for pod in unready:
        await kc.set_pod_state(env, pod, "Running", "False")
    step1 = Expected(replicas - len(UNREADY), replicas * size - len(UNREADY), None)
    await components_must_reach(ctx, service, {name: step1, **others}, f"after {unready} turned unready", READY_RULE)

    unknown = pod_name(service, name, *UNKNOWN)
    for pod in unready:
        await kc.set_pod_state(env, pod, "Running", "True")
    await kc.set_pod_state(env, unknown, "Unknown", "Unknown")
    step2 = Expected(replicas - 1, replicas * size - 1, "Unknown")
    what = f"after {unready} Ready again and {unknown} in phase Unknown"
    await components_must_reach(ctx, service, {name: step2, **others}, what, UNKNOWN_RULE)

    await kc.set_pod_state(env, unknown, "Running", "True")
    await components_must_reach(ctx, service, every, f"after {unknown} Running and Ready again", READY_RULE)

    leaving = pod_name(service, name, *TERMINATING)
    async with kc.pod_held_terminating(env, leaving):
        step4 = Expected(replicas - 1, replicas * size - 1, None)
        what = f"after {leaving} was deleted (Terminating, held by a finalizer, its Ready condition still True)"
        await components_must_reach(ctx, service, {name: step4, **others}, what, TERMINATING_RULE)
    await components_must_reach(ctx, service, every, f"after {leaving} was gone and its replica whole again", READY_RULE)


TEST = ConformanceTest(
    short_name="InferenceServiceReplicaReadiness",
    description="A multi-node replica counts as ready only when all its pods are Ready (one unready worker in each of two "
    "replicas leaves none ready; a Ready worker being deleted leaves its replica not ready), and a role with a pod in phase "
    "Unknown is in phase Unknown; status follows back to Running.",
    features=(features.INFERENCE_SERVICE_STATUS,),
    environments=frozenset({"cluster"}),
    slow=True,
    cases=(Case("story3"), Case("story4")),
    check=check,
    seed=SeedRef(
        "004",
        "CRD Structure Overview",
        "// For multi-node replicas, a replica is ready only when all its nodes are ready.",
        note="The seed lists Unknown among the phases without saying when; the suite's reading is Kubernetes' own: a pod whose "
        "phase is Unknown is one whose state could not be obtained, so neither is its role's.",
    ),
)
