"""A conformance test declared as data plus one async check, and the context the check runs in.

One test per module: a module under ``servecert/conformance/tests/`` defines ``TEST = ConformanceTest(...)``
(gateway-api declares ``ShortName``, ``Description``, ``Features``, ``Manifests``, ``Slow``,
``Parallel``, ``Provisional`` and one ``Test`` func the same way). Everything the runner needs to
decide whether and where the test runs is in the declaration, so the check itself never skips:
it deploys what it needs through ``ctx.deploy`` and asserts. ``cases`` parameterize a test: the
runner runs the check once per case, and ``ctx.params`` is that case's parameters. ``seed``
cites the seed sentence or table row the rule comes from (``SeedRef``), so a reviewer can hold
the test against the specification; ``docs/traceability.md`` lists them all.

``TestContext`` is built by the runner for one case: the implementation under test, a fresh
environment, the timeouts, the case, and a cleanup stack that the runner unwinds (in reverse)
after the check, whatever happened — a deployment made through ``ctx.deploy`` is closed there.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from servecert.conformance.suite import phases

if TYPE_CHECKING:
    from servecert.adapters.contract import Deployment, DeploymentSpec, Implementation
    from servecert.conformance.suite.timeouts import Timeouts
    from servecert.harness.environment import Cleanup, SuiteEnvironment

ENVIRONMENTS = frozenset({"process", "cluster"})
SHORT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")
CASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
SEEDS = ("000", "001", "002", "003", "004")  # the five seed specifications (see docs/traceability.md)
QUOTE_MAX = 240

Check = Callable[["TestContext"], Awaitable[None]]


@dataclass(frozen=True)
class Case:
    """One parameterization of a test: ``id`` names it in reports (``ShortName[id]``).

    ``environments``: where this case adds evidence, within its test's; elsewhere its verdict is
    ``wrong-environment`` and the report lists it as judged elsewhere (a rule judged at every
    level in process need not be judged at every level again on a cluster, ``docs/suite.md``).
    """

    id: str
    params: Mapping[str, Any] = field(default_factory=dict, hash=False)
    environments: frozenset[str] = ENVIRONMENTS

    def __post_init__(self) -> None:
        if not CASE_ID.fullmatch(self.id):
            raise ValueError(f"case id {self.id!r} must match {CASE_ID.pattern}")
        if not self.environments or not self.environments <= ENVIRONMENTS:
            raise ValueError(f"case {self.id!r}: environments must be a non-empty subset of {sorted(ENVIRONMENTS)}")
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))


@dataclass(frozen=True)
class SeedRef:
    """Where a test's rule is written: the seed, its section (heading as written), a verbatim quote.

    ``quote`` is one line of the seed, copied exactly, so ``tests/conformance/suite/test_seed_citations.py``
    can find it in the seed's text; ``note`` says when the suite adds to what the seed states.
    """

    seed: str
    section: str
    quote: str
    note: str = ""

    def __post_init__(self) -> None:
        if self.seed not in SEEDS:
            raise ValueError(f"seed {self.seed!r} is not one of {', '.join(SEEDS)}")
        if not self.section.strip():
            raise ValueError(f"seed {self.seed}: section is empty")
        if not self.quote.strip() or "\n" in self.quote or len(self.quote) > QUOTE_MAX:
            raise ValueError(f"seed {self.seed} {self.section}: quote must be one non-empty line of at most {QUOTE_MAX} characters")

    def __str__(self) -> str:
        return f"seed {self.seed}, {self.section}"


@dataclass(frozen=True, kw_only=True)
class ConformanceTest:
    """The declaration of one conformance test.

    ``features``: all must be supported for the test to run (and decide which profiles it
    belongs to). ``seed``: the seed sentence or table row the rule comes from. ``slow``: takes
    more than a few seconds. ``parallel``: may run beside other tests (``False`` keeps it on one
    xdist worker with the other serial tests).
    ``provisional``: runs only with ``--include-provisional`` and never decides a result.
    ``environments``: where it can run. ``source`` is filled in by the collector.
    """

    __test__ = False  # NB: not a pytest test class, even when imported into a test module.

    short_name: str
    description: str
    features: tuple[str, ...]
    check: Check
    seed: SeedRef
    slow: bool = False
    parallel: bool = True
    provisional: bool = False
    environments: frozenset[str] = ENVIRONMENTS
    cases: tuple[Case, ...] = (Case("default"),)
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        where = f"conformance test {self.short_name!r}"
        if not SHORT_NAME.fullmatch(self.short_name):
            raise ValueError(f"{where}: short_name must be CamelCase ({SHORT_NAME.pattern})")
        if not self.description.strip():
            raise ValueError(f"{where}: description is empty")
        if not self.features or isinstance(self.features, str):
            raise ValueError(f"{where}: features must be a non-empty tuple of feature names")
        if not isinstance(self.seed, SeedRef):
            raise ValueError(f"{where}: seed must be a SeedRef citing the seed sentence the rule comes from")
        if not self.environments or not self.environments <= ENVIRONMENTS:
            raise ValueError(f"{where}: environments must be a non-empty subset of {sorted(ENVIRONMENTS)}")
        if not self.cases:
            raise ValueError(f"{where}: cases is empty")
        ids = [case.id for case in self.cases]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{where}: duplicate case ids in {ids}")
        nowhere = [case.id for case in self.cases if not case.environments & self.environments]
        if nowhere:
            raise ValueError(f"{where}: cases {nowhere} run in none of the test's environments {sorted(self.environments)}")
        if not inspect.iscoroutinefunction(self.check):
            raise ValueError(f"{where}: check must be an async function taking a TestContext")

    def case_name(self, case: Case) -> str:
        return f"{self.short_name}[{case.id}]"

    def runs_in(self, case: Case) -> frozenset[str]:
        """The environments where ``case`` runs: its test's and its own."""
        return self.environments & case.environments


class DeployTimeout(phases.DeploymentNotReady):
    """The implementation did not deploy within ``deploy_ready_s``: a conformance failure, in setup."""


@dataclass(repr=False)
class TestContext:
    """What a check gets: the implementation, a fresh environment, timeouts, its case, cleanups."""

    __test__ = False  # NB: the name starts with "Test"; keep pytest from collecting it.

    implementation: Implementation
    env: SuiteEnvironment
    timeouts: Timeouts
    case: Case
    test: ConformanceTest
    log: logging.Logger
    cleanups: list[Cleanup] = field(default_factory=list)
    deadline: asyncio.Timeout | None = None
    """The case's ``test_s`` deadline, set by the runner; ``extend_deadline`` moves it."""
    extensions: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<TestContext {self.name} in {self.env.name}>"

    def extend_deadline(self, seconds: float, why: str) -> None:
        """Give the case ``seconds`` more than ``test_s``, for a length the run's settings set, not the implementation:
        a planner scenario lasts its simulated length over ``planner_time_scale`` (at scale 1 a 170 s scenario alone is
        past the 120 s of ``test_s``). The case timeout's message names each extension."""
        if self.deadline is None or seconds <= 0:
            return
        when = self.deadline.when()
        if when is not None:
            self.deadline.reschedule(when + seconds)
            self.extensions.append(f"+{seconds:.3g} s ({why})")

    @property
    def params(self) -> Mapping[str, Any]:
        return self.case.params

    @property
    def name(self) -> str:
        return self.test.case_name(self.case)

    def add_cleanup(self, cleanup: Cleanup) -> None:
        """Run ``cleanup()`` after the check, in reverse order of registration, each bounded by cleanup_s."""
        self.cleanups.append(cleanup)

    async def deploy(self, spec: DeploymentSpec) -> Deployment:
        """Deploy ``spec`` within its bound; the deployment is closed after the check.

        The environment owns how (``servecert.harness.environment``): in process the implementation's
        adapter deploys it (``deploy_ready_s``); on a cluster the suite writes the DGD and the
        implementation's operator makes it real (``pods_ready_s``), so the same checks judge both.
        """
        bound, key = self.env.deploy_bound(self.timeouts)
        deadline = asyncio.timeout(bound)
        try:
            async with deadline:
                return await self.env.deploy(spec, self.implementation, self.timeouts, self.add_cleanup)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise DeployTimeout(f"{self.name}: the implementation did not deploy {spec.model!r} within {key}={bound:g} s") from None
