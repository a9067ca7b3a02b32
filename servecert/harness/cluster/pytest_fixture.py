"""The session-scoped ``cluster`` fixture: one embedded cluster per test run, shared by xdist workers.

Data flow::

    every worker: flock <clusters>/<run>.lock
        register itself in <clusters>/<run>.users/<pid>
        the cluster state says healthy? reuse it : embedded.up(<run>, TEST_TOPOLOGY)
    ... tests ...
    every worker at session end: flock, drop its entry (and entries of dead pids);
        the last one out runs embedded.down(<run>) — if a joiner started it (<run>.started)

A cluster someone started by hand (``servecert cluster up --name N``, then
``SERVECERT_CLUSTER_NAME=N servecert certify ...``) is joined and left running: only a cluster a
joiner brought up is taken down by the last one out.

Why shared and not one per worker: a cluster costs ~15 s and ~1 GB, and the machines have two
cores; the tests isolate themselves by namespace and by nodes they create. The run id is
pytest-xdist's ``testrunuid`` (the same in every worker), or a fresh one without xdist. A
worker that dies leaves a pid entry that the next teardown recognises as dead, so the cluster
is still taken down. Backends other than ``embedded`` come from SERVECERT_CLUSTER_BACKEND and
are skipped with their reason when they cannot run here.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from servecert.harness.cluster import backends, embedded, processes, state, topology

TEST_TOPOLOGY = topology.TopologySpec(name="servecert", zones=2, racks_per_zone=2, hosts_per_rack=2, gpus_per_node=8)
"""8 nodes: zone-0/1 x rack-z-0/1 x 2 hosts, 8 GPUs each."""
_RUN_ID: str | None = None


def run_id(config: pytest.Config) -> str:
    global _RUN_ID
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return str(workerinput["testrunuid"])[:10]
    if _RUN_ID is None:
        _RUN_ID = uuid.uuid4().hex[:10]
    return _RUN_ID


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _healthy(name: str) -> bool:
    try:
        return embedded.status(name).healthy
    except state.ClusterStateError:
        return False


def _users(directory: Path) -> list[int]:
    alive: list[int] = []
    for entry in directory.glob("*") if directory.is_dir() else []:
        pid = int(entry.name)
        if processes.alive(pid):
            alive.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return alive


_HELD: dict[str, tuple[int, backends.Cluster]] = {}
"""Clusters this process holds: name -> (uses, cluster). Two conftests importing the fixture make
two session fixtures in one process; the process registers (and leaves) once."""


@contextlib.contextmanager
def shared_embedded(name: str, spec: topology.TopologySpec = TEST_TOPOLOGY) -> Iterator[backends.Cluster]:
    held = _HELD.get(name)
    if held is not None:
        _HELD[name] = (held[0] + 1, held[1])
        try:
            yield held[1]
        finally:
            uses, cluster = _HELD[name]
            _HELD[name] = (uses - 1, cluster)
        return
    with _joined(name, spec) as cluster:
        _HELD[name] = (1, cluster)
        try:
            yield cluster
        finally:
            _HELD.pop(name, None)


@contextlib.contextmanager
def _joined(name: str, spec: topology.TopologySpec) -> Iterator[backends.Cluster]:
    root = state.clusters_root()
    lock, users, started = root / f"{name}.lock", root / f"{name}.users", root / f"{name}.started"
    with _locked(lock):
        users.mkdir(parents=True, exist_ok=True)
        (users / str(os.getpid())).touch()
        if _healthy(name):
            current = state.load(name)
        else:
            with contextlib.suppress(state.ClusterStateError):
                embedded.down(name)
            current = embedded.up(name, spec, progress=_progress)
            started.touch()
    try:
        yield backends.Cluster(name=name, backend="embedded", kubeconfig=Path(current.kubeconfig), state=current)
    finally:
        with _locked(lock):
            (users / str(os.getpid())).unlink(missing_ok=True)
            if not _users(users):
                if started.exists():
                    with contextlib.suppress(state.ClusterStateError):
                        embedded.down(name)
                    started.unlink(missing_ok=True)
                with contextlib.suppress(FileNotFoundError):
                    users.rmdir()
                lock.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[backends.Cluster]:
    """A running cluster for the whole session (see the module docstring for sharing and teardown)."""
    chosen = os.environ.get(backends.BACKEND_ENV, "embedded")
    if chosen == "embedded":
        with shared_embedded(f"pytest-{run_id(request.config)}") as shared:
            yield shared
        return
    backend = backends.select(chosen)
    try:
        other = backend.up(progress=_progress)
    except backends.BackendUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield other
    finally:
        backend.down()
