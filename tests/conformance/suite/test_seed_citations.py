"""Every conformance test cites its seed verbatim: the quote is a line (or part of one) of that seed.

The seeds are the project's specifications, kept beside the repository (``../shared/seeds``,
``NNN_<digest>.txt``), not in it; ``SERVECERT_SEEDS_DIR`` points elsewhere. The section must be
named in the same seed, so a citation cannot drift to a heading the seed does not have.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conformance.suite import collect
from conformance.suite.test_case import SEEDS, ConformanceTest

ROOT = Path(__file__).resolve().parents[3]
BESIDE = ROOT.parent / "shared" / "seeds"
TESTS = collect.collect()


def seeds_dir() -> Path | None:
    folder = Path(os.environ.get("SERVECERT_SEEDS_DIR") or BESIDE)
    return folder if all(any(folder.glob(f"{seed}_*.txt")) for seed in SEEDS) else None


@pytest.fixture(scope="module")
def seed_texts() -> dict[str, str]:
    folder = seeds_dir()
    if folder is None:
        pytest.skip(f"the seed specifications are not beside the repository ({BESIDE}); set SERVECERT_SEEDS_DIR")
    return {seed: next(folder.glob(f"{seed}_*.txt")).read_text() for seed in SEEDS}


@pytest.mark.parametrize("test", TESTS, ids=[t.short_name for t in TESTS])
def test_the_quote_is_in_the_seed(test: ConformanceTest, seed_texts: dict[str, str]) -> None:
    ref = test.seed
    assert ref.quote in seed_texts[ref.seed], f"{test.source}: seed {ref.seed} has no line containing {ref.quote!r}"


@pytest.mark.parametrize("test", TESTS, ids=[t.short_name for t in TESTS])
def test_the_section_is_named_in_the_seed(test: ConformanceTest, seed_texts: dict[str, str]) -> None:
    ref = test.seed
    assert ref.section in seed_texts[ref.seed], f"{test.source}: seed {ref.seed} names no section {ref.section!r}"


def test_every_seed_has_a_test() -> None:
    cited = {t.seed.seed for t in TESTS}
    assert cited == set(SEEDS), f"no conformance test cites seed(s) {sorted(set(SEEDS) - cited)}"
