"""Cluster tests: the shared ``cluster`` fixture, and the binaries built before any test's timeout starts."""

from __future__ import annotations

import os
import sys

import pytest

from fixtures.cluster.pytest_fixture import cluster

__all__ = ["cluster"]


def pytest_collection_finish(session: pytest.Session) -> None:
    # NB: a cold build takes ~10 min on 2 cores, longer than the per-test timeout; build here,
    # before any test starts (under the builder's lock, so xdist workers build once).
    if os.environ.get("SERVECERT_CLUSTER_BACKEND", "embedded") != "embedded":
        return
    if any(item.get_closest_marker("cluster") for item in session.items):
        from fixtures.cluster import binaries

        binaries.ensure(progress=lambda line: print(line, file=sys.stderr, flush=True))
