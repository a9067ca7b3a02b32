"""Test-only adapters for the suite's self-tests, loaded as ``tests.conformance.suite.sample_adapter:NAME``.

A deployment here starts nothing: it only carries a frontend URL. The sample conformance tests
(``tests.conformance.suite.sample_tests``) pass when the URL is ``GOOD_URL``, so the same tests pass against
``FULL`` and fail against ``BROKEN``; ``CRASHING`` raises from ``deploy`` (an error, not a
failure), ``HANGING`` never finishes deploying. Every deploy and close is appended to ``EVENTS``
(a file named by the environment variable ``SERVECERT_SAMPLE_EVENTS``, when set).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field

from servecert import features
from servecert.adapters.contract import DeploymentSpec, Environment, ImplementationMetadata, WorkerRef, WorkerSpec

GOOD_URL = "http://frontend.sample.invalid"
CORE = frozenset({features.DISAGGREGATED_SERVING, features.KV_TRANSFER_TOPOLOGY_FILTER, features.KV_TRANSFER_TOPOLOGY_UNSET})
METADATA = ImplementationMetadata(organization="servecert", project="sample", url="https://example.invalid/sample", version="v0.0.1")


def _event(text: str) -> None:
    path = os.environ.get("SERVECERT_SAMPLE_EVENTS")
    if path:
        with open(path, "a") as out:
            out.write(text + "\n")


@dataclass
class SampleDeployment:
    frontend_url: str
    model: str
    workers: list[WorkerRef] = field(default_factory=list)

    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        raise NotImplementedError

    async def remove_worker(self, ref: WorkerRef) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        _event(f"close {self.model}")


@dataclass
class SampleImplementation:
    supported_features: frozenset[str]
    frontend_url: str = GOOD_URL
    behaviour: str = "ok"  # ok | crash | hang
    metadata: ImplementationMetadata = METADATA

    async def deploy(self, spec: DeploymentSpec, env: Environment) -> SampleDeployment:
        _event(f"deploy {spec.model} in {env.name}")
        if self.behaviour == "crash":
            raise RuntimeError("the sample adapter crashed on purpose")
        if self.behaviour == "hang":
            await asyncio.Event().wait()
        return SampleDeployment(self.frontend_url, spec.model)


FULL = SampleImplementation(features.names())
CORE_ONLY = SampleImplementation(CORE)
BROKEN = SampleImplementation(features.names(), frontend_url="http://wrong.sample.invalid")
CRASHING = SampleImplementation(features.names(), behaviour="crash")
HANGING = SampleImplementation(features.names(), behaviour="hang")
