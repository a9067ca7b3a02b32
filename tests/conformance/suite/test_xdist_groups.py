"""``xdist_group`` keeps a group's tests on one worker: the plugin's serial tests and ``make test`` rely on it.

The plugin marks every non-parallel conformance test ``xdist_group(SERIAL_GROUP)``, so a
``--workers 2`` certification never runs two of them at once, and ``make test`` keeps its heavy
certify runs apart the same way (``--dist loadgroup``). pytest 9.2 with pytest-xdist 3.8 loses the
group (xdist appends it to ``_nodeid``, pytest 9.2 builds the node id from elsewhere): a grouped
test ran on both workers and the CRD tests raced (CI of stop 24). pyproject.toml pins pytest
below 9.2; this test fails if an install brings the pair back together.
"""

from __future__ import annotations

import pytest

GROUPED = """
import os, pytest, time

@pytest.mark.xdist_group("together")
@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    time.sleep(0.2)
    print("WORKER", i, os.environ["PYTEST_XDIST_WORKER"])
"""


def test_a_group_runs_on_one_worker(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_grouped=GROUPED)
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-rP")
    result.assert_outcomes(passed=6)
    workers = {line.split()[-1] for line in result.outlines if line.startswith("WORKER ")}
    assert len(workers) == 1, f"the tests of one xdist_group ran on {sorted(workers)}; pytest and pytest-xdist no longer agree"
