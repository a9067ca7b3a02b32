"""From the run's results to the report files: the suite's side of ``servecert/reports/``.

Data flow. Each pytest item ends with a small record (``record``: test, case, status, message,
traceback) that travels on its pytest report — xdist ships it from the worker to the controller
with the rest of the report. On the controller (or the only process), ``write`` re-collects the
tests of the requested profiles to know every (test, case) that should have a result, marks the
ones without a record as ``not-run`` (deselected, or the run stopped early), and passes plain
data to ``servecert.reports.conformance_report`` and ``servecert.reports.summary_page``, which never import the suite.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servecert.conformance.suite import phases
from servecert.reports import conformance_report as cr
from servecert.reports import summary_page

if TYPE_CHECKING:
    from servecert.conformance.suite.options import Settings
    from servecert.conformance.suite.test_case import ConformanceTest

NODE_NAME = re.compile(r"(?P<test>[A-Za-z0-9]+)\[(?P<case>[^\]]+)\]$")
Key = tuple[str, str]


def suite_version() -> str:
    try:
        return importlib_metadata.version("servecert")
    except importlib_metadata.PackageNotFoundError:
        return "unknown"


def record(
    test: str,
    case: str,
    status: str,
    *,
    message: str = "",
    detail: str = "",
    error: bool = False,
    duration_s: float = 0.0,
    phase: str = "",
) -> dict[str, Any]:
    """The JSON-friendly record one item attaches to its pytest report (``phase``: where it failed)."""
    return {
        "test": test,
        "case": case,
        "status": status,
        "message": message,
        "detail": detail,
        "error": error,
        "duration_s": duration_s,
        "phase": phase,
    }


def record_from_nodeid(nodeid: str, message: str) -> dict[str, Any] | None:
    """A failed record for an item that left none (a crashed xdist worker), or None if not ours."""
    found = NODE_NAME.search(nodeid.rsplit("::", 1)[-1])
    if found is None:
        return None
    return record(found["test"], found["case"], cr.FAILED, message=message, error=True)


def merge(records: dict[Key, dict[str, Any]], new: Mapping[str, Any]) -> None:
    """Keep one record per case; a failure (say, in teardown) wins over what came before."""
    key = (str(new["test"]), str(new["case"]))
    if key not in records or new["status"] == cr.FAILED:
        records[key] = dict(new)


def case_records(tests: Sequence[ConformanceTest], records: Mapping[Key, Mapping[str, Any]]) -> list[cr.CaseRecord]:
    out = []
    for test in tests:
        for case in test.cases:
            raw = records.get((test.short_name, case.id)) or record(
                test.short_name, case.id, cr.NOT_RUN, message="not run in this session (deselected, or the run stopped early)"
            )
            out.append(
                cr.CaseRecord(
                    test=test.short_name,
                    case=case.id,
                    status=str(raw["status"]),
                    features=test.features,
                    message=str(raw.get("message", "")),
                    detail=str(raw.get("detail", "")),
                    error=bool(raw.get("error", False)),
                    duration_s=float(raw.get("duration_s", 0.0)),
                    phase=str(raw.get("phase", "")),
                    provisional=test.provisional,
                    description=test.description,
                    seed=f'{test.seed}: "{test.seed.quote}"',
                    suite_note=test.seed.note,
                )
            )
    return out


def setup_failure_lines(cases: Sequence[cr.CaseRecord]) -> list[str]:
    """One line per case that failed before its rule was checked: the step, its time, the cause's first line."""
    lines = []
    for case in cases:
        if case.status == cr.FAILED and case.phase and not case.phase.startswith("check"):
            first = case.message.splitlines()[0] if case.message else f"failed in {case.phase}"
            log = phases.log_named_in(case.message)
            lines.append(f"{case.name}: {first}" + (f" (log: {log})" if log else ""))
    return lines


def build(
    settings: Settings, tests: Sequence[ConformanceTest], records: Mapping[Key, Mapping[str, Any]]
) -> tuple[dict[str, Any], list[cr.ProfileSpec], list[cr.CaseRecord]]:
    run = cr.RunInfo(
        date=datetime.now(UTC).isoformat(timespec="seconds"),
        suite_version=suite_version(),
        mode=settings.report_mode,
        environment=settings.run.env,
        implementation=settings.metadata.to_dict(),
        supported_features=settings.run.supported_features,
        timeout_overrides=settings.run.timeouts.overrides(),
        timeouts_beyond_bounds=settings.run.timeouts.beyond_bounds(),
    )
    env = settings.run.env
    specs = [
        cr.ProfileSpec(p.name, p.core, p.extended, p.judged_elsewhere(env), p.tests_judged_elsewhere(tests, env))
        for p in settings.profiles
    ]
    cases = case_records(tests, records)
    return cr.build(run, specs, cases), specs, cases


def write(directory: Path, report: Mapping[str, Any], specs: Sequence[cr.ProfileSpec], cases: Sequence[cr.CaseRecord]) -> list[Path]:
    return [cr.write(directory, report), summary_page.write(directory, report, specs, cases)]
