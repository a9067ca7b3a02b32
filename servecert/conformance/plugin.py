"""The servecert pytest plugin: conformance tests as pytest items, verdicts as skips, the report.

Registered through the ``pytest11`` entry point, so it is loaded by every pytest run in an
environment where servecert is installed; without ``--implementation`` it only declares its
options and markers, and the repository's own ``tests/`` are unaffected.

Data flow. ``pytest_configure`` resolves the options into ``Settings`` (loading the adapter)
and keeps them in the config stash. The suite has one collector module,
``servecert/conformance/test_conformance.py``: ``pytest_pycollect_makemodule`` turns it into a
``ConformanceCollector``, which imports the tests package (``collect``), keeps the tests of the
requested profiles (``runner.select``) and yields one ``ConformanceItem`` per (test, case),
named ``ShortName[case-id]``, each with its verdict (``runner.decide``) fixed at collection.
Why one collector module rather than ``pytest_collect_file`` on each test module: the tests are
found by importing a package, not by walking files, so the ``--tests-package`` switch,
duplicate short-name detection and the identical order on every xdist worker all come from one
place, and framework modules such as ``suite/test_case.py`` are never mistaken for test files.

Running an item: a verdict other than ``run`` becomes ``pytest.skip(reason)`` here — the only
place — otherwise the case runs with ``event_loop.run(runner.run_case(...))`` (uvloop, which
roughly halves the loop's cost per token for the fake engines and the client that share it in the
process environment) and a failure is
re-raised. Each item's result travels as an attribute of its pytest report, which xdist ships
to the controller like the rest of the report; ``ResultsGatherer`` (controller or sole process)
merges them and writes the report at ``pytest_sessionfinish``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pluggy
import pytest

from servecert.protocol import event_loop

if TYPE_CHECKING:
    from servecert.conformance.suite.options import Settings
    from servecert.conformance.suite.runner import Decision
    from servecert.conformance.suite.test_case import Case, ConformanceTest

COLLECTOR = Path(__file__).with_name("test_conformance.py")
SUITE_DIR = Path(__file__).parent
SETTINGS = pytest.StashKey["Settings"]()
UNCONFIGURED = pytest.StashKey[bool]()  # the collector module was reached without --implementation
RECORD = "servecert_record"  # attribute of a TestReport carrying the case's result
SERIAL_GROUP = "servecert-serial"
CLUSTER_NAME_ENV = "SERVECERT_CLUSTER_NAME"  # join this embedded cluster instead of starting one
# Frames a failure's traceback leaves out: how the check was called, not what it did.
FRAMEWORK_CODE = tuple(
    str(path)
    for path in (
        SUITE_DIR / "suite",
        SUITE_DIR / "plugin.py",
        Path(asyncio.__file__).parent,
        Path(pluggy.__file__).parent,
        Path(pytest.__file__).parent.parent / "_pytest",
    )
)
MARKERS = (
    "conformance: a servecert conformance test case (added by the servecert plugin)",
    "slow: takes more than a few seconds",
    "provisional: a provisional conformance test",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    from servecert.conformance.suite import options

    group = parser.getgroup("servecert", "servecert conformance suite")
    for option in options.OPTIONS:
        group.addoption(option.flag, **option.kwargs())


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    from servecert.conformance.suite import options

    try:
        settings = options.resolve({option.dest: config.getoption(option.dest) for option in options.OPTIONS})
    except options.OptionError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings is None:
        return
    config.stash[SETTINGS] = settings
    if settings.report_dir is not None:
        # NB: tryfirst, so junitxml and allure-pytest read these defaults in their own configure.
        if getattr(config.option, "xmlpath", None) is None:
            config.option.xmlpath = str(settings.report_dir / "junit.xml")
        if hasattr(config.option, "allure_report_dir") and not config.option.allure_report_dir:
            config.option.allure_report_dir = str(settings.report_dir / "allure-results")
    if settings.tests_package not in sys.modules:  # NB: registering an imported package warns
        pytest.register_assert_rewrite(settings.tests_package)
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ResultsGatherer(settings), "servecert-results")
    if settings.run.env == "cluster":
        config.pluginmanager.register(ClusterProvider(config), "servecert-cluster")


class ClusterProvider:
    """Starts or joins the embedded cluster the first time a case of this process needs it.

    Lazily, so an xdist controller (which runs no case) never starts one; the cluster is shared
    by the run's workers (``servecert.harness.cluster.pytest_fixture.shared_embedded``, named after the
    run) and taken down by the last one out, after this process's operators are stopped.
    """

    def __init__(self, config: pytest.Config) -> None:
        import contextlib

        from servecert.conformance.suite import environments

        self.config = config
        self.stack = contextlib.ExitStack()
        environments.provide_cluster(self._start)

    def _start(self) -> Any:
        import os

        from servecert.harness.cluster import pytest_fixture

        # NB: the repository's self-tests pass their session cluster's name so certify joins it.
        name = os.environ.get(CLUSTER_NAME_ENV) or f"certify-{pytest_fixture.run_id(self.config)}"
        return self.stack.enter_context(pytest_fixture.shared_embedded(name))

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        from servecert.conformance.suite import environments

        try:
            environments.close_sessions()
        finally:
            environments.provide_cluster(None)
            environments.use_cluster(None)
            self.stack.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    settings = config.stash.get(SETTINGS, None)
    if settings is None:
        return []
    run = settings.run
    lines = [
        f"servecert: implementation {settings.implementation_name} ({settings.metadata.project} {settings.metadata.version}), "
        f"environment {run.env}, profiles {', '.join(p.name for p in settings.profiles)}",
        f"servecert: supported features ({settings.supported_features_source}): {', '.join(sorted(run.supported_features)) or 'none'}",
    ]
    if settings.ignored_features:
        lines.append(
            f"servecert: ignoring features the adapter declares but this suite does not know: {', '.join(settings.ignored_features)}"
        )
    return lines


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if config.stash.get(UNCONFIGURED, False):
        terminalreporter.write_line(f"servecert: {COLLECTOR.name} collects nothing without --implementation NAME (see docs/suite.md)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The conformance package's sub-packages (the framework, the tests) are never walked for test files."""
    if collection_path.parent == SUITE_DIR and collection_path.is_dir():
        return True
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if module_path == COLLECTOR:
        collector: pytest.Collector = ConformanceCollector.from_parent(parent, path=module_path)
        return collector
    return None


class ConformanceCollector(pytest.File):
    """The collector module as the suite's tests: one item per (test, case) of the requested profiles."""

    def collect(self) -> Iterator[pytest.Item]:
        settings = self.config.stash.get(SETTINGS, None)
        if settings is None:
            self.config.stash[UNCONFIGURED] = True
            return
        from servecert.conformance.suite import collect, runner

        try:
            tests = collect.collect(settings.tests_package)
        except collect.CollectionError as exc:
            raise self.CollectError(str(exc)) from None
        named = settings.run.skip_tests | settings.run.run_tests
        unknown = runner.unknown_names(tests, named)
        if unknown:
            known = ", ".join(t.short_name for t in tests) or "none"
            raise self.CollectError(f"--skip-tests/--run-test name unknown tests: {', '.join(unknown)}; known tests: {known}")
        selected = runner.select(tests, settings.profiles)
        outside = runner.unknown_names(selected, settings.run.run_tests)
        if outside:
            profiles = ", ".join(p.name for p in settings.profiles)
            raise self.CollectError(f"--run-test names tests outside the profiles {profiles}: {', '.join(outside)}")
        for test in selected:
            for case in test.cases:
                item = ConformanceItem.from_parent(
                    self, name=test.case_name(case), test=test, case=case, decision=runner.decide(test, case, settings.run)
                )
                _mark(item, test, settings)
                yield item


def _mark(item: pytest.Item, test: ConformanceTest, settings: Settings) -> None:
    item.add_marker(pytest.mark.conformance)
    if test.slow:
        item.add_marker(pytest.mark.slow)
    if test.provisional:
        item.add_marker(pytest.mark.provisional)
    plugins = item.config.pluginmanager
    if not test.parallel and plugins.hasplugin("xdist"):
        item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
    if plugins.hasplugin("allure_pytest"):
        item.add_marker(pytest.mark.allure_description(test.description))
        item.add_marker(pytest.mark.allure_label(*test.features, label_type="feature"))
        item.add_marker(pytest.mark.allure_label(test.short_name, label_type="story"))
        item.add_marker(pytest.mark.allure_label(test.short_name, label_type="suite"))
        epics = [p.name for p in settings.profiles if p.covers(test.features)]
        item.add_marker(pytest.mark.allure_label(*epics, label_type="epic"))
        item.add_marker(pytest.mark.allure_label(*epics, label_type="parentSuite"))


class ConformanceItem(pytest.Item):
    """One case of one conformance test; its verdict was decided at collection."""

    def __init__(self, *, test: ConformanceTest, case: Case, decision: Decision, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.test = test
        self.case = case
        self.decision = decision
        self.record: dict[str, Any] | None = None

    def runtest(self) -> None:
        from servecert.conformance.suite import reporting, runner

        settings = self.config.stash[SETTINGS]
        if self.config.pluginmanager.hasplugin("allure_pytest"):
            import allure

            # NB: allure tells apart results by parameters; without one the cases of a test look like retries.
            allure.dynamic.parameter("case", self.case.id)
        if self.decision.verdict is not runner.Verdict.RUN:
            self.record = reporting.record(self.test.short_name, self.case.id, str(self.decision.verdict), message=self.decision.reason)
            pytest.skip(f"{self.decision.verdict}: {self.decision.reason}")
        outcome = event_loop.run(runner.run_case(self.test, self.case, settings.implementation, settings.run))
        self.record = reporting.record(
            self.test.short_name,
            self.case.id,
            outcome.status,
            message=outcome.message,
            detail=outcome.detail,
            error=outcome.error,
            duration_s=outcome.duration_s,
            phase=outcome.phase,
        )
        if outcome.exception is not None:
            raise outcome.exception

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        # NB: show the check's frames, not the runner's and asyncio's that led to it.
        kept = excinfo.traceback.filter(lambda entry: not str(entry.path).startswith(FRAMEWORK_CODE))
        if not kept:  # a missed deadline or a failed cleanup: the message says it all
            return f"{type(excinfo.value).__name__}: {excinfo.value}"
        excinfo.traceback = kept
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.name} ({self.test.source})"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if isinstance(item, ConformanceItem):
        if call.when == "call" and item.record is not None:
            setattr(report, RECORD, item.record)
            if report.skipped and isinstance(report.longrepr, tuple):
                # NB: point the skip at the test, not at the pytest.skip() call in this plugin.
                # pytest prints a skip without a line number when the line is None.
                reason = f"{item.name}: {report.longrepr[2].removeprefix('Skipped: ')}"
                report.longrepr = (str(item.path), None, reason)  # type: ignore[assignment]
        elif report.failed:
            setattr(report, RECORD, _outside_record(item, call, report))
    return report


def _outside_record(item: ConformanceItem, call: pytest.CallInfo[None], report: pytest.TestReport) -> dict[str, Any]:
    """A failure the case's runner did not see (pytest-timeout, a fixture, pytest's own setup or teardown)."""
    from servecert.conformance.suite import reporting

    crash = getattr(report.longrepr, "reprcrash", None)
    lines = str(report.longrepr).strip().splitlines()
    cause = crash.message if crash is not None else (lines[-1] if lines else "no message")
    message = f"failed in pytest's {call.when} of the item after {call.duration:.1f} s: {cause}"
    return reporting.record(
        item.test.short_name,
        item.case.id,
        "failed",
        message=message,
        error=True,
        detail=str(report.longrepr),
        duration_s=call.duration,
        phase=f"pytest {call.when}",
    )


class ResultsGatherer:
    """On the controller (or the only process): merge each case's record and write the report."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.records: dict[tuple[str, str], dict[str, Any]] = {}
        self.lines: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        from servecert.conformance.suite import reporting

        record = getattr(report, RECORD, None)
        if record is None and report.failed and report.nodeid.split("::", 1)[0].endswith(COLLECTOR.name):
            # NB: a crashed xdist worker leaves a failed report without our record.
            record = reporting.record_from_nodeid(report.nodeid, f"no result from the item ({report.when} failed)")
        if record is not None:
            reporting.merge(self.records, record)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if session.config.option.collectonly or (self.settings.report_dir is None and not self.records):
            return
        if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
            self.lines = [f"no conformance report: the run did not complete (exit status {int(exitstatus)})"]
            return
        from servecert.conformance.suite import collect, reporting, runner
        from servecert.reports import conformance_report

        try:
            tests = runner.select(collect.collect(self.settings.tests_package), self.settings.profiles)
        except collect.CollectionError as exc:
            self.lines = [f"no conformance report: {exc}"]
            return
        report, specs, cases = reporting.build(self.settings, tests, self.records)
        self.lines = conformance_report.result_lines(report) + reporting.setup_failure_lines(cases)
        if self.settings.report_dir is not None:
            for path in reporting.write(self.settings.report_dir, report, specs, cases):
                self.lines.append(f"wrote {path}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.lines:
            terminalreporter.section("servecert conformance")
            for line in self.lines:
                terminalreporter.write_line(line)
