"""Cluster tests: the shared ``cluster`` fixture, and the binaries built before any test's timeout starts."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from servecert.harness.cluster.backends import Cluster
from servecert.harness.cluster.pytest_fixture import cluster

__all__ = ["api", "cluster"]


@pytest.fixture(scope="module")
def api(cluster: Cluster) -> Iterator[Any]:
    """An admin client of the shared cluster, for tests that need its kwok nodes and pod runner."""
    if not cluster.has_pod_runner:
        pytest.skip(f"backend {cluster.backend} has no kwok nodes or pod runner")
    api_client = cluster.api()
    # NB: `up` installs the suite's CRDs; replacing them here would make every running kopf operator re-scan its resources.
    yield api_client
    api_client.close()


def pytest_collection_finish(session: pytest.Session) -> None:
    # NB: a cold build takes ~10 min on 2 cores, longer than the per-test timeout; build here,
    # before any test starts (under the builder's lock, so xdist workers build once).
    if os.environ.get("SERVECERT_CLUSTER_BACKEND", "embedded") != "embedded":
        return
    if any(item.get_closest_marker("cluster") for item in session.items):
        from servecert.harness.cluster import binaries

        binaries.ensure(progress=lambda line: print(line, file=sys.stderr, flush=True))
