"""The one check the sample tests share: deploy, and expect the sample adapter's good frontend."""

from __future__ import annotations

from servecert.adapters.contract import DeploymentSpec, WorkerSpec
from servecert.conformance.suite.test_case import TestContext

GOOD_URL = "http://frontend.sample.invalid"


async def deploy_and_expect_good_frontend(ctx: TestContext) -> None:
    workers = tuple(WorkerSpec(role="decode", name=f"d{i}") for i in range(int(ctx.params.get("workers", 1))))
    deployment = await ctx.deploy(DeploymentSpec(model=f"{ctx.test.short_name}-{ctx.case.id}", workers=workers))
    assert deployment.frontend_url == GOOD_URL, f"frontend {deployment.frontend_url}, expected {GOOD_URL}"
