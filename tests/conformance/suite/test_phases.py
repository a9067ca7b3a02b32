"""Where a case failed: in setup (which step, how long, which log), in its check, or in cleanup."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from servecert.adapters.contract import DeploymentSpec
from servecert.conformance.suite import environments, phases, runner
from servecert.conformance.suite.test_case import TestContext
from servecert.harness.environment import SuiteEnvironment
from tests.conformance.suite import suite_helpers
from tests.conformance.suite.test_run_case import RecordingImplementation, run


@pytest.mark.parametrize(
    ("message", "log"),
    [
        ("cluster c did not come up: etcd exited.\nLogs: /cache/clusters/c/logs", "/cache/clusters/c/logs"),
        ("the operator exited with 1; log /cache/operators/ab-1/operator.log:\nTraceback", "/cache/operators/ab-1/operator.log"),
        ("kwok failed (exit status 2). Full log: /cache/logs/kwok.log\nLast lines:", "/cache/logs/kwok.log"),
        ("decode worker d1 is in zone b", ""),
    ],
)
def test_the_log_a_message_names_is_found(message: str, log: str) -> None:
    assert phases.log_named_in(message) == log


async def test_a_check_that_asserts_fails_in_check() -> None:
    async def check(ctx: TestContext) -> None:
        raise AssertionError("decode worker d1 is in zone b")

    assert (await run(check)).phase == "check"


async def test_a_deployment_that_never_became_ready_fails_in_setup() -> None:
    async def check(ctx: TestContext) -> None:
        await ctx.deploy(DeploymentSpec(model="m"))

    outcome = await run(check, RecordingImplementation(hang=True))
    assert outcome.phase == "setup: deployment readiness"
    assert not outcome.error, "a deployment that never became ready is the implementation's failure, not an error"


async def test_an_environment_that_cannot_be_set_up_fails_in_setup_naming_step_time_and_log(monkeypatch: pytest.MonkeyPatch) -> None:
    def create(name: str, implementation: object = None) -> SuiteEnvironment:
        cause = RuntimeError("the operator exited with 1; log /ops/x/operator.log:\nboom")
        raise phases.SetupFailed(phases.OPERATOR_INSTALL, cause, 2.5)

    monkeypatch.setattr(environments, "create", create)
    outcome = await run(suite_helpers.passing_check)
    assert (outcome.status, outcome.phase, outcome.error) == (runner.FAILED, "setup: operator install", True)
    assert outcome.message.startswith("setup failed at operator install after 2.5 s: RuntimeError: the operator exited")
    assert outcome.message.endswith("log: /ops/x/operator.log")
    assert outcome.duration_s > 0.0


@pytest.fixture
def no_cluster() -> Iterator[None]:
    yield
    environments.provide_cluster(None)
    environments.use_cluster(None)


@pytest.mark.usefixtures("no_cluster")
def test_a_failed_bring_up_is_not_tried_again_by_every_later_case() -> None:
    calls: list[int] = []

    def provider() -> environments.Cluster:
        calls.append(1)
        raise RuntimeError("cluster c did not come up: etcd exited.\nLogs: /c/logs")

    environments.provide_cluster(provider)
    with pytest.raises(phases.SetupFailed) as first:
        environments.create("cluster", object())
    with pytest.raises(phases.SetupFailed) as second:
        environments.create("cluster", object())
    assert calls == [1]
    assert first.value.step == second.value.step == phases.CLUSTER_BRING_UP
    assert first.value.log == second.value.log == "/c/logs"
    assert "it failed earlier in this run" in str(second.value)
