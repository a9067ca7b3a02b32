"""``summary.html``: the conformance report as one readable, self-contained page.

It shows what the YAML report says — implementation, per profile the core and extended results —
plus what the YAML leaves out: every test with each of its cases, its verdict, and the failure
message with the traceback folded under it. No external assets (inline CSS, no script), so the
page can be attached to a submission or opened from a CI artifact as is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from servecert.reports import conformance_report as cr

FILENAME = "summary.html"

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
.passed, .success { color: #176f2c; font-weight: bold; }
.failed, .failure { color: #b00020; font-weight: bold; }
.partial, .skipped, .not-supported, .provisional-skipped, .wrong-environment, .not-run { color: #8a6100; }
pre { white-space: pre-wrap; font-size: 0.85em; background: #fafafa; padding: 0.5em; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dt { font-weight: bold; }
.phase { font-size: 0.85em; color: #555; }
"""


def _status(value: str) -> str:
    return f'<span class="{escape(value)}">{escape(value)}</span>'


def _implementation(report: Mapping[str, Any]) -> str:
    impl = report["implementation"]
    rows = [
        ("Organization", impl.get("organization", "")),
        ("Project", impl.get("project", "")),
        ("Version", impl.get("version", "")),
        ("URL", impl.get("url", "")),
        ("Contact", ", ".join(impl.get("contact", []))),
        ("Environment", report["environment"]),
        ("Mode", report["mode"]),
        ("Suite version", report["suiteVersion"]),
        ("Date", report["date"]),
        ("Supported features", ", ".join(report.get("supportedFeatures", [])) or "none"),
    ]
    if report.get("timeoutOverrides"):
        rows.append(("Timeout overrides", ", ".join(f"{k}={v}" for k, v in report["timeoutOverrides"].items())))
    return "<dl>" + "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in rows) + "</dl>"


def _phase(record: cr.CaseRecord) -> str:
    """Where a failed case failed; a failure in setup means the rule itself was never reached."""
    if record.status != cr.FAILED or not record.phase:
        return ""
    return f'<br><span class="phase">in {escape(record.phase)}</span>'


def _case_rows(profile: cr.ProfileSpec, records: Sequence[cr.CaseRecord]) -> str:
    rows = []
    for record in sorted((r for r in records if profile.covers(r.features)), key=lambda r: (r.test, r.case)):
        message = escape(record.message)
        if record.detail:
            message += f"<details><summary>details</summary><pre>{escape(record.detail)}</pre></details>"
        rows.append(
            f'<tr><td title="{escape(record.description)}">{escape(record.test)}</td><td>{escape(record.case)}</td>'
            f"<td>{escape(profile.section(record.features))}</td><td>{_status(record.status)}"
            f"{' (error)' if record.error else ''}{_phase(record)}</td><td>{record.duration_s:.2f}</td><td>{message}</td></tr>"
        )
    if not rows:
        return "<p>No test of this profile was collected.</p>"
    head = "<tr><th>Test</th><th>Case</th><th>Section</th><th>Verdict</th><th>Seconds</th><th>Message</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def _profile(section: Mapping[str, Any], spec: cr.ProfileSpec, records: Sequence[cr.CaseRecord]) -> str:
    summary = []
    for name in (cr.CORE, cr.EXTENDED):
        part = section[name]
        stats = part["statistics"]
        summary.append(
            f"<tr><td>{name}</td><td>{_status(part['result'])}</td><td>{stats['passed']}</td>"
            f"<td>{stats['failed']}</td><td>{stats['skipped']}</td></tr>"
        )
    unsupported = section[cr.EXTENDED].get("unsupportedFeatures", [])
    return (
        f"<h2>{escape(section['name'])}</h2><p>{escape(section['summary'])}</p>"
        "<table><tr><th>Section</th><th>Result</th><th>Passed</th><th>Failed</th><th>Skipped</th></tr>"
        f"{''.join(summary)}</table>"
        + (f"<p>Unsupported extended features: {escape(', '.join(unsupported))}</p>" if unsupported else "")
        + _case_rows(spec, records)
    )


def render(report: Mapping[str, Any], profiles: Sequence[cr.ProfileSpec], records: Sequence[cr.CaseRecord]) -> str:
    specs = {p.name: p for p in profiles}
    impl = report["implementation"]
    title = f"servecert conformance: {impl.get('project', '')} {impl.get('version', '')}".strip()
    body = "".join(_profile(section, specs[section["name"]], records) for section in report["profiles"] if section["name"] in specs)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1>{_implementation(report)}{body}</body></html>\n"
    )


def write(directory: Path, report: Mapping[str, Any], profiles: Sequence[cr.ProfileSpec], records: Sequence[cr.CaseRecord]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILENAME
    path.write_text(render(report, profiles, records))
    return path
