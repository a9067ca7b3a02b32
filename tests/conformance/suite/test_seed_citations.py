"""Every conformance test cites its seed verbatim: the quote is a line (or part of one) of that seed.

The seeds are the project's specifications, kept beside the repository (``../shared/seeds``,
``NNN_<digest>.txt``), not in it; ``SERVECERT_SEEDS_DIR`` names their folder anywhere else. The
section must be named in the same seed, so a citation cannot drift to a heading the seed does not
have. Where no folder holds the five seeds (a clone with nothing beside it), one skipped item says
so and how to give them; CI's checkout has them beside it, so there every citation is checked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from servecert.conformance.suite import collect
from servecert.conformance.suite.test_case import SEEDS, ConformanceTest

ROOT = Path(__file__).resolve().parents[3]
BESIDE = ROOT.parent / "shared" / "seeds"
SEEDS_ENV = "SERVECERT_SEEDS_DIR"
TESTS = collect.collect()


def seeds_dir() -> Path | None:
    folder = Path(os.environ.get(SEEDS_ENV) or BESIDE)
    return folder if all(any(folder.glob(f"{seed}_*.txt")) for seed in SEEDS) else None


def citations() -> list[Any]:
    """One item per conformance test, or a single skipped one naming where the seeds were looked for."""
    if seeds_dir() is None:
        where = os.environ.get(SEEDS_ENV) or str(BESIDE)
        reason = f"seed citations not checked: no seeds NNN_*.txt in {where}; set {SEEDS_ENV}=<folder of the seeds>"
        return [pytest.param(None, id="seeds-not-given", marks=pytest.mark.skip(reason=reason))]
    return [pytest.param(test, id=test.short_name) for test in TESTS]


@pytest.fixture(scope="module")
def seed_texts() -> dict[str, str]:
    folder = seeds_dir()
    assert folder is not None, f"the seeds vanished from {os.environ.get(SEEDS_ENV) or BESIDE} during the run"
    return {seed: next(folder.glob(f"{seed}_*.txt")).read_text() for seed in SEEDS}


@pytest.mark.parametrize("test", citations())
def test_the_citation_is_in_the_seed(test: ConformanceTest, seed_texts: dict[str, str]) -> None:
    ref = test.seed
    assert ref.quote in seed_texts[ref.seed], f"{test.source}: seed {ref.seed} has no line containing {ref.quote!r}"
    assert ref.section in seed_texts[ref.seed], f"{test.source}: seed {ref.seed} names no section {ref.section!r}"


def test_every_seed_has_a_test() -> None:
    cited = {t.seed.seed for t in TESTS}
    assert cited == set(SEEDS), f"no conformance test cites seed(s) {sorted(set(SEEDS) - cited)}"
