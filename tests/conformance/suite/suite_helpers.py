"""Shared pieces of the framework's self-tests: in-test adapters, tests, and inner suite runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from servecert import features
from servecert.conformance import plugin
from servecert.conformance.suite.test_case import Case, ConformanceTest, SeedRef, TestContext

Check = Callable[[TestContext], Awaitable[None]]
SAMPLE_TESTS = "tests.conformance.suite.sample_tests"
ADAPTER = "tests.conformance.suite.sample_adapter"
# NB: an inner session in this process finds servecert's packages already imported; pytest warns that
# it cannot rewrite their asserts (servecert's distribution provides a pytest11 plugin), which is fine.
# A citation for the self-tests' own tests (they are not conformance tests; no seed states them).
SAMPLE_SEED = SeedRef("000", "self-test", "a sample test of the framework", note="not a seed rule")
INNER = ("-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")


async def passing_check(ctx: TestContext) -> None:
    return None


def declare(
    short_name: str = "Example",
    *,
    feature_names: tuple[str, ...] = (features.DISAGGREGATED_SERVING,),
    check: Check = passing_check,
    **kwargs: Any,
) -> ConformanceTest:
    kwargs.setdefault("seed", SAMPLE_SEED)
    return ConformanceTest(
        short_name=short_name, description=f"{short_name} for a self-test.", features=feature_names, check=check, **kwargs
    )


def two_cases() -> tuple[Case, ...]:
    return (Case("a", {"n": 1}), Case("b", {"n": 2}))


def run_suite(pytester: pytest.Pytester, adapter: str, *args: str, tests_package: str = SAMPLE_TESTS) -> pytest.RunResult:
    """An inner pytest session over the suite's collector module, with the sample tests by default."""
    return pytester.runpytest(
        str(plugin.COLLECTOR),
        f"--implementation={ADAPTER}:{adapter}",
        f"--tests-package={tests_package}",
        *INNER,
        "-rs",
        *args,
    )
