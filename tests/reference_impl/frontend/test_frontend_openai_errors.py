"""The reference frontend answers every client mistake of the fakes' table as the fake engine does.

Both parse through ``servecert.protocol.openai``, but the frontend reads the model and the context
length from its worker set first: one deployment (an aggregated worker, context length 64) takes
the whole table of ``tests/fakes/test_openai_errors.py``, and the worker's ground-truth log must
stay empty (nothing refused at validation is forwarded).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from servecert.adapters.contract import DeploymentSpec, RouterSpec, WorkerSpec
from servecert.adapters.reference.adapter import ReferenceImplementation
from servecert.harness.observe import GroundTruth
from servecert.harness.process_env import ProcessEnvironment
from tests.fakes.test_openai_errors import CONTEXT, GOOD, MISTAKES, Mistake, _post, assert_openai_error


@pytest.fixture
async def env() -> AsyncIterator[ProcessEnvironment]:
    environment = ProcessEnvironment()
    yield environment
    await environment.close()


async def test_every_client_mistake_gets_the_engines_openai_error_from_the_frontend(
    env: ProcessEnvironment, http: aiohttp.ClientSession
) -> None:
    spec = DeploymentSpec(model="m", router=RouterSpec(), workers=(WorkerSpec("agg", context_length=CONTEXT),))
    dep = await ReferenceImplementation().deploy(spec, env)
    try:
        failures = []
        for case in MISTAKES:
            mistake: Mistake = case.values[0]
            status, content_type, body = await _post(http, dep.frontend_url + mistake.route, mistake.body)
            try:
                assert_openai_error(status, content_type, body, mistake)
            except AssertionError as exc:
                failures.append(f"{case.id}: {exc}")
        assert not failures, "\n".join(failures)
        truth = GroundTruth(http)
        await truth.refresh(dep.workers)
        assert truth.records == []
        for route, good in GOOD.items():
            status, _, body = await _post(http, dep.frontend_url + route, json.dumps(good).encode())
            assert status == 200, body
    finally:
        await dep.close()
