"""Operator tests: the shared session ``cluster`` fixture, re-exported as tests/harness/cluster does it.

The binaries are built (or found cached) before any test's timeout starts, by the same hook as
tests/harness/cluster's, so ``pytest tests/reference_impl/operator`` on a cold machine does not time out in the fixture.
"""

from __future__ import annotations

import pytest

from servecert.harness.cluster.pytest_fixture import cluster
from tests.harness.cluster import conftest as cluster_conftest

__all__ = ["cluster"]


def pytest_collection_finish(session: pytest.Session) -> None:
    cluster_conftest.pytest_collection_finish(session)
