"""docs/traceability.md is generated and current, and names only reference code that exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from servecert import traceability
from servecert.conformance.suite import collect

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_is_up_to_date() -> None:
    expected = traceability.render(collect.collect())
    current = traceability.OUTPUT.read_text() if traceability.OUTPUT.exists() else ""
    assert current == expected, "docs/traceability.md is out of date; run: python -m servecert.traceability"


def test_every_test_names_reference_code_that_exists() -> None:
    tests = {t.short_name for t in collect.collect()}
    missing = sorted(tests - set(traceability.REFERENCE_CODE))
    assert not missing, f"no reference code named for {missing} (servecert/traceability.py REFERENCE_CODE)"
    unknown = sorted(set(traceability.REFERENCE_CODE) - tests)
    assert not unknown, f"REFERENCE_CODE names tests that do not exist: {unknown}"
    gone = sorted(p for paths in traceability.REFERENCE_CODE.values() for p in paths if not (ROOT / p).exists())
    assert not gone, f"REFERENCE_CODE names files that do not exist: {gone}"


def test_check_mode_fails_on_a_stale_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = tmp_path / "traceability.md"
    stale.write_text("# stale\n")
    monkeypatch.setattr(traceability, "OUTPUT", stale)
    assert traceability.main(["--check"]) == 1
    assert traceability.main([]) == 0
    assert traceability.main(["--check"]) == 0
