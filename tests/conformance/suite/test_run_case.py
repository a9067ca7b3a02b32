"""How one case runs: deadlines, failures versus errors, and cleanups that always happen in reverse."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from servecert.adapters.contract import DeploymentSpec, Environment, WorkerRef, WorkerSpec
from servecert.conformance.suite import runner, timeouts
from servecert.conformance.suite.test_case import DeployTimeout, TestContext
from tests.conformance.suite import sample_adapter, suite_helpers

QUICK = timeouts.Timeouts(test_s=0.5, deploy_ready_s=0.2, cleanup_s=0.2)


@dataclass
class RecordingDeployment:
    events: list[str]
    frontend_url: str = "http://frontend.invalid"
    workers: list[WorkerRef] = field(default_factory=list)

    async def add_worker(self, spec: WorkerSpec) -> WorkerRef:
        raise NotImplementedError

    async def remove_worker(self, ref: WorkerRef) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        self.events.append("deployment closed")


@dataclass
class RecordingImplementation:
    events: list[str] = field(default_factory=list)
    supported_features: frozenset[str] = frozenset()
    metadata: object = sample_adapter.METADATA
    hang: bool = False

    async def deploy(self, spec: DeploymentSpec, env: Environment) -> RecordingDeployment:
        self.events.append(f"deploy in {env.name}")
        if self.hang:
            await asyncio.Event().wait()
        return RecordingDeployment(self.events)


async def run(check: suite_helpers.Check, impl: RecordingImplementation | None = None, **options: object) -> runner.CaseOutcome:
    test = suite_helpers.declare(check=check)
    return await runner.run_case(test, test.cases[0], impl or RecordingImplementation(), runner.RunOptions(timeouts=QUICK, **options))  # type: ignore[arg-type]


async def test_a_check_that_returns_passes() -> None:
    outcome = await run(suite_helpers.passing_check)
    assert (outcome.status, outcome.message, outcome.exception) == (runner.PASSED, "", None)


async def test_an_assertion_is_a_failure_and_not_an_error() -> None:
    async def check(ctx: TestContext) -> None:
        raise AssertionError("decode worker d1 is in zone b, expected zone a")

    outcome = await run(check)
    assert (outcome.status, outcome.error) == (runner.FAILED, False)
    assert outcome.message == "decode worker d1 is in zone b, expected zone a"
    assert isinstance(outcome.exception, AssertionError)


async def test_any_other_exception_is_a_failure_marked_as_an_error_with_its_traceback() -> None:
    async def check(ctx: TestContext) -> None:
        raise KeyError("workers")

    outcome = await run(check)
    assert (outcome.status, outcome.error) == (runner.FAILED, True)
    assert outcome.message == "KeyError: 'workers'"
    assert "Traceback" in outcome.detail and "raise KeyError" in outcome.detail


async def test_a_check_past_test_s_fails_naming_the_deadline() -> None:
    async def check(ctx: TestContext) -> None:
        await asyncio.sleep(10)

    outcome = await run(check)
    assert isinstance(outcome.exception, runner.CaseTimeout)
    assert outcome.message == "Example[default] did not finish within test_s=0.5 s"
    assert not outcome.error


async def test_a_length_the_runs_settings_set_extends_the_deadline_by_that_much_and_no_more() -> None:
    async def within(ctx: TestContext) -> None:
        ctx.extend_deadline(0.5, "the scenario's length")
        await asyncio.sleep(0.8)  # past test_s, within the extension

    assert (await run(within)).status == runner.PASSED

    async def past(ctx: TestContext) -> None:
        ctx.extend_deadline(0.3, "the scenario's length")
        await asyncio.sleep(10)

    outcome = await run(past)
    assert isinstance(outcome.exception, runner.CaseTimeout)
    assert outcome.message == "Example[default] did not finish within test_s=0.5 s +0.3 s (the scenario's length)"


async def test_a_deployment_slower_than_deploy_ready_s_is_a_conformance_failure() -> None:
    async def check(ctx: TestContext) -> None:
        await ctx.deploy(DeploymentSpec(model="m"))

    outcome = await run(check, RecordingImplementation(hang=True))
    assert isinstance(outcome.exception, DeployTimeout)
    assert "within deploy_ready_s=0.2 s" in outcome.message


async def test_cleanups_run_in_reverse_after_a_failure_and_the_deployment_is_closed() -> None:
    impl = RecordingImplementation()

    async def check(ctx: TestContext) -> None:
        async def first() -> None:
            impl.events.append("first cleanup")

        ctx.add_cleanup(first)
        await ctx.deploy(DeploymentSpec(model="m"))

        async def last() -> None:
            impl.events.append("last cleanup")

        ctx.add_cleanup(last)
        raise AssertionError("boom")

    outcome = await run(check, impl)
    assert outcome.status == runner.FAILED
    assert impl.events == ["deploy in process", "last cleanup", "deployment closed", "first cleanup"]


async def test_a_failing_cleanup_fails_a_passing_check_as_an_error_and_the_others_still_run() -> None:
    impl = RecordingImplementation()

    async def check(ctx: TestContext) -> None:
        async def survivor() -> None:
            impl.events.append("survivor")

        async def broken() -> None:
            raise RuntimeError("cannot delete")

        async def stuck() -> None:
            await asyncio.sleep(10)

        for cleanup in (survivor, broken, stuck):
            ctx.add_cleanup(cleanup)

    outcome = await run(check, impl)
    assert (outcome.status, outcome.error) == (runner.FAILED, True)
    assert isinstance(outcome.exception, runner.CleanupError)
    assert "stuck did not finish within cleanup_s=0.2 s" in outcome.detail
    assert "broken failed" in outcome.detail and "cannot delete" in outcome.detail
    assert impl.events == ["survivor"]


async def test_the_context_carries_the_case_parameters() -> None:
    seen: list[object] = []

    async def check(ctx: TestContext) -> None:
        seen.append(ctx.params["n"])
        seen.append(ctx.name)
        seen.append(ctx.env.name)

    test = suite_helpers.declare(check=check, cases=suite_helpers.two_cases())
    for case in test.cases:
        await runner.run_case(test, case, RecordingImplementation(), runner.RunOptions(timeouts=QUICK))  # type: ignore[arg-type]
    assert seen == [1, "Example[a]", "process", 2, "Example[b]", "process"]
