"""Smoke tests of the vllm-router and sglang-router adapters: the real router, unmodified, in front of fake engines.

Each router in P/D mode serves the real ``openai`` client (a chat completion, a streamed
completion with usage) through one prefill and one decode engine in different zones; the
ground truth must record one KV transfer per request, prefill to decode, with both domains, and
the client's token counts must equal the engine's. Then workers leave (and, for sglang-router,
join) through the router's worker API, and the traffic follows. ``make test`` installs both
extras; without one, its test is skipped naming the install command. Harness tests, not
conformance tests.
"""

from __future__ import annotations

import aiohttp
import openai
import pytest

from servecert.adapters.contract import AdapterError, DeploymentSpec, RouterSpec, WorkerSpec
from servecert.adapters.pd_routers import sglang_router, vllm_router
from servecert.adapters.pd_routers.deployment import RouterKind, installed
from servecert.adapters.pd_routers.implementation import RouterImplementation
from servecert.harness.observe import GroundTruth
from servecert.harness.process_env import ProcessEnvironment

MODEL = "servecert-smoke"
ZONE_A, ZONE_B = {"zone": "a"}, {"zone": "b"}
ROUTERS = [(vllm_router.VllmRouter(), vllm_router.implementation()), (sglang_router.SglangRouter(), sglang_router.implementation())]


def require(kind: RouterKind) -> None:
    if not installed(kind):
        pytest.skip(f"{kind.name} is not installed: {kind.install}")


def spec(*workers: WorkerSpec) -> DeploymentSpec:
    return DeploymentSpec(model=MODEL, router=RouterSpec(mode="round-robin"), workers=workers)


@pytest.mark.parametrize(("kind", "impl"), ROUTERS, ids=[k.name for k, _ in ROUTERS])
async def test_the_router_serves_the_openai_client_through_prefill_and_decode(kind: RouterKind, impl: RouterImplementation) -> None:
    require(kind)
    env = ProcessEnvironment()
    deployment = await impl.deploy(
        spec(WorkerSpec(role="prefill", name="p0", domains=ZONE_A), WorkerSpec(role="decode", name="d0", domains=ZONE_B)), env
    )
    try:
        client = openai.AsyncOpenAI(base_url=deployment.frontend_url + "/v1", api_key="unused", max_retries=0)
        chat = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello there"}], max_tokens=7)
        stream = await client.completions.create(
            model=MODEL, prompt="alpha beta gamma delta", max_tokens=5, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
        await client.close()
        async with aiohttp.ClientSession() as session:
            truth = GroundTruth(session)
            await truth.refresh(deployment.workers)
        transfers = truth.transfers()
        assert [(t.source, t.dest) for t in transfers] == [("p0", "d0")] * 2, transfers
        assert all((t.source_domains, t.dest_domains) == (ZONE_A, ZONE_B) for t in transfers)
        decoded = sorted(r.completion_tokens for r in env.engine("d0").log.since(0))
        streamed_usage = chunks[-1].usage
        assert chat.usage is not None and streamed_usage is not None
        assert sorted([chat.usage.completion_tokens, streamed_usage.completion_tokens]) == decoded
    finally:
        await deployment.close()
        await env.close()


@pytest.mark.parametrize(("kind", "impl"), ROUTERS, ids=[k.name for k, _ in ROUTERS])
async def test_a_removed_decode_worker_gets_no_more_requests(kind: RouterKind, impl: RouterImplementation) -> None:
    require(kind)
    env = ProcessEnvironment()
    workers = (WorkerSpec(role="prefill", name="p0"), WorkerSpec(role="decode", name="d0"), WorkerSpec(role="decode", name="d1"))
    deployment = await impl.deploy(spec(*workers), env)
    try:
        d0 = next(w for w in deployment.workers if w.name == "d0")
        await deployment.remove_worker(d0)
        env.linger(d0)  # still serving: anything the router sent it would land in its ground truth
        client = openai.AsyncOpenAI(base_url=deployment.frontend_url + "/v1", api_key="unused", max_retries=0)
        for i in range(6):
            await client.completions.create(model=MODEL, prompt=f"after the removal {i}", max_tokens=3)
        if kind.name == "sglang-router":
            d2 = await deployment.add_worker(WorkerSpec(role="decode", name="d2"))
            for i in range(6):
                await client.completions.create(model=MODEL, prompt=f"after the join {i}", max_tokens=3)
            assert len(env.engine(d2.engine_id).log.since(0)) == 3  # round robin over d1 and d2
        else:
            with pytest.raises(AdapterError, match="cannot add a worker"):
                await deployment.add_worker(WorkerSpec(role="decode", name="d2"))
        await client.close()
        assert env.engine("d0").log.since(0) == []
    finally:
        await deployment.close()
        await env.close()
