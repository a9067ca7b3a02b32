"""The real routers on the embedded cluster: engines as labelled pods, found by the routers' own Kubernetes service discovery.

Each router, unmodified, watches the case's namespace with a prefill and a decode label selector
(``servecert.adapters.pd_routers.discovery``). The ground truth must record each request's KV transfer
between the two pods' engines with both domains; a pod created later joins (for vllm-router the
only way to add a P/D worker: it has no HTTP route for it) and takes requests, and a deleted pod
leaves and takes none. Harness tests, not conformance tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import openai
import pytest

from servecert.adapters.contract import AdapterError, DeploymentSpec, RouterSpec, WorkerSpec
from servecert.adapters.pd_routers import discovery, sglang_router, vllm_router
from servecert.adapters.pd_routers.deployment import RouterKind, installed
from servecert.adapters.pd_routers.implementation import RouterImplementation
from servecert.harness.cluster.backends import Cluster
from servecert.harness.cluster_env import ClusterEnvironment, ClusterSession
from servecert.harness.observe import GroundTruth

pytestmark = [pytest.mark.cluster, pytest.mark.xdist_group("router-cluster")]

MODEL = "servecert-discovery"
ZONE_A, ZONE_B = {"zone": "a"}, {"zone": "b"}
ROUTERS = [(vllm_router.VllmRouter(), vllm_router.implementation()), (sglang_router.SglangRouter(), sglang_router.implementation())]


@pytest.fixture
async def namespace(cluster: Cluster) -> AsyncIterator[ClusterEnvironment]:
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no pod runner")
    session = ClusterSession.start(cluster, vllm_router.implementation())
    env = ClusterEnvironment(session)
    try:
        yield env
    finally:
        await env.close()
        session.close()


def spec(*workers: WorkerSpec) -> DeploymentSpec:
    return DeploymentSpec(model=MODEL, router=RouterSpec(mode="round-robin"), workers=workers)


async def complete(url: str, prompts: list[str]) -> list[int]:
    client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    try:
        return [(await client.completions.create(model=MODEL, prompt=p, max_tokens=4)).usage.completion_tokens for p in prompts]  # type: ignore[union-attr]
    finally:
        await client.close()


@pytest.mark.parametrize(("kind", "impl"), ROUTERS, ids=[k.name for k, _ in ROUTERS])
async def test_the_router_discovers_pods_that_join_and_leave(
    kind: RouterKind, impl: RouterImplementation, namespace: ClusterEnvironment
) -> None:
    if not installed(kind):
        pytest.skip(f"{kind.name} is not installed: {kind.install}")
    deployment = await impl.deploy_on_cluster(
        spec(WorkerSpec(role="prefill", name="p", domains=ZONE_A), WorkerSpec(role="decode", name="d", domains=ZONE_B)), namespace
    )
    try:
        prefill, first = deployment.workers
        assert await complete(deployment.frontend_url, ["one two three", "four five six"]) == [4, 4]
        joined = await deployment.add_worker(WorkerSpec(role="decode", name="joined", domains=ZONE_A))
        await complete(deployment.frontend_url, [f"after the join {i}" for i in range(6)])
        async with aiohttp.ClientSession() as session:
            truth = GroundTruth(session)
            await truth.refresh([prefill, joined, first])  # NB: each transfer is in the log of the decode engine that pulled it
            before = truth.transfers()
            await deployment.remove_worker(first)
            await complete(deployment.frontend_url, [f"after the leave {i}" for i in range(4)])
            await truth.refresh([prefill, joined])
        after = truth.transfers()[len(before) :]
        assert [(t.source, t.dest) for t in after] == [(prefill.engine_id, joined.engine_id)] * 4, after
        assert len(before) == 8 and all(t.source == prefill.engine_id for t in before), before
        to_first = [t for t in before if t.dest == first.engine_id]
        to_joined = [t for t in before if t.dest == joined.engine_id]
        # round robin: the first two before the join, then both decode pods share the six after it
        assert 2 < len(to_first) < 8 and len(to_first) + len(to_joined) == 8, before
        assert all((t.source_domains, t.dest_domains) == (ZONE_A, ZONE_B) for t in to_first), to_first
        assert all((t.source_domains, t.dest_domains) == (ZONE_A, ZONE_A) for t in to_joined), to_joined
    finally:
        await deployment.close()


async def test_a_topology_level_is_refused_on_the_cluster(namespace: ClusterEnvironment) -> None:
    if not installed(vllm_router.VllmRouter()):
        pytest.skip(f"vllm-router is not installed: {vllm_router.VllmRouter().install}")
    asked = DeploymentSpec(
        model=MODEL, router=RouterSpec(topology_level="zone"), workers=(WorkerSpec(role="prefill"), WorkerSpec(role="decode"))
    )
    with pytest.raises(AdapterError, match="no topology filtering"):
        await discovery.deploy(vllm_router.VllmRouter(), asked, namespace)
