"""Steps shared by the router conformance tests: deploy a shape, send traffic, read ground truth."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aiohttp

from servecert.adapters.contract import Deployment, DeploymentSpec, RouterSpec, WorkerRef, WorkerSpec
from servecert.conformance.tests.router_topology._placements import MODEL
from servecert.harness import traffic
from servecert.harness.observe import GroundTruth, Transfer

DEFAULT_REQUESTS = 24
DEFAULT_CONCURRENCY = 6


def spec(
    workers: Sequence[WorkerSpec],
    level: str | None,
    policy: str | None = "fail",
    time_scale: float = 0.0,
    timing: str = "polynomial",
    standby: Sequence[WorkerSpec] = (),
) -> DeploymentSpec:
    return DeploymentSpec(
        model=MODEL,
        router=RouterSpec(topology_level=level, mismatch_policy=policy),
        workers=tuple(workers),
        standby=tuple(standby),
        time_scale=time_scale,
        timing=timing,
    )


@dataclass
class Run:
    outcomes: list[traffic.Outcome]
    truth: GroundTruth

    def transfers(self) -> list[Transfer]:
        return self.truth.transfers()


async def drive(
    session: aiohttp.ClientSession,
    deployment: Deployment,
    count: int = DEFAULT_REQUESTS,
    concurrency: int = DEFAULT_CONCURRENCY,
    max_tokens: int = 8,
    truth: GroundTruth | None = None,
) -> Run:
    """Send ``count`` unique completions through the frontend, then read every engine's log."""
    outcomes = await traffic.many(session, deployment.frontend_url, MODEL, count, concurrency, max_tokens)
    truth = truth or GroundTruth(session)
    await truth.refresh(deployment.workers)
    return Run(outcomes, truth)


async def recorded_by(session: aiohttp.ClientSession, deployment: Deployment, worker: WorkerRef) -> bool:
    """Send one request through the frontend; true when it succeeded and ``worker``'s ground truth has it (by its prompt)."""
    prompt = traffic.unique_prompt()
    out = await traffic.complete(session, deployment.frontend_url, MODEL, prompt)
    if not out.ok:
        return False
    truth = GroundTruth(session)
    await truth.refresh([worker])
    return bool(truth.by_prompt(prompt))


def engines(refs: Sequence[WorkerRef]) -> set[str]:
    return {r.engine_id for r in refs}
