"""Certify runs of the cluster profiles join the session's one embedded cluster (tests/harness/cluster's fixture).

The binaries are built (or found cached) before any test's timeout starts, by tests/harness/cluster's hook.
"""

from __future__ import annotations

import pytest

from servecert.harness.cluster.pytest_fixture import cluster
from tests.harness.cluster import conftest as cluster_conftest

__all__ = ["cluster"]


def pytest_collection_finish(session: pytest.Session) -> None:
    cluster_conftest.pytest_collection_finish(session)
