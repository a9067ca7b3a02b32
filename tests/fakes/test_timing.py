"""Timing models give the values their formulas and tables say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servecert.fakes import timing


def test_polynomial_prefill_is_dynamo_mockers_fit() -> None:
    m = timing.Polynomial()
    assert m.prefill_ms(0) == 0.0
    assert m.prefill_ms(1000) == pytest.approx(4.209989e-7 * 1e6 + 0.01518344 * 1000 + 16.50142)
    assert m.prefill_ms(1) == pytest.approx(16.5166, abs=1e-3)


@pytest.mark.parametrize(("u", "expected"), [(0.0, 5.74), (0.5, -25.74 * 0.25 + 54.01 * 0.5 + 5.74), (1.0, 34.01), (2.0, 34.01)])
def test_polynomial_decode_step_follows_kv_utilisation(u: float, expected: float) -> None:
    assert timing.Polynomial().decode_ms(u, 0) == pytest.approx(expected)


def test_polynomial_decode_step_is_floored_at_one_millisecond() -> None:
    assert timing.Polynomial().decode_ms(-5.0, 0) == pytest.approx(5.74)  # u is clamped to [0, 1]
    assert timing.Polynomial(a=0, b=0, c=0).decode_ms(0.0, 0) >= 1.0


def test_table_interpolates_linearly(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"prefill": {"isl": [0, 1000], "ttft_ms": [10, 110]},
                                "decode": {"active_kv_tokens": [0, 10000], "itl_ms": [5, 25]}}))
    m = timing.from_spec(f"table:{path}")
    assert m.prefill_ms(500) == pytest.approx(60.0)
    assert m.decode_ms(0.0, 2500) == pytest.approx(10.0)
    assert m.prefill_ms(0) == 0.0


def test_a_bad_table_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("prefill: {isl: [1]}\n")
    with pytest.raises(ValueError, match=str(path)):
        timing.Table.from_file(path)


def test_constant_and_spec_parsing() -> None:
    m = timing.from_spec("constant:20:10")
    assert (m.prefill_ms(5), m.prefill_ms(0), m.decode_ms(0.3, 9)) == (20.0, 0.0, 10.0)
    with pytest.raises(ValueError, match="constant:PREFILL_MS:DECODE_MS"):
        timing.from_spec("constant:1")
    with pytest.raises(ValueError, match="unknown timing model"):
        timing.from_spec("quadratic")
