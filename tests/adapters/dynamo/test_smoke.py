"""Smoke test of the Dynamo adapter: a real Dynamo 1.6.1 frontend, one prefill and one decode worker.

Skipped, with the reason, when the ``dynamo`` extra is not installed (``make test`` does not
install it: ai-dynamo-runtime is a 70 MB native wheel and ai-dynamo must be installed with
``--no-deps``, see docs/dynamo.md). This is a harness test, not a conformance test.
"""

from __future__ import annotations

import importlib.util

import aiohttp
import pytest

from servecert.adapters.contract import DeploymentSpec, RouterSpec, WorkerSpec
from servecert.harness import traffic
from servecert.harness.observe import GroundTruth
from servecert.harness.process_env import ProcessEnvironment

DYNAMO_MISSING = importlib.util.find_spec("dynamo") is None or importlib.util.find_spec("dynamo.frontend") is None
pytestmark = pytest.mark.skipif(
    DYNAMO_MISSING,
    reason="NVIDIA Dynamo is not installed: pip install -e '.[dynamo]' && pip install 'ai-dynamo==1.6.1' --no-deps (docs/dynamo.md)",
)
MODEL = "servecert-smoke"


async def test_one_completion_through_dynamo_prefill_and_decode() -> None:
    from servecert.adapters.dynamo.adapter import DynamoImplementation

    spec = DeploymentSpec(
        model=MODEL,
        router=RouterSpec(topology_level="zone", mismatch_policy="fail"),
        workers=(
            WorkerSpec(role="prefill", name="smoke-prefill", domains={"zone": "a"}),
            WorkerSpec(role="decode", name="smoke-decode", domains={"zone": "a"}),
        ),
    )
    env = ProcessEnvironment()
    deployment = await DynamoImplementation().deploy(spec, env)
    try:
        async with aiohttp.ClientSession() as session:
            out = await traffic.complete(session, deployment.frontend_url, MODEL, traffic.unique_prompt(), max_tokens=4)
            assert out.ok, f"Dynamo answered {out.status}: {out.error}"
            truth = GroundTruth(session)
            await truth.refresh(deployment.workers)
        transfers = truth.transfers()
        assert [(t.source, t.dest) for t in transfers] == [("smoke-prefill", "smoke-decode")], transfers
        assert transfers[0].source_domains == transfers[0].dest_domains == {"zone": "a"}
    finally:
        await deployment.close()
        await env.close()
