"""A proxy replica lost mid-rollout: the DGD's Service goes on serving, the replica is replaced, the rollout finishes clean.

Seed 001 4.3.3 (Solution C, the one 4.3.4 prefers): "The controller deploys a reverse proxy (e.g.,
HAProxy) with a Service in front. Internal and external clients connect to this Service", and
among its cons, "Proxy pods must be replicated for HA". So, judged from the API server, never
from the implementation's status alone:

1. the DGD's ``status.address`` is a Service of the DGD's namespace (its ClusterIP and one of its
   ports), with at least two Ready endpoints: pods its selector picks that are Ready and not
   terminating, as the EndpointSlice controller counts them (the suite reads the pods: the API
   server refuses the embedded cluster's loopback pod IPs in an EndpointSlice);
2. the suite's chaos: once the first new worker is Ready, one of those endpoints' pods is deleted
   (gracefully, as an eviction or a node drain would) while the suite's requests go on through
   the Service — zero failed requests and every other rollout rule, nothing loosened: a replica
   that keeps taking connections while its Service drops it, then finishes its streams, loses
   nothing, and the replica left has the same weights. The engines load their model for
   ``LOSS_STARTUP_S``, so the rollout's later steps come after the loss and the replacement must
   follow them (a replica left on stale weights breaks the split rule);
3. once the rollout is over, the Service has again as many Ready endpoints as before, none of them
   the deleted pod, within ``rollout_proxy_replace_s``.

A controller that makes its proxy only while the DGD has none
(``tests/nonconforming/rollout.py:ProxyNotReplaced``) fails 3. The embedded cluster's Services are
served by its own kube-proxy (``servecert.fakes.service_proxy``): a connection goes to a Ready endpoint at
random, as kube-proxy's would.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import urlparse

from servecert import features
from servecert.conformance.suite.test_case import ConformanceTest, SeedRef, TestContext
from servecert.conformance.tests.rollout_isolation import _checks as rc
from servecert.conformance.tests.rollout_isolation import _scenarios as scenarios
from servecert.conformance.tests.rollout_isolation import _verdict as verdict
from servecert.conformance.utils import kube as kc
from servecert.harness.cluster_env import ClusterEnvironment
from servecert.protocol import waiting

LOSS_STARTUP_S = 3.0
"""Each engine loads its model this long, so steps follow the loss for some seconds: the replacement must take them too."""
SCENARIO = dataclasses.replace(scenarios.BLOCK_SIZE, mode=scenarios.PROXY_LOSS, engine_args=scenarios.loading(LOSS_STARTUP_S))


@dataclasses.dataclass(frozen=True)
class Endpoints:
    service: str
    selector: str
    ready: tuple[str, ...]
    """Names of the pods behind the Service's Ready endpoints."""


async def service_of(env: ClusterEnvironment, address: str) -> dict[str, Any]:
    """The Service whose ClusterIP and port ``address`` names, or a failure saying the address is no Service's."""
    url = urlparse(address)
    port = url.port or (443 if url.scheme == "https" else 80)
    for found in await kc.services(env):
        spec = found.get("spec") or {}
        if spec.get("clusterIP") == url.hostname and any(int(p.get("port", 0)) == port for p in spec.get("ports") or []):
            return found
    raise AssertionError(
        f"{scenarios.PROXY_LOSS}: status.address {address} is not the ClusterIP and port of any Service in {env.namespace}; "
        "seed 001 4.3.3 puts the proxy behind a Service that clients connect to"
    )


def selector_of(service: dict[str, Any]) -> str:
    selector = (service.get("spec") or {}).get("selector") or {}
    if not selector:
        raise AssertionError(
            f"{scenarios.PROXY_LOSS}: the Service {service['metadata']['name']} of status.address selects no pods; "
            "seed 001 4.3.3's Service fronts the proxy pods"
        )
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


async def endpoints(env: ClusterEnvironment, service: str, selector: str) -> Endpoints:
    """The Service's Ready endpoints: the pods its selector picks that are Ready and not terminating."""
    found = await kc.pods(env, selector)
    ready = (p["metadata"]["name"] for p in found if kc.pod_ready(p) and not p["metadata"].get("deletionTimestamp"))
    return Endpoints(service, selector, tuple(sorted(ready)))


def replicas_must_be_two_or_more(found: Endpoints, address: str) -> None:
    if len(found.ready) < 2:
        raise AssertionError(
            f"{scenarios.PROXY_LOSS}: the Service {found.service} of status.address {address} had {len(found.ready)} Ready "
            f"endpoint(s) {list(found.ready)}; seed 001 4.3.3: 'Proxy pods must be replicated for HA'"
        )


async def replica_must_be_replaced(env: ClusterEnvironment, before: Endpoints, lost: str, bound_s: float) -> None:
    """Within ``bound_s``: as many Ready endpoints as ``before``, none of them the deleted pod."""
    last = before

    async def replaced() -> bool:
        nonlocal last
        last = await endpoints(env, before.service, before.selector)
        return len(last.ready) >= len(before.ready) and lost not in last.ready

    try:
        await kc.wait_for(replaced, bound_s, "the lost proxy replica replaced", poll_s=0.5)
    except waiting.WaitTimeout:
        raise AssertionError(
            f"{scenarios.PROXY_LOSS}: the proxy replica {lost} was deleted mid-rollout; {bound_s:.0f} s after the rollout's end "
            f"the Service {before.service} has {len(last.ready)} Ready endpoint(s) {list(last.ready)}, "
            f"{len(before.ready)} before: the lost replica was not replaced"
        ) from None


async def check(ctx: TestContext) -> None:
    env, t = kc.env_of(ctx), ctx.timeouts
    taken: list[tuple[Endpoints, str]] = []

    async def mid_way(env: ClusterEnvironment, _changed: dict[str, Any]) -> None:
        address = await rc.address(env, scenarios.DGD_NAME, t.pods_ready_s)
        service = await service_of(env, address)
        before = await endpoints(env, str(service["metadata"]["name"]), selector_of(service))
        replicas_must_be_two_or_more(before, address)
        lost = before.ready[0]
        await kc.delete_pod(env, lost)
        ctx.log.info("deleted proxy replica %s of Service %s (Ready endpoints %s)", lost, before.service, list(before.ready))
        taken.append((before, lost))

    evidence = await rc.run(ctx, SCENARIO, mid_way=mid_way)
    ctx.log.info(verdict.summary(evidence))
    verdict.rollout_must_be_clean(evidence)
    before, lost = taken[0]
    await replica_must_be_replaced(env, before, lost, t.rollout_proxy_replace_s)


TEST = ConformanceTest(
    short_name="RolloutProxyReplicaLoss",
    description="The DGD's address is a Service of at least two Ready proxy pods; one deleted mid-rollout loses no request, "
    "the rollout keeps every rule, and the Service is back to as many Ready endpoints once it is over.",
    features=(features.ROLLOUT_PROXY_REPLICA_LOSS,),
    environments=frozenset({"cluster"}),
    slow=True,
    check=check,
    seed=SeedRef(
        "001",
        "4.3.3 Solution C: Simple Proxy Load Balancing",
        "The controller deploys a reverse proxy (e.g., HAProxy) with a Service in front. Internal and external clients "
        "connect to this Service",
        note="Its cons add 'Proxy pods must be replicated for HA'; 4.3.4 prefers Solution C. Losing a replica mid-rollout is "
        "the suite's chaos case (extended): an implementation of Solution A has no proxy Service and does not declare it.",
    ),
)
