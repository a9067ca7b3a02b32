"""``servecert certify``: run the requested conformance profiles with pytest and judge the report.

Data flow. The options are the plugin's (``suite.options.OPTIONS``), so certify first resolves
them itself — an unknown implementation, profile, feature or timeout key is a one-line error and
exit status 2, before pytest starts. Then it runs pytest in-process on the suite's collector
module with the servecert plugin, JUnit (``DIR/junit.xml``) and allure (``DIR/allure-results``)
on, and ``-n N --dist loadgroup`` when ``--workers N`` > 1. The plugin writes
``DIR/conformance-report.yaml`` and ``DIR/summary.html``; certify reads the YAML back, prints one
line per profile and section, and exits 0 only when every requested profile's core result is
``success`` (1 otherwise; 2 when the input was bad or the run ended without a report).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

BAD_INPUT = 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    from servecert.conformance.suite import options

    for option in options.OPTIONS:
        p.add_argument(option.cli_flag or option.flag, **option.kwargs())
    p.set_defaults(servecert_implementation="reference", servecert_report_dir="reports/latest")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="pytest-xdist worker processes (default 1: no xdist)")
    p.add_argument("pytest_args", nargs="*", metavar="-- PYTEST_ARGS", help="extra pytest arguments after --, e.g. -- -x -k Filter")


def _error(message: str) -> int:
    print(f"servecert certify: error: {message}", file=sys.stderr)
    return BAD_INPUT


def pytest_args(values: dict[str, Any], report_dir: Path, workers: int, extra: list[str]) -> list[str]:
    from servecert.conformance import plugin
    from servecert.conformance.suite import options

    args = [str(plugin.COLLECTOR), "-p", "servecert", "-p", "allure_pytest", "-p", "no:cacheprovider"]
    # NB: loading the adapter above imported servecert's packages; pytest would warn that it cannot
    # rewrite their asserts (the distribution provides a pytest11 plugin) — expected, not a problem.
    args += ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
    args += options.to_pytest_args({**values, "servecert_report_dir": str(report_dir)})
    args += ["--junitxml", str(report_dir / "junit.xml"), "--alluredir", str(report_dir / "allure-results"), "--clean-alluredir"]
    if workers > 1:
        args += ["-p", "xdist", "-n", str(workers), "--dist", "loadgroup"]
    return args + extra


def _prepared() -> bool:
    """Build what the embedded cluster needs before pytest starts: no case ever waits on a build."""
    import os

    from servecert.harness import prerequisites
    from servecert.harness.cluster import backends

    if os.environ.get(backends.BACKEND_ENV, "embedded") != "embedded":
        return True
    try:
        prerequisites.ensure("cluster")
    except prerequisites.PrerequisiteError as exc:
        _error(f"{exc}\nrun `servecert setup --env cluster` to retry the build alone")
        return False
    return True


def run(args: argparse.Namespace) -> int:
    import pytest

    from servecert.conformance.suite import options
    from servecert.reports import conformance_report, summary_page

    values = vars(args)
    try:
        settings = options.resolve(values, timeout_flag="--timeout")
    except options.OptionError as exc:
        return _error(str(exc))
    if settings is None:
        return _error("--implementation is empty")
    if args.workers < 1:
        return _error(f"--workers must be at least 1, got {args.workers}")
    if settings.run.env == "cluster" and not _prepared():
        return BAD_INPUT
    report_dir = Path(args.servecert_report_dir).resolve()
    report_path = report_dir / conformance_report.FILENAME
    for stale in (report_path, report_dir / summary_page.FILENAME):
        stale.unlink(missing_ok=True)

    status = pytest.main(pytest_args(values, report_dir, args.workers, list(args.pytest_args)))
    if not report_path.exists():
        return _error(f"the run ended without a report (pytest exit status {int(status)}); see the output above")
    report = conformance_report.read(report_path)
    print()
    for line in conformance_report.result_lines(report):
        print(line)
    certified = all(profile["core"]["result"] == conformance_report.SUCCESS for profile in report["profiles"])
    names = ", ".join(profile["name"] for profile in report["profiles"])
    verdict = "certified" if certified else "not certified (a core result is not success)"
    print(f"servecert certify: {settings.implementation_name} on {names}: {verdict}; report in {report_dir}")
    return 0 if certified else 1
