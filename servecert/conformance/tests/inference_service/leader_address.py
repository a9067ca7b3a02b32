"""Seed 004: each pod of a multi-node replica can reach its own leader: ``LWS_LEADER_ADDRESS`` resolves to the leader's IP.

The seed gives multi-node coordination to LeaderWorkerSet ("LWS manages (failure recovery, env
injection, multi-node coordination)"), and its workers join their leader with
``ray start --address=$LWS_LEADER_ADDRESS:6379 --block``. An address nothing answers for leaves
every worker of the replica unable to start. So, for every worker of every multi-node replica, the
address in its spec must resolve to the IP of its own replica's leader, and to nothing else.

The suite resolves it as the cluster DNS does for a headless Service (the Kubernetes DNS
specification), from the API server's objects: ``<host>.<service>.<namespace>[.svc[.cluster.local]]``
answers with the addresses of the endpoints whose hostname is ``<host>`` in the EndpointSlices the
controller-manager keeps for the headless Service ``<service>``. That controller names an endpoint
only for a pod whose ``spec.hostname`` is ``<host>`` and ``spec.subdomain`` the Service's name, so
the record exists only if the implementation made the Service, selected the leader with it and
named the leader's pod. The leader is the pod seed 004 names ``{lws}-0``; its IP is its
``status.podIP``. Cases: story 3 (two replicas of four pods) and story 4 (prefill 1 x 2, decode
2 x 4): a worker of replica 1 reaching replica 0's leader fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servecert import features
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.inference_service import _own_node as own_node
from servecert.conformance.utils import kube as kc
from servecert.conformance.utils import manifests
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import kube_objects

ADDRESS_ENV = "LWS_LEADER_ADDRESS"
DNS_SUFFIXES = (".svc.cluster.local", ".svc")


@dataclass(frozen=True)
class Worker:
    pod: str
    leader: str


def workers(body: dict[str, Any]) -> list[Worker]:
    """Every non-leader pod of every multi-node replica, with its leader, by seed 004's names."""
    service = body["metadata"]["name"]
    out: list[Worker] = []
    for role in manifests.roles(body):
        size = kube_objects.node_count(role)
        for replica in range(int(role.get("replicas", 1)) if size >= 2 else 0):
            lws = f"{service}-{role['name']}-{replica}"
            out.extend(Worker(f"{lws}-0-{w}", f"{lws}-0") for w in range(1, size))
    return out


def split_name(address: str, namespace: str) -> tuple[str, str, str] | None:
    """(host, service, namespace) of a pod's name under a headless Service, as a pod's resolver would complete it."""
    name = address.rstrip(".")
    for suffix in DNS_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    parts = name.split(".")
    if len(parts) == 2:
        return parts[0], parts[1], namespace
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    return None


async def resolve(env: ClusterEnvironment, address: str) -> tuple[set[str], str]:
    """The addresses the cluster DNS answers ``address`` with, from a pod of the case's namespace; why none when empty."""
    parts = split_name(address, env.namespace)
    if parts is None:
        return set(), "not of the form <hostname>.<service>.<namespace>"
    host, name, namespace = parts
    if namespace != env.namespace:
        return set(), f"names namespace {namespace}, not the pod's {env.namespace}"
    found = await kc.service(env, name)
    if found is None:
        return set(), f"no Service {name}"
    spec = found.get("spec") or {}
    if spec.get("clusterIP") != "None":
        return set(), f"Service {name} is not headless (clusterIP {spec.get('clusterIP')}): the DNS names no pod under it"
    publish = bool(spec.get("publishNotReadyAddresses"))
    addresses = {
        address
        for piece in await kc.endpoint_slices(env, name)
        for endpoint in piece.get("endpoints") or []
        if endpoint.get("hostname") == host and (publish or (endpoint.get("conditions") or {}).get("ready") is not False)
        for address in endpoint.get("addresses") or []
    }
    if not addresses:
        return set(), f"no endpoint of Service {name} is named {host} (needs a pod with hostname {host}, subdomain {name})"
    return addresses, ""


async def unresolved(env: ClusterEnvironment, expected: list[Worker]) -> list[str]:
    """What is wrong with each worker's leader address; empty when every one resolves to its leader's IP alone."""
    problems = []
    for worker in expected:
        pod, leader = await kc.pod(env, worker.pod), await kc.pod(env, worker.leader)
        if pod is None or leader is None:
            problems.append(f"{worker.pod}: {'it' if pod is None else 'its leader ' + worker.leader} does not exist")
            continue
        address = kc.env_value(pod, ADDRESS_ENV)
        if address is None or address == "<valueFrom>":
            problems.append(f"{worker.pod}: no {ADDRESS_ENV} value in its spec")
            continue
        ip = kube_objects.status_of(leader).get("podIP")
        found, why = await resolve(env, address)
        if found != {ip}:
            said = why or f"resolves to {sorted(found)}"
            problems.append(f"{worker.pod}: {ADDRESS_ENV}={address} {said}, not its leader {worker.leader} at {ip}")
    return problems


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    body = await own_node.deploy(env, ctx.case.id)
    expected = workers(body)
    await kc.wait_for(lambda: own_node.every_pod_ready(env, body), t.pods_ready_s, f"{ctx.case.id}: every pod Ready")
    last: list[str] = []

    async def resolved() -> bool:
        nonlocal last
        last = await unresolved(env, expected)
        return not last

    try:
        await kc.wait_for(resolved, t.operator_reconcile_s, f"{ctx.case.id}: every worker's {ADDRESS_ENV} resolving")
    except AssertionError:
        raise AssertionError(
            f"{ctx.case.id}: within {t.operator_reconcile_s:g}s of every pod Ready, {len(last)} of {len(expected)} workers cannot "
            f"reach their leader by {ADDRESS_ENV} (resolved as the cluster DNS does, from the EndpointSlices): {last}"
        ) from None


TEST = ConformanceTest(
    short_name="InferenceServiceLeaderAddress",
    description="Every worker of a multi-node replica carries LWS_LEADER_ADDRESS, and it resolves (as the cluster DNS does, "
    "from the EndpointSlices of a headless Service) to its own replica's leader pod alone.",
    features=(features.INFERENCE_SERVICE_OBJECTS,),
    environments=frozenset({"cluster"}),
    slow=True,
    cases=(Case("story3"), Case("story4")),
    check=check,
    seed=SeedRef(
        "004",
        "LeaderWorkerSet (LWS) Workload Management",
        "ray start --address=$LWS_LEADER_ADDRESS:6379 --block",
        note="The seed hands multi-node coordination to LWS, whose headless Service per group makes the leader's name "
        "resolvable; the suite judges the resolution, not the objects that give it.",
    ),
)
