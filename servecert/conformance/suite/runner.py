"""Which tests run, and how one case runs: the one place in the suite that decides to skip.

Data flow. ``select`` keeps the tests of the requested profiles (all of a test's features in the
profile). ``decide`` gives each (test, case) a verdict before anything starts, in this order:
``skipped`` (not named by ``--run-test`` when it is given, or named by ``--skip-tests``),
``wrong-environment`` (the test cannot run in this environment), ``provisional-skipped``
(provisional without ``--include-provisional``), ``not-supported`` (a feature the implementation
does not support), else ``run``. A test named by ``--run-test`` runs even when provisional or its
features are unsupported (gateway-api PR #2835): naming it is the opt-in. Tests and cases are
named ``ShortName`` or ``ShortName[case-id]`` in both lists.

``run_case`` creates a fresh environment, builds the ``TestContext``, awaits the check under the
``test_s`` deadline, unwinds the cleanups in reverse order (each bounded by ``cleanup_s``) and
closes the environment — whatever the check did. A step of the environment's setup that fails
(the cluster's bring-up, the operator's install) fails the case in setup, naming the step, its
time and its log (``phases``); so does a deployment that never became ready. An ``AssertionError`` (including a missed
deadline) is a failure; any other exception is a failure marked as an error, with its traceback.
The outcome is plain data plus the exception, which the pytest item re-raises.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from servecert.conformance.suite import environments, phases
from servecert.conformance.suite.test_case import Case, ConformanceTest, TestContext
from servecert.conformance.suite.timeouts import Timeouts

if TYPE_CHECKING:
    from servecert.adapters.contract import Implementation
    from servecert.conformance.suite.profiles import Profile
    from servecert.harness.environment import Cleanup, SuiteEnvironment

PASSED = "passed"
FAILED = "failed"
MESSAGE_LIMIT = 2000  # characters of a failure message kept for the report


class Verdict(StrEnum):
    RUN = "run"
    NOT_SUPPORTED = "not-supported"
    SKIPPED = "skipped"
    PROVISIONAL_SKIPPED = "provisional-skipped"
    WRONG_ENVIRONMENT = "wrong-environment"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str = ""


@dataclass(frozen=True)
class RunOptions:
    """What the verdicts and the run depend on, already validated (see ``options.resolve``)."""

    env: str = "process"
    supported_features: frozenset[str] = frozenset()
    skip_tests: frozenset[str] = frozenset()
    run_tests: frozenset[str] = frozenset()
    include_provisional: bool = False
    timeouts: Timeouts = field(default_factory=Timeouts)


class CaseTimeout(AssertionError):
    """The check did not finish within ``test_s``."""


class CleanupError(RuntimeError):
    """The check passed but a cleanup or the environment's close failed."""


@dataclass
class CaseOutcome:
    status: str  # PASSED | FAILED
    message: str = ""
    detail: str = ""
    error: bool = False
    duration_s: float = 0.0
    phase: str = ""  # where it failed: phases.SETUP (with the step), CHECK or CLEANUP; '' when it passed
    exception: BaseException | None = field(default=None, repr=False)


def supported_features(
    declared: Iterable[str],
    *,
    manual: Iterable[str] | None = None,
    exempt: Iterable[str] = (),
    all_features: bool = False,
    known: Iterable[str] = (),
) -> frozenset[str]:
    """gateway-api's rule: all known features with ``--all-features``, else the manual list when
    given, else what the implementation declares; minus the exempt ones in every case."""
    if all_features:
        base = frozenset(known)
    elif manual is not None:
        base = frozenset(manual)
    else:
        base = frozenset(declared)
    return base - frozenset(exempt)


def select(tests: Iterable[ConformanceTest], profiles: Sequence[Profile]) -> list[ConformanceTest]:
    """The tests that belong to at least one of the profiles, in their given order."""
    return [test for test in tests if any(profile.covers(test.features) for profile in profiles)]


def names(test: ConformanceTest, case: Case) -> tuple[str, str]:
    return test.short_name, test.case_name(case)


def unknown_names(tests: Iterable[ConformanceTest], wanted: Iterable[str]) -> list[str]:
    """The names in ``wanted`` that are neither a test's short name nor one of its ``ShortName[case]``."""
    known = {name for test in tests for case in test.cases for name in names(test, case)}
    return sorted(set(wanted) - known)


def decide(test: ConformanceTest, case: Case, options: RunOptions) -> Decision:
    focused = bool(options.run_tests.intersection(names(test, case)))
    if options.run_tests and not focused:
        return Decision(Verdict.SKIPPED, "not selected by --run-test")
    if options.skip_tests.intersection(names(test, case)):
        return Decision(Verdict.SKIPPED, "listed in --skip-tests")
    where = test.runs_in(case)
    if options.env not in where:
        runs_in = ", ".join(sorted(where))
        why = "; ".join(filter(None, (environments.unavailable_reason(env) for env in sorted(where))))
        what = "runs" if options.env not in test.environments else "this case runs"
        return Decision(Verdict.WRONG_ENVIRONMENT, f"{what} only in: {runs_in}; this run uses {options.env}" + (f" ({why})" if why else ""))
    if test.provisional and not options.include_provisional and not focused:
        return Decision(Verdict.PROVISIONAL_SKIPPED, "provisional test; pass --include-provisional to run it")
    missing = [name for name in test.features if name not in options.supported_features]
    if missing and not focused:
        return Decision(Verdict.NOT_SUPPORTED, f"unsupported feature(s): {', '.join(missing)}")
    return Decision(Verdict.RUN)


async def run_case(test: ConformanceTest, case: Case, implementation: Implementation, options: RunOptions) -> CaseOutcome:
    """Run one case of one test in a fresh environment; never raises for what the check does."""
    started = time.monotonic()
    try:
        env = environments.create(options.env, implementation)
    except phases.SetupFailed as exc:
        return _outcome(exc, [], time.monotonic() - started)
    ctx = TestContext(
        implementation=implementation,
        env=env,
        timeouts=options.timeouts,
        case=case,
        test=test,
        log=logging.getLogger(f"servecert.conformance.{test.short_name}"),
    )
    failure: Exception | None = None
    try:
        deadline = asyncio.timeout(options.timeouts.test_s)
        ctx.deadline = deadline
        try:
            async with deadline:
                await test.check(ctx)
        except TimeoutError as exc:
            extended = "".join(f" {e}" for e in ctx.extensions)
            message = f"{ctx.name} did not finish within test_s={options.timeouts.test_s:g} s{extended}"
            failure = CaseTimeout(message) if deadline.expired() else exc
        except Exception as exc:
            failure = exc
    finally:
        problems = await _unwind(ctx, env, options.timeouts.cleanup_s)
    return _outcome(failure, problems, time.monotonic() - started)


async def _bounded(what: str, call: Cleanup, limit_s: float) -> str:
    """Await ``call()`` within ``limit_s``; return a description of what went wrong, or ''."""
    try:
        async with asyncio.timeout(limit_s):
            await call()
    except TimeoutError:
        return f"{what} did not finish within cleanup_s={limit_s:g} s"
    except Exception as exc:
        return f"{what} failed: " + "".join(traceback.format_exception(exc)).rstrip()
    return ""


async def _unwind(ctx: TestContext, env: SuiteEnvironment, limit_s: float) -> list[str]:
    problems = []
    for cleanup in reversed(ctx.cleanups):
        problems.append(await _bounded(f"cleanup {getattr(cleanup, '__qualname__', repr(cleanup))}", cleanup, limit_s))
    ctx.cleanups.clear()
    problems.append(await _bounded(f"closing the {env.name} environment", env.close, limit_s))
    return [p for p in problems if p]


def _message(exc: BaseException) -> str:
    text = str(exc).strip()
    if not text:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        text = f"{type(exc).__name__}{where}"
    elif not isinstance(exc, (AssertionError, phases.SetupFailed)):  # NB: SetupFailed's text says what it is
        text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= MESSAGE_LIMIT else text[:MESSAGE_LIMIT] + " [...]"


def _outcome(failure: Exception | None, problems: list[str], duration_s: float) -> CaseOutcome:
    after = "\n\n".join(problems)
    if failure is None and not problems:
        return CaseOutcome(PASSED, duration_s=duration_s)
    phase = phases.describe(failure, cleanup_failed=bool(problems)).label()
    if failure is None:
        error = CleanupError(after)
        return CaseOutcome(FAILED, message=_message(error), detail=after, error=True, duration_s=duration_s, phase=phase, exception=error)
    detail = "".join(traceback.format_exception(failure)).rstrip()
    if after:
        detail += "\n\nAfter the check:\n" + after
    return CaseOutcome(
        FAILED,
        message=_message(failure),
        detail=detail,
        error=not isinstance(failure, AssertionError),
        duration_s=duration_s,
        phase=phase,
        exception=failure,
    )
