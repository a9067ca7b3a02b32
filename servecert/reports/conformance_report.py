"""The versioned conformance report: per-case results in, ``conformance-report.yaml`` out.

Data flow. The suite hands over plain data — ``RunInfo`` (who, when, where, with which
features), one ``ProfileSpec`` per requested profile and one ``CaseRecord`` per (test, case) —
and ``build`` turns it into the report mapping, which ``write`` dumps as YAML. Nothing here
imports the suite: reports are a leaf, so any tool can rebuild or check a report from records.

The rules (gateway-api ``ConformanceReport``, adapted). Within a profile a test is *extended*
when any of its features is an extended feature of the profile, else *core*. A test counts once:
failed if any case failed, passed if any case passed, otherwise skipped. Skipped means something
the run did not show: ``skipped`` (opted out by flag), ``wrong-environment``, a case not run at
all, and — in core only — ``not-supported``, since every claimant must support the core. In the
extended section an unsupported feature is not a skip: it is declared in ``unsupportedFeatures``
and its tests are left out of the statistics (declare unsupported rather than skip, gateway-api
PR #3651). ``provisional-skipped`` tests count nowhere, nor do the tests of a feature the run's
environment cannot judge (``ProfileSpec.elsewhere``; listed under ``judgedElsewhere``, and such a
core feature is not missing when unsupported), nor do the tests and cases another environment of the
profile judges instead of this one (``ProfileSpec.elsewhere_tests``, also listed there). A section's
result is ``failure`` when a test failed, ``partial`` when none failed but one was skipped (core
also: a core feature is unsupported, or no core test ran at all), ``success`` otherwise. Each failed
case is listed under the section's ``failures`` with the seed sentence its test enforces and what the
suite adds to it (``suiteNote``: the bounds and figures that are the suite's, not the seed's), so a
reader tells an implementation's departure from the seed from a number of the suite's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

API_VERSION = "servecert.dev/v1alpha1"
KIND = "ConformanceReport"
FILENAME = "conformance-report.yaml"

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
NOT_SUPPORTED = "not-supported"
PROVISIONAL_SKIPPED = "provisional-skipped"
WRONG_ENVIRONMENT = "wrong-environment"
NOT_RUN = "not-run"

SUCCESS = "success"
PARTIAL = "partial"
FAILURE = "failure"
CORE = "core"
EXTENDED = "extended"
MESSAGE_CHARS = 600  # of a failure's first line in the report (junit.xml keeps the whole message)


@dataclass(frozen=True)
class CaseRecord:
    """The result of one case of one test, with what the report needs to know about the test."""

    test: str
    case: str
    status: str
    features: tuple[str, ...]
    message: str = ""
    detail: str = ""
    error: bool = False
    duration_s: float = 0.0
    phase: str = ""
    """Where a failed case failed: ``setup: <step>``, ``check`` or ``cleanup`` ('' when it did not fail)."""
    provisional: bool = False
    description: str = ""
    seed: str = ""
    """Where the test's rule is written: ``seed 003, <section>: "<the seed's sentence>"`` ('' when it cites none)."""
    suite_note: str = ""
    """What the suite adds to the seed's words (its own bounds and figures among them), as the test states it."""

    @property
    def name(self) -> str:
        return f"{self.test}[{self.case}]"

    def failure(self) -> dict[str, str]:
        """The report's entry for a failed case: the rule it broke as the seed words it, the suite's own numbers in the
        verdict, and the first line of what was seen, so a vendor can tell its departure from the suite's bound."""
        entry = {"case": self.name, "seed": self.seed, "suiteNote": self.suite_note}
        entry["message"] = self.message.splitlines()[0][:MESSAGE_CHARS] if self.message else ""
        return {k: v for k, v in entry.items() if v}


@dataclass(frozen=True)
class ProfileSpec:
    name: str
    core: frozenset[str]
    extended: frozenset[str]
    elsewhere: frozenset[str] = frozenset()
    """Features this run's environment cannot judge: their tests count nowhere here (``judgedElsewhere``)."""
    elsewhere_tests: frozenset[str] = frozenset()
    """Tests (``ShortName``) and cases (``ShortName[case]``) another environment of the profile judges, not this
    run's: they too count nowhere here; a test counts by its other cases."""

    def covers(self, features: Iterable[str]) -> bool:
        wanted = set(features)
        return bool(wanted) and wanted <= (self.core | self.extended)

    def section(self, features: Iterable[str]) -> str:
        return EXTENDED if set(features) & self.extended else CORE


@dataclass(frozen=True)
class RunInfo:
    date: str
    suite_version: str
    mode: str
    environment: str
    implementation: Mapping[str, Any]
    supported_features: frozenset[str]
    timeout_overrides: Mapping[str, float] = field(default_factory=dict)
    timeouts_beyond_bounds: Mapping[str, float] = field(default_factory=dict)


def test_status(statuses: Iterable[str]) -> str:
    """One status for a test from its cases' statuses: failed > passed > not-supported (all) > skipped."""
    seen = set(statuses)
    if FAILED in seen:
        return FAILED
    if PASSED in seen:
        return PASSED
    if seen == {NOT_SUPPORTED}:
        return NOT_SUPPORTED
    if seen == {PROVISIONAL_SKIPPED}:
        return PROVISIONAL_SKIPPED
    return SKIPPED


def _by_test(records: Iterable[CaseRecord]) -> dict[str, list[CaseRecord]]:
    out: dict[str, list[CaseRecord]] = {}
    for record in records:
        out.setdefault(record.test, []).append(record)
    return out


def _section(name: str, tests: Mapping[str, str], *, unsupported_core: Sequence[str] = ()) -> dict[str, Any]:
    counted = {test: status for test, status in tests.items() if status in (PASSED, FAILED, SKIPPED)}
    failed = sorted(t for t, s in counted.items() if s == FAILED)
    skipped = sorted(t for t, s in counted.items() if s == SKIPPED)
    passed = len(counted) - len(failed) - len(skipped)
    if failed:
        result = FAILURE
    elif skipped or (name == CORE and (unsupported_core or passed == 0)):
        result = PARTIAL
    else:
        result = SUCCESS
    return {
        "result": result,
        "statistics": {"passed": passed, "failed": len(failed), "skipped": len(skipped)},
        "failedTests": failed,
        "skippedTests": skipped,
    }


def _summary(core: Mapping[str, Any], extended: Mapping[str, Any], unsupported_core: Sequence[str]) -> str:
    parts = []
    for title, section in (("Core", core), ("Extended", extended)):
        stats = section["statistics"]
        if section["result"] == FAILURE:
            parts.append(f"{title} tests failed with {stats['failed']} test failure(s).")
        elif section["result"] == PARTIAL:
            parts.append(f"{title} tests partially succeeded with {stats['skipped']} test skip(s).")
        else:
            parts.append(f"{title} tests succeeded.")
        if title == "Core" and unsupported_core:
            parts.append(f"Core features not supported: {', '.join(unsupported_core)}.")
        if title == "Core" and sum(stats.values()) == 0:
            parts.append("No core test ran.")
    return " ".join(parts)


def profile_report(profile: ProfileSpec, records: Iterable[CaseRecord], supported: frozenset[str]) -> dict[str, Any]:
    statuses: dict[str, dict[str, str]] = {CORE: {}, EXTENDED: {}}
    elsewhere: dict[str, list[str]] = {CORE: [], EXTENDED: []}
    failures: dict[str, list[dict[str, str]]] = {CORE: [], EXTENDED: []}
    for test, cases in _by_test(r for r in records if profile.covers(r.features)).items():
        section = profile.section(cases[0].features)
        if set(cases[0].features) & profile.elsewhere or test in profile.elsewhere_tests:
            elsewhere[section].append(test)
            continue
        elsewhere[section] += [r.name for r in cases if r.name in profile.elsewhere_tests]
        here = [r for r in cases if r.name not in profile.elsewhere_tests]
        if not here:
            continue
        status = test_status(r.status for r in here)
        if status == NOT_SUPPORTED:
            status = SKIPPED if section == CORE else NOT_SUPPORTED
        statuses[section][test] = status
        failures[section] += [r.failure() for r in here if r.status == FAILED]
    unsupported_core = sorted(profile.core - supported - profile.elsewhere)
    core = _section(CORE, statuses[CORE], unsupported_core=unsupported_core)
    extended = _section(EXTENDED, statuses[EXTENDED])
    for name, section_report in ((CORE, core), (EXTENDED, extended)):
        if failures[name]:
            section_report["failures"] = failures[name]
    if profile.elsewhere or profile.elsewhere_tests:
        core["judgedElsewhere"], extended["judgedElsewhere"] = sorted(elsewhere[CORE]), sorted(elsewhere[EXTENDED])
    extended["supportedFeatures"] = sorted(profile.extended & supported)
    extended["unsupportedFeatures"] = sorted(profile.extended - supported)
    return {"name": profile.name, "summary": _summary(core, extended, unsupported_core), "core": core, "extended": extended}


def build(run: RunInfo, profiles: Sequence[ProfileSpec], records: Sequence[CaseRecord]) -> dict[str, Any]:
    provisional = _by_test(r for r in records if r.provisional)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "date": run.date,
        "suiteVersion": run.suite_version,
        "mode": run.mode,
        "environment": run.environment,
        "implementation": dict(run.implementation),
        "supportedFeatures": sorted(run.supported_features),
        "timeoutOverrides": dict(run.timeout_overrides),
        "timeoutsBeyondConformantBounds": sorted(run.timeouts_beyond_bounds),
        "profiles": [profile_report(p, records, run.supported_features) for p in profiles],
        "succeededProvisionalTests": sorted(t for t, cases in provisional.items() if test_status(r.status for r in cases) == PASSED),
    }


def write(directory: Path, report: Mapping[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILENAME
    path.write_text(yaml.safe_dump(dict(report), sort_keys=False, allow_unicode=True))
    return path


def read(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise ValueError(f"{path} is not a {KIND}")
    return data


def result_lines(report: Mapping[str, Any]) -> list[str]:
    """``PROFILE core: result (N passed, N failed, N skipped)`` and the same for extended, per profile."""
    lines = []
    for profile in report["profiles"]:
        for section in (CORE, EXTENDED):
            stats = profile[section]["statistics"]
            lines.append(
                f"{profile['name']} {section}: {profile[section]['result']} "
                f"({stats['passed']} passed, {stats['failed']} failed, {stats['skipped']} skipped)"
            )
    return lines
