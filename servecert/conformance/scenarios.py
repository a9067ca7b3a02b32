"""The suite's scenarios as the benchmarks use them: the one public seam from the suite to ``benchmarks``.

A benchmark measures what a conformance test runs (the rollout of block size 16 -> 32 under
streaming load; the planner's SLA scenarios), so it needs a few of the profiles' scenario pieces.
Those live in each profile's private modules (``tests/<profile>/_scenarios.py``, ``_checks.py``,
``_verdict.py``), which a test may reshape at will. The benchmarks import them only from here
(the ``benchmarks-public-seam`` import contract forbids ``benchmarks -> conformance.tests``), so
a change to a test that a benchmark depends on shows up as a change to this module.
"""

from __future__ import annotations

from servecert.conformance.tests.planner_scaling._checks import FIGURES_ENV as PLANNER_FIGURES_ENV
from servecert.conformance.tests.rollout_isolation._checks import address as rollout_address
from servecert.conformance.tests.rollout_isolation._checks import run_in as run_rollout
from servecert.conformance.tests.rollout_isolation._scenarios import BLOCK_SIZE as ROLLOUT_BLOCK_SIZE
from servecert.conformance.tests.rollout_isolation._scenarios import DGD_NAME as ROLLOUT_DGD_NAME
from servecert.conformance.tests.rollout_isolation._scenarios import MODEL as ROLLOUT_MODEL
from servecert.conformance.tests.rollout_isolation._scenarios import TARGETS as ROLLOUT_TARGETS
from servecert.conformance.tests.rollout_isolation._scenarios import ctype
from servecert.conformance.tests.rollout_isolation._verdict import Timeline, observed_shares, serving
from servecert.conformance.tests.rollout_isolation._verdict import verdict as rollout_verdict

__all__ = [
    "PLANNER_FIGURES_ENV",
    "ROLLOUT_BLOCK_SIZE",
    "ROLLOUT_DGD_NAME",
    "ROLLOUT_MODEL",
    "ROLLOUT_TARGETS",
    "Timeline",
    "ctype",
    "observed_shares",
    "rollout_address",
    "rollout_verdict",
    "run_rollout",
    "serving",
]
